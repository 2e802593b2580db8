"""SQuAD features cached as TFRecords (tensors) + JSON (offsets for post-processing)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import tensorflow as tf

from electra_tf import atomic, fileio
from electra_tf import features as F
from electra_tf.data.tokenizer import WordPieceTokenizer
from electra_tf.model.finetune_models import END_POSITIONS, IS_IMPOSSIBLE, START_POSITIONS
from electra_tf.tasks.squad_data import SquadExample, SquadFeature, convert_examples

UNIQUE_ID = "unique_id"
_META_FIELDS = ("unique_id", "example_index", "window_index", "token_char_starts",
                "token_char_ends", "token_is_max_context", "start_position", "end_position",
                "is_impossible")


def _int_feature(values) -> tf.train.Feature:
  return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def write_features_tfrecord(features: Sequence[SquadFeature], path: str, *,
                            is_training: bool) -> None:
  """Writes the model inputs (and training targets) of `features`; complete or absent."""
  tmp = f"{path}.tmp"
  with tf.io.TFRecordWriter(tmp) as writer:
    for f in features:
      record = {F.INPUT_IDS: _int_feature(f.input_ids), F.INPUT_MASK: _int_feature(f.input_mask),
                F.SEGMENT_IDS: _int_feature(f.segment_ids),
                UNIQUE_ID: _int_feature([f.unique_id])}
      if is_training:
        record[START_POSITIONS] = _int_feature([f.start_position])
        record[END_POSITIONS] = _int_feature([f.end_position])
        record[IS_IMPOSSIBLE] = _int_feature([int(f.is_impossible)])
      writer.write(tf.train.Example(features=tf.train.Features(feature=record))
                   .SerializeToString())
  fileio.rename(tmp, path, overwrite=True)


def load_features_dataset(path: str, *, max_seq_length: int, is_training: bool
                          ) -> tf.data.Dataset:
  """Unbatched dict of int32 `input_ids`, `input_mask`, `segment_ids` [L], `unique_id` [] and,
  for training, `start_positions`, `end_positions`, `is_impossible` []."""
  spec = {k: tf.io.FixedLenFeature([max_seq_length], tf.int64)
          for k in (F.INPUT_IDS, F.INPUT_MASK, F.SEGMENT_IDS)}
  spec[UNIQUE_ID] = tf.io.FixedLenFeature([], tf.int64)
  if is_training:
    for key in (START_POSITIONS, END_POSITIONS, IS_IMPOSSIBLE):
      spec[key] = tf.io.FixedLenFeature([], tf.int64)

  def parse(record):
    return {k: tf.cast(v, tf.int32) for k, v in tf.io.parse_single_example(record, spec).items()}

  return tf.data.TFRecordDataset(path).map(parse, num_parallel_calls=tf.data.AUTOTUNE)


def cache_key(examples: Sequence[SquadExample], tokenizer: WordPieceTokenizer, **sizes) -> str:
  """A digest of everything the features depend on: texts, answers, vocab and sizes."""
  digest = hashlib.sha256()
  digest.update(json.dumps([tokenizer.vocab.md5, tokenizer.spec.describe(), sorted(sizes.items())])
                .encode())
  for e in examples:
    digest.update(json.dumps([e.qas_id, e.question, e.context, e.answers, e.answer_start,
                              e.is_impossible]).encode())
  return digest.hexdigest()[:16]


def cached_features(examples: Sequence[SquadExample], tokenizer: WordPieceTokenizer,
                    cache_dir: str, *, max_seq_length: int, doc_stride: int,
                    max_query_length: int, is_training: bool
                    ) -> tuple[list[SquadFeature], str]:
  """(features, TFRecord path), converting only when no cache matches the inputs.

  Features read back from the cache carry offsets and targets but no input ids (those are
  in the TFRecord).
  """
  sizes = dict(max_seq_length=max_seq_length, doc_stride=doc_stride,
               max_query_length=max_query_length, is_training=is_training)
  key = cache_key(examples, tokenizer, **sizes)
  name = f"{'train' if is_training else 'eval'}-{key}"
  record_path = fileio.join(cache_dir, f"{name}.tfrecord")
  meta_path = fileio.join(cache_dir, f"{name}.json")
  if fileio.exists(record_path) and fileio.exists(meta_path):
    rows = json.loads(fileio.read_text(meta_path))
    return [SquadFeature(input_ids=None, input_mask=None, segment_ids=None, **r)
            for r in rows], record_path
  features = convert_examples(examples, tokenizer, max_seq_length=max_seq_length,
                              doc_stride=doc_stride, max_query_length=max_query_length,
                              is_training=is_training)
  fileio.makedirs(cache_dir)
  write_features_tfrecord(features, record_path, is_training=is_training)
  # The JSON is written last: its presence marks a complete cache entry.
  atomic.atomic_write_text(meta_path, json.dumps(
      [{k: getattr(f, k) for k in _META_FIELDS} for f in features]))
  return features, record_path
