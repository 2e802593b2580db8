"""TFRecords -> shuffled batches with dynamic masking (tf.text), the pretraining input.

Order: blocks of records -> shard per pipeline -> epochs of shuffled windows of blocks,
started at the resume position by seeking (positioned.py) -> batch -> parse and mask the
whole batch (once per batch, not per record) -> prefetch.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Callable, Sequence

import tensorflow as tf
import tensorflow_text as tf_text

from electra_tf import features
from electra_tf.data import positioned, record_index
from electra_tf.data.manifest import RECORD_INDEX_EVERY
from electra_tf.data.records import check_first_record, record_counts, resolve_files
from electra_tf.data.vocab import Vocab
from electra_tf.errors import UserError


def parse_fn(max_seq_length: int) -> Callable[[tf.Tensor], dict[str, tf.Tensor]]:
  """A function: serialized tf.Examples [B] -> {input_ids, input_mask, segment_ids} int32 [B, L]."""
  spec = {k: tf.io.FixedLenFeature([max_seq_length], tf.int64) for k in features.RECORD_KEYS}

  def parse(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
    parsed = tf.io.parse_example(serialized, spec)
    return {k: tf.cast(parsed[k], tf.int32) for k in features.RECORD_KEYS}

  return parse


class _SeededChooser(tf_text.MaskValuesChooser):
  """tf.text's MaskValuesChooser drawing from a given stateless seed instead of a stateful op."""

  def __init__(self, vocab_size: int, mask_token: int, mask_token_rate: float,
               random_token_rate: float, seed: tf.Tensor):
    super().__init__(vocab_size, mask_token, mask_token_rate, random_token_rate)
    self._seed = seed

  def get_mask_values(self, masked_lm_ids: tf.RaggedTensor) -> tf.RaggedTensor:
    flat = masked_lm_ids.flat_values
    shape = tf.shape(flat)
    uniform = tf.random.stateless_uniform(shape, seed=self._seed)
    random_ids = tf.random.stateless_uniform(shape, seed=self._seed + [0, 1], minval=0,
                                             maxval=self.vocab_size, dtype=flat.dtype)
    values = tf.where(uniform < self._mask_token_rate, tf.cast(self.mask_token, flat.dtype),
                      tf.where(uniform < self._mask_token_rate + self.random_token_rate,
                               random_ids, flat))
    return masked_lm_ids.with_flat_values(values)


def mask_fn(vocab: Vocab, max_predictions_per_seq: int, mask_prob: float,
            mask_token_rate: float = 0.85, random_token_rate: float = 0.0,
            seed: int | None = None) -> Callable[..., dict]:
  """A function that adds dynamic masking to a parsed batch.

  Candidates are the real tokens except [CLS], [SEP] and [MASK] (and [PAD], which the
  input_mask already drops). tf.text's RandomItemSelector picks ceil(mask_prob * n) of a
  row's n candidates, capped at max_predictions_per_seq: so every row with a candidate
  gets at least one prediction. Of those, `mask_token_rate` become [MASK],
  `random_token_rate` a random id, the rest stay unchanged (ELECTRA: 85/0/15).

  Every draw is stateless, from one int64 [2] seed per batch: given as `batch_seed`, the
  masking is a pure function of (batch, batch_seed); without it, one stateful draw per
  batch makes the seed (reproducible for a given `seed` when called sequentially).

  Args:
    vocab: supplies the special ids and the size for random replacements.
    max_predictions_per_seq: P, the static width of the masked_lm_* outputs.
    mask_prob: share of candidates chosen.
    mask_token_rate, random_token_rate: what the chosen tokens become.
    seed: makes the stateful per-batch seed reproducible.

  Returns:
    (batch, batch_seed=None) -> batch plus masked_input_ids int32 [B, L],
    masked_lm_positions int32 [B, P], masked_lm_ids int32 [B, P] and masked_lm_weights
    float32 [B, P] (0 in unused slots).
  """
  if not 0.0 < mask_prob < 1.0:
    raise UserError(f"mask_prob must be in (0, 1), got {mask_prob}")
  if mask_token_rate < 0 or random_token_rate < 0 or mask_token_rate + random_token_rate > 1:
    raise UserError("mask_token_rate and random_token_rate must be >= 0 and sum to <= 1")

  def mask(batch: dict[str, tf.Tensor], batch_seed: tf.Tensor | None = None
           ) -> dict[str, tf.Tensor]:
    if batch_seed is None:
      if seed is not None:
        tf.random.set_seed(seed)  # inside a traced function: seeds only this function's ops
      batch_seed = tf.random.uniform([2], maxval=2**31 - 1, dtype=tf.int64)
    batch_seed = tf.cast(batch_seed, tf.int64)

    def shuffle_row(positions: tf.Tensor) -> tf.Tensor:
      # The selector shuffles each row inside a parallel map_fn, where a shared stateful
      # shuffle would deal out random numbers in thread order. A stateless shuffle seeded
      # by the batch seed and the row's first flat position (unique within the batch)
      # keeps seeded runs reproducible.
      first = tf.reduce_min(tf.concat([positions, [2**31 - 1]], 0))
      return tf.random.experimental.stateless_shuffle(
          positions, seed=batch_seed + tf.stack([0, tf.cast(first, tf.int64) + 2]))

    selector = tf_text.RandomItemSelector(
        max_selections_per_batch=max_predictions_per_seq, selection_rate=mask_prob,
        unselectable_ids=list(vocab.unmaskable_ids), shuffle_fn=shuffle_row)
    chooser = _SeededChooser(vocab.size, vocab.mask_id, mask_token_rate, random_token_rate,
                             batch_seed)
    input_ids = batch[features.INPUT_IDS]  # [B, L]
    lengths = tf.reduce_sum(batch[features.INPUT_MASK], axis=1)
    ragged = tf.RaggedTensor.from_tensor(input_ids, lengths=lengths)
    masked, positions, masked_ids = tf_text.mask_language_model(ragged, selector, chooser)
    batch_size, seq_len = input_ids.shape[0], input_ids.shape[1]
    width = [batch_size, max_predictions_per_seq]
    weights = positions.with_flat_values(tf.ones_like(positions.flat_values, tf.float32))
    return {
        **batch,
        features.MASKED_INPUT_IDS: masked.to_tensor(vocab.pad_id, shape=[batch_size, seq_len]),
        features.MASKED_LM_POSITIONS: tf.cast(positions.to_tensor(0, shape=width), tf.int32),
        features.MASKED_LM_IDS: tf.cast(masked_ids.to_tensor(0, shape=width), tf.int32),
        features.MASKED_LM_WEIGHTS: weights.to_tensor(0.0, shape=width),
    }

  return mask


def make_pretraining_dataset(
    file_pattern_or_list: str | Sequence[str], *, batch_size: int, max_seq_length: int,
    max_predictions_per_seq: int, mask_prob: float, vocab: Vocab,
    mask_token_rate: float = 0.85, random_token_rate: float = 0.0, shuffle: bool = True,
    seed: int | None = None, repeat: bool = True,
    input_context: tf.distribute.InputContext | None = None,
    shuffle_buffer_size: int = 10_000, deterministic: bool | None = None,
    start_batch: int = 0, block_records: int = RECORD_INDEX_EVERY) -> tf.data.Dataset:
  """The pretraining input: dicts with exactly `features.PRETRAIN_KEYS`.

  Args:
    file_pattern_or_list: a data dir (manifest checked), comma-separated globs, or a list.
    batch_size: per input pipeline (per replica under a strategy).
    max_seq_length: L; records of another length raise a UserError naming the file.
    max_predictions_per_seq: P.
    mask_prob, mask_token_rate, random_token_rate: see `mask_fn`.
    vocab: the vocab the data was built with.
    shuffle: the shuffled stream of `positioned.py` (training); else the files' records
      interleaved in order (evaluation).
    seed: seeds the record order (and, when deterministic, the masking); None draws one.
    repeat: loop forever (training) or stop after one pass (evaluation).
    input_context: from `distribute_datasets_from_function`; each pipeline reads a
      disjoint part: shuffled, every n-th block of `block_records` records; unshuffled,
      whole files when there are at least as many files as pipelines, else every n-th
      record.
    shuffle_buffer_size: records shuffled together (rounded to whole blocks).
    deterministic: reproducible masking; defaults to `seed is not None`. The records and
      their order are a pure function of (seed, position) in both modes; when True batch i
      is also masked with a seed derived from (seed, i), else from (r, i), r fresh entropy
      drawn once per dataset (global TF and Python seeds leave it random).
    start_batch: batches this pipeline already delivered: the stream starts where it
      stood after them, in both modes. Shuffled, by seeking: at most one window of blocks
      is read before the first record delivered, wherever it is. Unshuffled (evaluation),
      by reading (not parsing) the records of the pass before it.
    block_records: K, records per block (a multiple of the manifest's index interval
      uses its index; other values scan the files' record headers once).

  Returns:
    A dataset of dicts: input_ids, input_mask, segment_ids, masked_input_ids int32 [B, L];
    masked_lm_positions, masked_lm_ids int32 [B, P]; masked_lm_weights float32 [B, P].
  """
  files = resolve_files(file_pattern_or_list, vocab, max_seq_length)
  if tf.executing_eagerly():
    check_first_record(files, max_seq_length)
  deterministic = seed is not None if deterministic is None else deterministic
  if start_batch and seed is None:
    raise ValueError("start_batch needs the seed the stream began with")
  seed = random.randrange(2**31) if seed is None else seed
  pipelines = input_context.num_input_pipelines if input_context else 1
  pipeline_id = input_context.input_pipeline_id if input_context else 0
  local_seed = seed + pipeline_id  # pipelines must not mask alike
  masker = mask_fn(vocab, max_predictions_per_seq, mask_prob, mask_token_rate,
                   random_token_rate)
  # Not deterministic: fresh entropy for each dataset, untouched by tf.random.set_seed or a
  # seeded `random` (a stateful draw inside the map would repeat under a global TF seed and
  # otherwise vary only with thread order).
  mask_seed = local_seed if deterministic else secrets.randbits(62)
  if shuffle:
    blocks = record_index.blocks_of(files, block_records).take(
        slice(pipeline_id, None, pipelines))
    layout = positioned.Layout(blocks, max(1, round(shuffle_buffer_size / block_records)),
                               local_seed)
    _check_epoch(layout.records_per_epoch, batch_size, pipeline_id)
    records = positioned.records_from(layout, start_batch * batch_size, repeat)
  else:
    records = _sequential_records(files, batch_size=batch_size, repeat=repeat,
                                  pipelines=pipelines, pipeline_id=pipeline_id,
                                  start_batch=start_batch)
  dataset = records.batch(batch_size, drop_remainder=True)
  parse = parse_fn(max_seq_length)

  def parse_and_mask(index: tf.Tensor, serialized: tf.Tensor) -> dict[str, tf.Tensor]:
    batch_seed = tf.random.stateless_uniform(
        [2], seed=tf.stack([tf.constant(mask_seed, tf.int64), index]), minval=None,
        maxval=None, dtype=tf.int64)
    return masker(parse(serialized), batch_seed)

  # In order, so that the batches of the first n steps are the stream's first n batches.
  dataset = dataset.enumerate(start=start_batch).map(
      parse_and_mask, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  return dataset.prefetch(tf.data.AUTOTUNE)


def _check_epoch(per_epoch: int, batch_size: int, pipeline_id: int) -> None:
  if per_epoch < batch_size:
    raise UserError(f"input pipeline {pipeline_id} gets {per_epoch} records per pass, fewer "
                    f"than its batch of {batch_size}; build more data or use a smaller batch")


def _sequential_records(files: list[str], *, batch_size: int, repeat: bool, pipelines: int,
                        pipeline_id: int, start_batch: int) -> tf.data.Dataset:
  """The unshuffled records: the files interleaved record by record, in order."""
  by_file = pipelines > 1 and len(files) >= pipelines
  by_record = pipelines > 1 and not by_file
  counts = record_counts(files)
  if by_file:
    files, counts = files[pipeline_id::pipelines], counts[pipeline_id::pipelines]
  total = sum(counts)
  per_epoch = len(range(pipeline_id, total, pipelines)) if by_record else total
  _check_epoch(per_epoch, batch_size, pipeline_id)
  passes, offset = divmod(start_batch * batch_size, per_epoch)
  if not repeat and passes > 0:
    raise ValueError("start_batch is past the single pass of repeat=False")
  records = tf.data.Dataset.from_tensor_slices(files).interleave(
      tf.data.TFRecordDataset, cycle_length=min(len(files), 16),
      num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  if by_record:
    records = records.shard(pipelines, pipeline_id)
  # Every pass is the same order: skipping within the first one reaches the position.
  return records.repeat(None if repeat else 1).skip(offset)


def distributed_dataset(strategy: tf.distribute.Strategy,
                        file_pattern_or_list: str | Sequence[str], *, global_batch_size: int,
                        start_step: int = 0, max_batches: int | None = None,
                        **kwargs) -> tf.distribute.DistributedDataset:
  """`make_pretraining_dataset` under `strategy`: one pipeline per worker, split batches.

  Args:
    strategy: the distribution strategy.
    file_pattern_or_list: as for `make_pretraining_dataset`.
    global_batch_size: the batch over all replicas; must divide evenly among them.
    start_step: train steps already taken: each pipeline starts after the batches its
      replicas consumed in them.
    max_batches: at most this many global batches (evaluation), or None.
    **kwargs: the other `make_pretraining_dataset` arguments (not batch_size).
  """
  replicas = strategy.num_replicas_in_sync
  if global_batch_size % replicas:
    raise UserError(f"batch size {global_batch_size} does not divide among {replicas} "
                    f"replicas; use a multiple of {replicas}")

  def dataset_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
    per_replica = input_context.get_per_replica_batch_size(global_batch_size)
    # Each step takes one batch per replica, the replicas being spread evenly over pipelines.
    replicas_per_pipeline = replicas // input_context.num_input_pipelines
    dataset = make_pretraining_dataset(
        file_pattern_or_list, batch_size=per_replica, input_context=input_context,
        start_batch=start_step * replicas_per_pipeline, **kwargs)
    return dataset if max_batches is None else dataset.take(max_batches * replicas_per_pipeline)

  return strategy.distribute_datasets_from_function(dataset_fn)
