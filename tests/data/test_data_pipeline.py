"""The pretraining input pipeline: shapes, masking statistics, sharding, clear data errors."""

import glob
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from electra_tf import features
from electra_tf.data import pipeline, record_index, records
from electra_tf.errors import UserError

L, P = 128, 19  # max_predictions_per_seq for mask_prob 0.15 at 128, as the config derives


def _dataset(data, vocab, **kwargs):
  args = dict(batch_size=256, max_seq_length=L, max_predictions_per_seq=P, mask_prob=0.15,
              vocab=vocab, seed=0)
  return pipeline.make_pretraining_dataset(data, **{**args, **kwargs})


def _batches(dataset, n):
  batches = [{k: v.numpy() for k, v in b.items()} for b in dataset.take(n)]
  return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def _selection(batch, vocab):
  """Per selected slot: original id, id after masking (weights 1 only)."""
  rows, slots = np.nonzero(batch[features.MASKED_LM_WEIGHTS])
  positions = batch[features.MASKED_LM_POSITIONS][rows, slots]
  original = batch[features.INPUT_IDS][rows, positions]
  after = batch[features.MASKED_INPUT_IDS][rows, positions]
  return original, after


def test_keys_shapes_and_dtypes(squad_data, bert_vocab):
  spec = _dataset(squad_data, bert_vocab, batch_size=8).element_spec
  assert tuple(spec) == features.PRETRAIN_KEYS
  for key, value in spec.items():
    width = P if key.startswith("masked_lm") else L
    assert value.shape == (8, width), key
    assert value.dtype == (tf.float32 if key == features.MASKED_LM_WEIGHTS else tf.int32)


def test_masking_invariants(squad_data, bert_vocab):
  batch = _batches(_dataset(squad_data, bert_vocab), 4)
  ids, mask = batch[features.INPUT_IDS], batch[features.INPUT_MASK]
  positions = batch[features.MASKED_LM_POSITIONS]
  weights = batch[features.MASKED_LM_WEIGHTS]
  special = np.isin(ids, bert_vocab.unmaskable_ids)
  candidates = ((mask == 1) & ~special).sum(1)
  chosen = weights.sum(1).astype(int)
  # tf.text picks ceil(n * rate) in float32, capped at P: at least one, at most P.
  expected = np.minimum(np.ceil(candidates.astype(np.float32) * np.float32(0.15)), P)
  np.testing.assert_array_equal(chosen, expected)
  assert chosen.min() >= 1 and chosen.max() == P
  for row in range(len(ids)):
    used = positions[row, :chosen[row]]
    assert np.all(weights[row, :chosen[row]] == 1.0)
    assert len(set(used)) == len(used)
    assert not special[row, used].any() and np.all(mask[row, used] == 1)
    # Unused slots are zero padding.
    assert not positions[row, chosen[row]:].any() and not weights[row, chosen[row]:].any()
    assert not batch[features.MASKED_LM_IDS][row, chosen[row]:].any()
    np.testing.assert_array_equal(batch[features.MASKED_LM_IDS][row, :chosen[row]],
                                  ids[row, used])
    outside = np.ones(L, bool)
    outside[used] = False
    np.testing.assert_array_equal(batch[features.MASKED_INPUT_IDS][row, outside],
                                  ids[row, outside])
  assert abs(chosen.sum() / candidates.sum() - 0.15) < 0.01
  # Chosen uniformly over the sequence, not e.g. the first candidates of each row.
  rows, slots = np.nonzero(weights)
  relative = positions[rows, slots] / mask.sum(1)[rows]
  assert abs(relative.mean() - 0.5) < 0.02
  assert abs(np.mean(relative < 0.25) - 0.25) < 0.02


def test_electra_default_rates(squad_data, bert_vocab):
  original, after = _selection(_batches(_dataset(squad_data, bert_vocab), 4), bert_vocab)
  assert len(original) > 15_000
  masked = np.mean(after == bert_vocab.mask_id)
  unchanged = np.mean(after == original)
  assert abs(masked - 0.85) < 0.015 and abs(unchanged - 0.15) < 0.015
  assert masked + unchanged == 1.0  # no random replacements by default


def test_bert_rates(squad_data, bert_vocab):
  dataset = _dataset(squad_data, bert_vocab, mask_token_rate=0.8, random_token_rate=0.1)
  original, after = _selection(_batches(dataset, 4), bert_vocab)
  masked = np.mean(after == bert_vocab.mask_id)
  unchanged = np.mean(after == original)
  random = np.mean((after != bert_vocab.mask_id) & (after != original))
  assert abs(masked - 0.8) < 0.015 and abs(unchanged - 0.1) < 0.015
  assert abs(random - 0.1) < 0.015


def test_seed_makes_batches_reproducible(squad_data, bert_vocab):
  first = _batches(_dataset(squad_data, bert_vocab, batch_size=16, seed=3), 3)
  again = _batches(_dataset(squad_data, bert_vocab, batch_size=16, seed=3), 3)
  other = _batches(_dataset(squad_data, bert_vocab, batch_size=16, seed=4), 3)
  for key in features.PRETRAIN_KEYS:
    np.testing.assert_array_equal(first[key], again[key])
  assert not np.array_equal(first[features.INPUT_IDS], other[features.INPUT_IDS])


@pytest.mark.parametrize("by", ["block", "file", "record"])
def test_two_input_pipelines_read_disjoint_data(squad_data, bert_vocab, by):
  """Shuffled: every other block of 512 records; unshuffled (evaluation): by file with 2
  files, by record with 1."""
  shards = sorted(glob.glob(os.path.join(squad_data, "*.tfrecord")))
  files = shards[:1] if by == "record" else shards
  data = files if by == "record" else squad_data
  total = sum(1 for f in files for _ in tf.data.TFRecordDataset(f))
  seen = []
  for pipeline_id in range(2):
    context = tf.distribute.InputContext(num_input_pipelines=2,
                                         input_pipeline_id=pipeline_id, num_replicas_in_sync=2)
    batch = _batches(_dataset(data, bert_vocab, batch_size=4, repeat=False,
                              input_context=context, shuffle=by == "block"), 10_000)
    seen.append({row.tobytes() for row in batch[features.INPUT_IDS]})
  assert seen[0] and seen[1] and not seen[0] & seen[1]
  assert total - 8 < len(seen[0] | seen[1]) <= total  # drop_remainder loses < a batch each


def test_distributed_dataset_splits_the_global_batch(squad_data, bert_vocab):
  cpus = tf.config.list_logical_devices("CPU")
  strategy = tf.distribute.MirroredStrategy([d.name for d in cpus[:2]])
  replicas = strategy.num_replicas_in_sync
  dataset = pipeline.distributed_dataset(
      strategy, squad_data, global_batch_size=4 * replicas, max_seq_length=L,
      max_predictions_per_seq=P, mask_prob=0.15, vocab=bert_vocab, seed=0)
  batch = next(iter(dataset))
  local = strategy.experimental_local_results(batch[features.INPUT_IDS])
  assert len(local) == replicas and all(t.shape == (4, L) for t in local)
  with pytest.raises(UserError, match="does not divide among"):
    pipeline.distributed_dataset(strategy, squad_data, global_batch_size=4 * replicas + 1,
                                 max_seq_length=L, max_predictions_per_seq=P, mask_prob=0.15,
                                 vocab=bert_vocab)


def test_wrong_length_is_named(squad_data, bert_vocab, tmp_path):
  with pytest.raises(UserError, match=re.escape(
      f"data in {squad_data} holds sequences of length 128 but max_seq_length is 64")):
    _dataset(squad_data, bert_vocab, max_seq_length=64)
  bare = shutil.copy(sorted(glob.glob(os.path.join(squad_data, "*.tfrecord")))[0], tmp_path)
  with pytest.raises(UserError, match=re.escape(
      f"no manifest.json in {tmp_path}; pass a glob of its shards ('{tmp_path}/*.tfrecord')")):
    _dataset(str(tmp_path), bert_vocab, max_seq_length=64)
  with pytest.raises(UserError, match=re.escape(
      f"{bare} holds sequences of length 128 but max_seq_length is 64; rebuild the data "
      "with --max_seq_length=64 or train with --max_seq_length=128")):
    _dataset(str(tmp_path / "*.tfrecord"), bert_vocab, max_seq_length=64)


def test_not_pretraining_files(bert_vocab, tmp_path):
  with pytest.raises(UserError, match="no files match"):
    _dataset(str(tmp_path / "*.tfrecord"), bert_vocab)
  text = tmp_path / "a.tfrecord"
  text.write_text("just some text that is not a record file\n" * 10)
  with pytest.raises(UserError, match=f"{re.escape(str(text))} is not a TFRecord file"):
    _dataset(str(text), bert_vocab)


def test_explain_data_errors(squad_data, bert_vocab, tmp_path):
  shard = sorted(glob.glob(os.path.join(squad_data, "*.tfrecord")))[0]
  corrupt = tmp_path / "corrupt.tfrecord"
  data = bytearray(open(shard, "rb").read())
  data[len(data) // 2] ^= 0xFF
  corrupt.write_bytes(bytes(data))
  with pytest.raises(tf.errors.DataLossError) as error:
    _batches(_dataset(str(corrupt), bert_vocab, batch_size=8, repeat=False), 10_000)
  message = str(records.explain_data_error(error.value))
  assert re.fullmatch(r"the pretraining data is corrupt \(corrupted record at \d+\); rebuild "
                      r"the data with electra-build-data",
                      message), message

  serialized = next(iter(tf.data.TFRecordDataset(shard).batch(2)))
  with pytest.raises(tf.errors.InvalidArgumentError) as error:
    pipeline.parse_fn(64)(serialized)
  message = str(records.explain_data_error(error.value))
  assert re.fullmatch(r"the pretraining records hold \w+ of length 128 but max_seq_length is "
                      r"64; rebuild the data with --max_seq_length=64 or train with "
                      r"--max_seq_length=128", message), message
  assert "\n" not in str(records.explain_data_error(RuntimeError("x\ny")))


def _rows(batches):
  return [row.tobytes() for b in batches for row in b[features.INPUT_IDS]]


@pytest.mark.parametrize("pipelines", [1, 2])
def test_deterministic_stream_resumes_at_any_batch_across_epochs(squad_data, bert_vocab,
                                                                 pipelines):
  """start_batch=k gives exactly batches k, k+1, ... of the stream from 0, masks included;
  with two pipelines each reads every other block of 512 records."""
  context = None
  if pipelines > 1:
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1,
                                         num_replicas_in_sync=2)
  shards = sorted(glob.glob(os.path.join(squad_data, "*.tfrecord")))
  per_epoch = int(record_index.blocks_of(shards).records[(pipelines - 1)::pipelines].sum())
  batch = 32
  epoch_batches = per_epoch // batch
  n = epoch_batches * 2 + 3  # crosses two epoch boundaries

  def stream(start, count):
    dataset = _dataset(squad_data, bert_vocab, batch_size=batch, seed=5, deterministic=True,
                       start_batch=start, input_context=context, shuffle_buffer_size=200)
    return [{k: v.numpy() for k, v in b.items()} for b in dataset.take(count)]

  full = stream(0, n)
  for start in (1, epoch_batches, epoch_batches + 2, n - 2):
    resumed = stream(start, n - start)
    for expected, got in zip(full[start:], resumed):
      for key in features.PRETRAIN_KEYS:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=f"{key} @ {start}")
  # Each epoch reads every record of the pipeline once, the next epoch in another order.
  rows = _rows(full)
  first, second = rows[:per_epoch], rows[per_epoch:2 * per_epoch]
  assert len(set(first)) == per_epoch and set(second) == set(first) and second != first


def test_two_replica_stream_resumes_at_a_step(squad_data, bert_vocab):
  """distributed_dataset(start_step=k) hands each replica what it would get at step k."""
  strategy = tf.distribute.MirroredStrategy(
      ["/cpu:0", "/cpu:1"], cross_device_ops=tf.distribute.ReductionToOneDevice())

  def steps(start, count):
    dataset = pipeline.distributed_dataset(
        strategy, squad_data, global_batch_size=8, start_step=start, max_seq_length=L,
        max_predictions_per_seq=P, mask_prob=0.15, vocab=bert_vocab, seed=0,
        deterministic=True)
    iterator = iter(dataset)
    return [{k: [t.numpy() for t in strategy.experimental_local_results(v)]
             for k, v in next(iterator).items()} for _ in range(count)]

  full, resumed = steps(0, 14), steps(9, 5)
  for expected, got in zip(full[9:], resumed):
    for key in features.PRETRAIN_KEYS:
      for replica in range(2):
        np.testing.assert_array_equal(got[key][replica], expected[key][replica], err_msg=key)
  assert not np.array_equal(full[9][features.INPUT_IDS][0], full[9][features.INPUT_IDS][1])
