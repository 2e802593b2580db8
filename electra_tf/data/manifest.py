"""The manifest.json written beside pretraining shards, and the checks made before training."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from collections.abc import Sequence
from typing import Any

from electra_tf import fileio
from electra_tf.data import io_utils
from electra_tf.data.tokenizer_spec import TokenizerSpec
from electra_tf.data.vocab import Vocab
from electra_tf.errors import UserError, check_field_types
from electra_tf.filenames import MANIFEST_NAME

FORMAT = "electra_tf.pretraining_data.v1"
_REBUILD = "electra-build-data"
# The byte offset of every RECORD_INDEX_EVERY-th record of a shard is in the manifest: the
# input pipeline starts reading at one of them, so a resume never reads the data before it.
RECORD_INDEX_EVERY = 512


@dataclasses.dataclass(frozen=True)
class ShardInfo:
  """One shard; `offsets` holds the byte offset of records 0, K, 2K, ... (K: the manifest's
  `index_every`), or is empty in data built before the index existed."""

  file: str  # name inside the data dir
  records: int
  bytes: int
  offsets: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class InputInfo:
  path: str  # absolute
  bytes: int
  mtime: float


@dataclasses.dataclass(frozen=True)
class Manifest:
  """What a pretraining data dir holds and how it was built.

  `tokens` counts non-pad tokens ([CLS]/[SEP] included) over all examples.
  """

  data_dir: str
  documents: int
  examples: int
  tokens: int
  vocab_md5: str
  vocab_size: int
  vocab_file: str
  max_seq_length: int
  seed: int
  num_workers: int
  shards: tuple[ShardInfo, ...]
  inputs: tuple[InputInfo, ...]
  build_seconds: float = 0.0
  index_every: int = 0  # 0: no record index (built before it existed)
  tokenizer: dict | None = None  # TokenizerSpec.to_dict(); None: data built before specs
  lower_case: bool | None = None  # what data built before specs recorded instead

  def spec(self) -> TokenizerSpec:
    """How the data's text was tokenized; for data built before specs, inferred from its
    lower_case as it was then (lower-casing and accent stripping together)."""
    if self.tokenizer is not None:
      return TokenizerSpec.from_dict(self.tokenizer, fileio.join(self.data_dir, MANIFEST_NAME))
    return TokenizerSpec.create(lower_case=self.lower_case is not False)

  @property
  def shard_paths(self) -> list[str]:
    return [fileio.join(self.data_dir, s.file) for s in self.shards]

  @property
  def record_bytes(self) -> int:
    return sum(s.bytes for s in self.shards)

  def to_json(self) -> str:
    values = dataclasses.asdict(self)
    del values["data_dir"]  # the dir may move; shard names are relative to it
    if values["lower_case"] is None:
      del values["lower_case"]
    text = json.dumps({"format": FORMAT, **values}, indent=2)
    # One line per shard's record index rather than one line per offset.
    return re.sub(r'("offsets": )(\[[\d,\s]*\])',
                  lambda m: m.group(1) + json.dumps(json.loads(m.group(2))), text) + "\n"

  def write(self) -> None:
    io_utils.atomic_write_text(fileio.join(self.data_dir, MANIFEST_NAME),
                               self.to_json())


def input_infos(files: Sequence[str]) -> tuple[InputInfo, ...]:
  """Identity of the input files as a cache key: absolute path, size, mtime."""
  return tuple(InputInfo(fileio.abspath(path), fileio.getsize(path), fileio.getmtime(path))
               for path in files)


def manifest_path(data_dir_or_pattern: str) -> str:
  """Where the manifest of a data dir, a shard glob or a shard file lives."""
  if fileio.isdir(data_dir_or_pattern):
    return fileio.join(data_dir_or_pattern, MANIFEST_NAME)
  if fileio.basename(data_dir_or_pattern) == MANIFEST_NAME:
    return data_dir_or_pattern
  return fileio.join(fileio.dirname(data_dir_or_pattern) or ".", MANIFEST_NAME)


def _from_dict(values: Any, data_dir: str, path: str) -> Manifest:
  if not isinstance(values, dict) or values.pop("format", None) != FORMAT:
    raise UserError(f"{path} is not a pretraining data manifest ({FORMAT}); "
                    f"rebuild the data with {_REBUILD}")
  try:
    check_field_types(Manifest, values, path)
    for key, cls in (("shards", ShardInfo), ("inputs", InputInfo)):
      if not isinstance(values[key], list):
        raise UserError(f"{path}: {key} must be a list, got {values[key]!r}")
      for item in values[key]:
        check_field_types(cls, item, f"{path} {key}")
      values[key] = tuple(cls(**item) for item in values[key])
    values["shards"] = tuple(_checked_index(s, values.get("index_every", 0), path)
                             for s in values["shards"])
    return Manifest(data_dir=data_dir, **values)
  except (KeyError, TypeError) as e:
    raise UserError(f"{path} is damaged ({e}); rebuild the data with {_REBUILD}") from None
  except UserError as e:
    raise UserError(f"{e}; the manifest is damaged, rebuild the data with {_REBUILD}") from None


def _checked_index(shard: ShardInfo, every: int, path: str) -> ShardInfo:
  """`shard` with its offsets as a tuple, after checking they fit its record count."""
  offsets = shard.offsets
  if not offsets and not every:
    return shard
  if (not isinstance(every, int) or every < 1 or not isinstance(offsets, list)
      or len(offsets) != -(-shard.records // every)
      or not all(isinstance(o, int) and 0 <= o < shard.bytes for o in offsets)
      or offsets != sorted(set(offsets)) or (offsets and offsets[0] != 0)):
    raise UserError(f"{path}: the record index of {shard.file} does not fit its "
                    f"{shard.records} records")
  return dataclasses.replace(shard, offsets=tuple(offsets))


def read_manifest(data_dir_or_pattern: str, required: bool = True) -> Manifest | None:
  """Reads the manifest of a data dir (or of the dir a shard glob points into).

  Args:
    data_dir_or_pattern: the data dir, its manifest.json, or a glob of its shards.
    required: when False, return None instead of raising if there is no manifest.

  Raises:
    UserError: no manifest (when required), or it is not valid JSON of our format.
  """
  path = manifest_path(data_dir_or_pattern)
  if not fileio.isfile(path):
    if not required:
      return None
    raise UserError(f"no {MANIFEST_NAME} in {fileio.dirname(path) or '.'}; "
                    f"build the data with {_REBUILD} (an unfinished build leaves none)")
  try:
    values = json.loads(fileio.read_text(path))
  except (UnicodeDecodeError, json.JSONDecodeError) as e:
    raise UserError(f"{path} is not valid JSON ({e}); rebuild the data with {_REBUILD}") \
        from None
  return _from_dict(values, fileio.dirname(fileio.abspath(path)), path)


def check_manifest(manifest: Manifest, vocab: Vocab, max_seq_length: int) -> None:
  """Checks that the data fits this run and that every shard is present and whole.

  Raises:
    UserError: another vocab, max_seq_length or tokenizer settings; a missing or truncated
      shard.
  """
  where = manifest.data_dir
  if manifest.vocab_md5 != vocab.md5:
    raise UserError(
        f"data in {where} was built with another vocab (md5 {manifest.vocab_md5}, "
        f"{manifest.vocab_file}) than {vocab.path} (md5 {vocab.md5}); rebuild it with "
        f"--vocab_file={vocab.path} or pass the vocab it was built with")
  if manifest.max_seq_length != max_seq_length:
    raise UserError(
        f"data in {where} holds sequences of length {manifest.max_seq_length} but "
        f"max_seq_length is {max_seq_length}; rebuild it with --max_seq_length="
        f"{max_seq_length} or train with --max_seq_length={manifest.max_seq_length}")
  if manifest.tokenizer is None:
    print(f"data in {where} records no tokenizer settings: taken as "
          f"({manifest.spec().describe()}) from its lower_case", file=sys.stderr)
  manifest.spec().check_same(vocab.spec, f"data in {where}", f"the vocab {vocab.path}")
  if not manifest.shards:
    raise UserError(f"data in {where} has no shards; rebuild it with {_REBUILD}")
  for shard in manifest.shards:
    path = fileio.join(where, shard.file)
    if not fileio.isfile(path):
      raise UserError(f"shard {path} listed in the manifest is missing; rebuild the data "
                      f"with {_REBUILD}")
    size = fileio.getsize(path)
    if size != shard.bytes:
      raise UserError(f"shard {path} has {size} bytes but the manifest says {shard.bytes}: "
                      f"truncated or corrupt; rebuild the data with {_REBUILD}")


def is_data_dir(path: str) -> bool:
  """True if `path` holds our manifest (a finished build: it is written last)."""
  return fileio.isfile(fileio.join(path, MANIFEST_NAME))

