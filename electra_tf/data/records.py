"""The pretraining record files: found and checked before reading, counted, and their read
errors turned into one clear line."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

import tensorflow as tf

from electra_tf import features, fileio
from electra_tf.data.manifest import _REBUILD, check_manifest, read_manifest
from electra_tf.data.vocab import Vocab
from electra_tf.errors import UserError, tf_error_line
from electra_tf.filenames import MANIFEST_NAME


def resolve_files(file_pattern_or_list: str | Sequence[str], vocab: Vocab,
                  max_seq_length: int) -> list[str]:
  """The shard files to read; checks the manifest against vocab and length when one exists.

  Accepts a data dir (its manifest lists the shards), a comma-separated glob, or a list.
  """
  if isinstance(file_pattern_or_list, str) and fileio.isdir(file_pattern_or_list):
    manifest = read_manifest(file_pattern_or_list, required=False)
    if manifest is None:
      raise UserError(f"no {MANIFEST_NAME} in {file_pattern_or_list}; pass a glob of "
                      f"its shards ('{file_pattern_or_list}/*.tfrecord') or rebuild the data "
                      f"with {_REBUILD}")
    check_manifest(manifest, vocab, max_seq_length)
    return manifest.shard_paths
  patterns = (file_pattern_or_list.split(",") if isinstance(file_pattern_or_list, str)
              else list(file_pattern_or_list))
  files = []
  for pattern in (p.strip() for p in patterns if p.strip()):
    matches = fileio.glob(pattern)
    if not matches:
      raise UserError(f"no files match {pattern!r}; check the path of the pretraining data "
                      f"or build it with {_REBUILD}")
    manifest = read_manifest(pattern, required=False)
    if manifest is not None:
      check_manifest(manifest, vocab, max_seq_length)
    files.extend(matches)
  if not files:
    raise UserError(f"no pretraining data given; pass a data dir built with {_REBUILD}")
  return list(dict.fromkeys(files))


def check_first_record(files: Sequence[str], max_seq_length: int) -> None:
  """Reads one record eagerly so a wrong length gives a clear error, not a parse failure."""
  for path in files:
    try:
      raw = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
    except tf.errors.DataLossError:
      raise UserError(f"{path} is not a TFRecord file or is corrupt; rebuild the data with "
                      f"{_REBUILD}") from None
    if raw is None:
      continue  # an empty shard: look at the next one
    try:
      feature = tf.train.Example.FromString(raw.numpy()).features.feature
    except Exception:  # protobuf's DecodeError: not a tf.train.Example at all
      raise UserError(f"{path} does not hold tf.train.Example records; build pretraining "
                      f"data with {_REBUILD}") from None
    for key in features.RECORD_KEYS:
      if key not in feature:
        raise UserError(f"{path} is not pretraining data: its records have no {key!r} "
                        f"feature; build it with {_REBUILD}")
      length = len(feature[key].int64_list.value)
      if length != max_seq_length:
        raise UserError(
            f"{path} holds sequences of length {length} but max_seq_length is "
            f"{max_seq_length}; rebuild the data with --max_seq_length={max_seq_length} "
            f"or train with --max_seq_length={length}")
    return
  raise UserError(f"the pretraining data files hold no records ({', '.join(files[:3])}...); "
                  f"rebuild the data with {_REBUILD}")


def record_counts(files: Sequence[str]) -> list[int]:
  """Records per file: from the manifest beside them when it lists the file, else counted."""
  counts = []
  manifests: dict[str, dict[str, int] | None] = {}
  for path in files:
    directory = fileio.dirname(path)
    if directory not in manifests:
      manifest = read_manifest(directory, required=False)
      manifests[directory] = ({s.file: s.records for s in manifest.shards}
                              if manifest is not None else None)
    known = manifests[directory]
    name = os.path.basename(path)
    if known is not None and name in known:
      counts.append(known[name])
    else:
      counts.append(int(tf.data.TFRecordDataset(path).reduce(
          tf.constant(0, tf.int64), lambda n, _: n + 1)))
  return counts


_LENGTH_ERROR = re.compile(r"Key: (\w+)\b.*Values size: (\d+) but output shape: \[(\d+)\]")
_MISSING_KEY = re.compile(r"Feature: (\w+) \(data type: \w+\) is required")
_RECORD_ERROR = re.compile(r"(corrupted|truncated) record at (\d+)[^\[]*")


def explain_data_error(exc: Exception) -> UserError:
  """Turns an error raised while iterating the input pipeline into one clear UserError.

  Use it around the training loop:
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
      raise explain_data_error(e) from e
  """
  return recognised_data_error(exc) or UserError(
      f"the input pipeline failed: {tf_error_line(exc)}; check the pretraining data or "
      f"rebuild it with {_REBUILD}")


def recognised_data_error(exc: Exception) -> UserError | None:
  """The clear UserError for `exc` if it is recognisably bad data, else None.

  Lets a training loop translate data errors while a model bug keeps its traceback.
  """
  if isinstance(exc, UserError):
    return exc
  text = getattr(exc, "message", None) or str(exc)
  first = tf_error_line(exc)
  if isinstance(exc, tf.errors.DataLossError):
    # Inside a function the first line is only "Graph execution error:"; search it all.
    match = _RECORD_ERROR.search(first) or _RECORD_ERROR.search(text)
    detail = match.group(0).strip() if match else first
    return UserError(f"the pretraining data is corrupt ({detail}); rebuild the data with "
                     f"{_REBUILD}")
  match = _LENGTH_ERROR.search(text)
  if match:
    key, found, expected = match.groups()
    return UserError(
        f"the pretraining records hold {key} of length {found} but max_seq_length is "
        f"{expected}; rebuild the data with --max_seq_length={expected} or train with "
        f"--max_seq_length={found}")
  match = _MISSING_KEY.search(text)
  if match:
    return UserError(f"the input records have no {match.group(1)!r} feature: not pretraining "
                     f"data; build it with {_REBUILD}")
  if isinstance(exc, tf.errors.NotFoundError):
    return UserError(f"a pretraining data file is missing ({first}); rebuild the data with "
                     f"{_REBUILD}")
  return None
