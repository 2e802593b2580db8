"""TFRecords -> shuffled batches with dynamic masking (tf.text), the pretraining input.

Order: list files -> shard per pipeline -> interleaved reads -> shuffle -> repeat -> batch
-> parse and mask the whole batch (once per batch, not per record) -> prefetch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import tensorflow as tf
import tensorflow_text as tf_text

from electra_tf import features
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
    start_batch: int = 0) -> tf.data.Dataset:
  """The pretraining input: dicts with exactly `features.PRETRAIN_KEYS`.

  Args:
    file_pattern_or_list: a data dir (manifest checked), comma-separated globs, or a list.
    batch_size: per input pipeline (per replica under a strategy).
    max_seq_length: L; records of another length raise a UserError naming the file.
    max_predictions_per_seq: P.
    mask_prob, mask_token_rate, random_token_rate: see `mask_fn`.
    vocab: the vocab the data was built with.
    shuffle: shuffle file order and records.
    seed: makes file order, record order and masking reproducible.
    repeat: loop forever (training) or stop after one pass (evaluation).
    input_context: from `distribute_datasets_from_function`; each pipeline reads a
      disjoint part: whole files when there are at least as many files as pipelines,
      else every n-th record.
    shuffle_buffer_size: records held for shuffling.
    deterministic: reproducible element order; defaults to `seed is not None`. When
      False, reads and masking run in parallel without an order guarantee. When True,
      the stream is a pure function of (seed, position): epoch e reads the files and
      shuffles the records with seeds derived from (seed, e), and batch i is masked with
      a seed derived from (seed, i), so `start_batch` can resume it exactly.
    start_batch: batches this pipeline already delivered (deterministic only): the
      stream starts where it stood after them, reading (not parsing) at most one
      epoch's records to get there.

  Returns:
    A dataset of dicts: input_ids, input_mask, segment_ids, masked_input_ids int32 [B, L];
    masked_lm_positions, masked_lm_ids int32 [B, P]; masked_lm_weights float32 [B, P].
  """
  files = resolve_files(file_pattern_or_list, vocab, max_seq_length)
  if tf.executing_eagerly():
    check_first_record(files, max_seq_length)
  deterministic = seed is not None if deterministic is None else deterministic
  pipelines = input_context.num_input_pipelines if input_context else 1
  pipeline_id = input_context.input_pipeline_id if input_context else 0
  by_file = pipelines > 1 and len(files) >= pipelines
  by_record = pipelines > 1 and not by_file
  local_seed = None if seed is None else seed + pipeline_id  # pipelines must not mask alike
  masker = mask_fn(vocab, max_predictions_per_seq, mask_prob, mask_token_rate,
                   random_token_rate, seed=local_seed if deterministic else None)
  if deterministic:
    return _positioned_dataset(
        files, masker, batch_size=batch_size, max_seq_length=max_seq_length, shuffle=shuffle,
        seed=local_seed or 0, repeat=repeat, pipelines=pipelines, pipeline_id=pipeline_id,
        by_record=by_record, shuffle_buffer_size=shuffle_buffer_size, start_batch=start_batch)
  if start_batch:
    raise ValueError("start_batch needs deterministic=True")

  dataset = tf.data.Dataset.from_tensor_slices(files)
  if by_file:
    dataset = dataset.shard(pipelines, pipeline_id)
  if shuffle and not by_record:  # record sharding needs the same file order everywhere
    dataset = dataset.shuffle(len(files), seed=local_seed, reshuffle_each_iteration=True)
  dataset = dataset.interleave(
      tf.data.TFRecordDataset, cycle_length=min(len(files), 16),
      num_parallel_calls=tf.data.AUTOTUNE,
      # Record sharding also needs the same record order in every pipeline.
      deterministic=by_record)
  if by_record:
    dataset = dataset.shard(pipelines, pipeline_id)
  if shuffle:
    dataset = dataset.shuffle(shuffle_buffer_size, seed=local_seed,
                              reshuffle_each_iteration=True)
  if repeat:
    dataset = dataset.repeat()
  dataset = dataset.batch(batch_size, drop_remainder=True)
  dataset = dataset.map(parse_fn(max_seq_length), num_parallel_calls=tf.data.AUTOTUNE,
                        deterministic=False)
  dataset = dataset.map(masker, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
  return dataset.prefetch(tf.data.AUTOTUNE)


def _shuffle_seeded_by_tensor(dataset: tf.data.Dataset, buffer_size: int,
                              seed: tf.Tensor) -> tf.data.Dataset:
  """`dataset.shuffle` with a tensor seed, whatever the global seed.

  With a global seed of 0 (tf.random.set_seed(0)), TF's seed resolution compares the
  op seed with 0 in Python, which a symbolic tensor cannot answer; resolving it against
  no graph seed (TF's fixed default then pairs with the tensor) sidesteps that.
  """
  graph = tf.compat.v1.get_default_graph()
  saved = graph.seed
  graph.seed = None
  try:
    return dataset.shuffle(buffer_size, seed=seed, reshuffle_each_iteration=False)
  finally:
    graph.seed = saved


def _positioned_dataset(files: list[str], masker, *, batch_size: int, max_seq_length: int,
                        shuffle: bool, seed: int, repeat: bool, pipelines: int,
                        pipeline_id: int, by_record: bool, shuffle_buffer_size: int,
                        start_batch: int) -> tf.data.Dataset:
  """The deterministic stream of `make_pretraining_dataset`, starting after `start_batch`."""
  counts = record_counts(files)
  if pipelines > 1 and not by_record:
    files, counts = files[pipeline_id::pipelines], counts[pipeline_id::pipelines]
  total = sum(counts)
  per_epoch = len(range(pipeline_id, total, pipelines)) if by_record else total
  if per_epoch < batch_size:
    raise UserError(f"input pipeline {pipeline_id} gets {per_epoch} records per pass, fewer "
                    f"than its batch of {batch_size}; build more data or use a smaller batch")
  first_epoch, offset = divmod(start_batch * batch_size, per_epoch)
  if not repeat and first_epoch > 0:
    raise ValueError("start_batch is past the single pass of repeat=False")
  file_list = tf.constant(files)
  cycle = min(len(files), 16)

  def epoch_records(epoch: tf.Tensor) -> tf.data.Dataset:
    names = file_list
    if shuffle and not by_record:  # record sharding needs the same file order everywhere
      names = tf.random.experimental.stateless_shuffle(
          names, seed=tf.stack([tf.constant(seed, tf.int64), epoch]))
    records = tf.data.Dataset.from_tensor_slices(names).interleave(
        tf.data.TFRecordDataset, cycle_length=cycle, num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True)
    if by_record:
      records = records.shard(pipelines, pipeline_id)
    if shuffle:
      records = _shuffle_seeded_by_tensor(records, shuffle_buffer_size,
                                          seed * 1_000_003 + epoch)
    return records

  last = first_epoch + 1 if not repeat else 2**62
  dataset = tf.data.Dataset.range(first_epoch, last).flat_map(epoch_records).skip(offset)
  dataset = dataset.batch(batch_size, drop_remainder=True).enumerate(start=start_batch)
  parse = parse_fn(max_seq_length)

  def parse_and_mask(index: tf.Tensor, serialized: tf.Tensor) -> dict[str, tf.Tensor]:
    batch_seed = tf.random.stateless_uniform(
        [2], seed=tf.stack([tf.constant(seed, tf.int64), index]), minval=None, maxval=None,
        dtype=tf.int64)
    return masker(parse(serialized), batch_seed)

  dataset = dataset.map(parse_and_mask, num_parallel_calls=tf.data.AUTOTUNE,
                        deterministic=True)
  return dataset.prefetch(tf.data.AUTOTUNE)


def distributed_dataset(strategy: tf.distribute.Strategy,
                        file_pattern_or_list: str | Sequence[str], *, global_batch_size: int,
                        start_step: int = 0, max_batches: int | None = None,
                        **kwargs) -> tf.distribute.DistributedDataset:
  """`make_pretraining_dataset` under `strategy`: one pipeline per worker, split batches.

  Args:
    strategy: the distribution strategy.
    file_pattern_or_list: as for `make_pretraining_dataset`.
    global_batch_size: the batch over all replicas; must divide evenly among them.
    start_step: train steps already taken (with deterministic=True): each pipeline skips
      the batches its replicas consumed in them.
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
