"""Worker side of build_pretraining_data: one unit of text -> one TFRecord shard.

TensorFlow is imported inside the functions, in the workers: the planning process (the
CLI) then rejects bad input at once and never pays TF's start-up time itself.
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from electra_tf import features
from electra_tf.data import io_utils
from electra_tf.data.manifest import RECORD_INDEX_EVERY
from electra_tf.data.packing import ExampleBuilder
from electra_tf.data.tokenizer_spec import TokenizerSpec
from electra_tf.data.vocab import load_vocab
from electra_tf.errors import UserError

if TYPE_CHECKING:
  from electra_tf.data.tokenizer import Tokenizer

_BATCH_LINES = 2048
_BATCH_BYTES = 1 << 20
_FRAMING_BYTES = 16  # a TFRecord: length (8 bytes), its CRC (4), the data, the data's CRC (4)


@dataclasses.dataclass(frozen=True)
class Unit:
  """One worker's share: byte ranges of input files, written to one shard."""

  index: int
  segments: tuple[tuple[str, int, int], ...]  # (path, start, end), each ends a document
  output_path: str
  vocab_path: str
  vocab_md5: str
  spec: TokenizerSpec
  max_seq_length: int
  seed: int
  holdout_fraction: float = 0.0
  holdout_path: str | None = None  # the held-out shard, when holdout_fraction > 0


def _line_batches(segments: tuple[tuple[str, int, int], ...]
                  ) -> Iterator[tuple[list[str | None], int]]:
  """Yields (items, bytes) where items are stripped lines and None for document ends."""
  items, size = [], 0
  for path, start, end in segments:
    for offset, raw in io_utils.iter_raw_lines(path, start, end):
      line = io_utils.decode_line(raw, path, offset).strip()
      items.append(line if line else None)  # a blank line ends a document
      size += len(raw) + 1
      if len(items) >= _BATCH_LINES or size >= _BATCH_BYTES:
        yield items, size
        items, size = [], 0
    items.append(None)  # a file (or unit) end is a document end
  yield items, size


def _serialize(input_ids: list[int], segment_ids: list[int], max_seq_length: int,
               pad_id: int) -> bytes:
  import tensorflow as tf

  pad = [0] * (max_seq_length - len(input_ids))
  example = tf.train.Example()
  feature = example.features.feature  # filled in place: twice as fast as nested constructors
  feature[features.INPUT_IDS].int64_list.value.extend(input_ids + [pad_id] * len(pad))
  feature[features.INPUT_MASK].int64_list.value.extend([1] * len(input_ids) + pad)
  feature[features.SEGMENT_IDS].int64_list.value.extend(segment_ids + pad)
  return example.SerializeToString(deterministic=True)


_worker_state: dict = {}


def init_worker(queue) -> None:
  """Process-pool initializer: quiet, single-threaded TF (the pool is the parallelism)."""
  # TF's C++ start-up chatter (no GPU found, ...) would bury the progress line; real
  # failures still reach the parent as Python exceptions.
  os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
  import tensorflow as tf

  tf.config.threading.set_intra_op_parallelism_threads(1)
  tf.config.threading.set_inter_op_parallelism_threads(1)
  _worker_state["queue"] = queue


def _tokenizer(unit: Unit) -> Tokenizer:
  from electra_tf.data.tokenizer import make_tokenizer

  key = (unit.vocab_path, unit.vocab_md5, unit.spec)
  if _worker_state.get("key") != key:
    vocab = load_vocab(unit.vocab_path, spec=unit.spec)
    if vocab.md5 != unit.vocab_md5:
      raise UserError(f"{unit.vocab_path} changed during the build; run it again")
    _worker_state["tokenizer"] = make_tokenizer(vocab, dtype="int64")
    _worker_state["key"] = key
  return _worker_state["tokenizer"]


class _Router:
  """Sends each document to the training builder or, with probability holdout_fraction,
  to the held-out one; the draw is seeded by (seed, unit), so a rebuild splits alike."""

  def __init__(self, unit: Unit, cls_id: int, sep_id: int):
    def builder(tag: str) -> ExampleBuilder:
      return ExampleBuilder(unit.max_seq_length, cls_id, sep_id,
                            random.Random(f"{unit.seed}:{unit.index}{tag}"))

    self.fraction = unit.holdout_fraction
    self.train = builder("")
    self.held_out = builder(":held_out") if self.fraction > 0 else None
    self._draw = random.Random(f"{unit.seed}:{unit.index}:split")
    self.current = self._next()

  def _next(self) -> ExampleBuilder:
    if self.held_out is None or self._draw.random() >= self.fraction:
      return self.train
    return self.held_out

  @property
  def documents(self) -> int:
    return self.train.documents + (self.held_out.documents if self.held_out else 0)

  def add(self, sentence: list[int] | None) -> tuple[bool, list]:
    """(held out?, packed examples) after one sentence, or a document end for None."""
    builder = self.current
    if sentence is not None:
      return builder is self.held_out, builder.add_sentence(sentence)
    packed = builder.end_document()
    self.current = self._next()
    return builder is self.held_out, packed


def build_unit(unit: Unit, report: Callable[[tuple[int, int]], None] | None = None) -> dict:
  """Tokenizes, packs and writes one unit to its shard (and its held-out documents to the
  held-out shard); returns its counts.

  `report` receives (bytes read, documents finished) after each batch of lines; in a
  pool worker it defaults to the progress queue set by `init_worker`.
  """
  import tensorflow as tf

  report = report or _worker_state["queue"].put
  tokenizer = _tokenizer(unit)
  vocab = tokenizer.vocab
  router = _Router(unit, vocab.cls_id, vocab.sep_id)
  counts = {False: [0, 0], True: [0, 0]}  # held out? -> [examples, tokens]
  offsets = {False: [], True: []}  # held out? -> byte offsets of records 0, K, 2K, ...
  written = {False: 0, True: 0}  # held out? -> bytes written
  writers = {False: tf.io.TFRecordWriter(unit.output_path)}
  if router.held_out is not None:
    writers[True] = tf.io.TFRecordWriter(unit.holdout_path)
  try:
    for items, size in _line_batches(unit.segments):
      lines = [item for item in items if item is not None]
      ids = tokenizer.tokenize(lines) if lines else None
      flat = ids.flat_values.numpy().tolist() if lines else []
      splits = ids.row_splits.numpy().tolist() if lines else []
      documents_before, row = router.documents, 0
      for item in items:
        sentence = None
        if item is not None:
          sentence = flat[splits[row]:splits[row + 1]]
          row += 1
        held_out, packed = router.add(sentence)
        for input_ids, segment_ids in packed:
          record = _serialize(input_ids, segment_ids, unit.max_seq_length, vocab.pad_id)
          writers[held_out].write(record)
          if counts[held_out][0] % RECORD_INDEX_EVERY == 0:
            offsets[held_out].append(written[held_out])
          written[held_out] += len(record) + _FRAMING_BYTES
          counts[held_out][0] += 1
          counts[held_out][1] += len(input_ids)
      report((size, router.documents - documents_before))
  finally:
    for writer in writers.values():
      writer.close()
  held = router.held_out
  return {"index": unit.index, "documents": router.train.documents,
          "examples": counts[False][0], "tokens": counts[False][1],
          "offsets": offsets[False],
          "held_out": {"documents": held.documents if held else 0,
                       "examples": counts[True][0], "tokens": counts[True][1],
                       "offsets": offsets[True]}}
