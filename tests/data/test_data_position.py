"""Where the shuffled input stream starts: at any record position, by seeking.

Records here carry their id (input_ids[1] = ID_BASE + id), so what a stream delivers can be
counted record by record.
"""

import collections
import glob
import json
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from electra_tf import features
from electra_tf.config import PretrainConfig
from electra_tf.data import pipeline, positioned, record_index
from electra_tf.data.manifest import RECORD_INDEX_EVERY, read_manifest
from electra_tf.errors import UserError
from electra_tf.training import pretraining

L, P = 8, 2
ID_BASE = 1000
SHARD_SIZES = (100, 37, 250, 1, 90)  # 478 records; uneven, one shard of a single record


@pytest.fixture(scope="module")
def id_shards(tmp_path_factory, bert_vocab) -> str:
  """Shards of records whose input_ids[1] is ID_BASE + a unique id; returns their glob."""
  directory = tmp_path_factory.mktemp("ids")
  next_id = 0
  for shard, size in enumerate(SHARD_SIZES):
    with tf.io.TFRecordWriter(str(directory / f"ids-{shard}.tfrecord")) as writer:
      for _ in range(size):
        tokens = [bert_vocab.cls_id, ID_BASE + next_id, ID_BASE, bert_vocab.sep_id]
        example = tf.train.Example()
        feature = example.features.feature
        feature[features.INPUT_IDS].int64_list.value.extend(tokens + [0] * (L - 4))
        feature[features.INPUT_MASK].int64_list.value.extend([1] * 4 + [0] * (L - 4))
        feature[features.SEGMENT_IDS].int64_list.value.extend([0] * L)
        writer.write(example.SerializeToString())
        next_id += 1
  return str(directory / "*.tfrecord")


def _layout(pattern, block_records=16, window_blocks=3, seed=7):
  files = sorted(glob.glob(pattern))
  return positioned.Layout(record_index.blocks_of(files, block_records), window_blocks, seed)


def _ids(serialized) -> list[int]:
  spec = {features.INPUT_IDS: tf.io.FixedLenFeature([L], tf.int64)}
  rows = tf.io.parse_example(tf.stack(list(serialized)), spec)[features.INPUT_IDS]
  return (rows[:, 1].numpy() - ID_BASE).tolist()


def _stream_ids(layout, position, count):
  return _ids(positioned.records_from(layout, position, repeat=True).take(count))


def test_a_stream_started_at_p_is_the_tail_of_the_stream_from_0(id_shards):
  layout = _layout(id_shards)
  per_epoch = layout.records_per_epoch
  assert per_epoch == sum(SHARD_SIZES)
  full = _stream_ids(layout, 0, 3 * per_epoch)
  # Each epoch is every record once, each epoch in another order.
  epochs = [full[e * per_epoch:(e + 1) * per_epoch] for e in range(3)]
  assert all(sorted(epoch) == list(range(per_epoch)) for epoch in epochs)
  assert epochs[0] != epochs[1] != epochs[2]
  # Block order and the shuffle inside a window of 3 blocks both moved records.
  assert sum(a + 1 != b for a, b in zip(epochs[0], epochs[0][1:])) > per_epoch // 2
  window_end = next(p for p in range(1, per_epoch) if layout.locate(p)[1] == 1)
  positions = {"inside a block": 5, "a window boundary": window_end,
               "inside a later window": window_end + 17, "last of an epoch": per_epoch - 1,
               "an epoch boundary": per_epoch, "deep in epoch 2": 2 * per_epoch + 301}
  assert layout.locate(5) == (0, 0, 5) and layout.locate(window_end) == (0, 1, 0)
  for where, position in positions.items():
    got = _stream_ids(layout, position, 3 * per_epoch - position)
    assert got == full[position:], where


def test_block_boundaries_inside_a_window(id_shards):
  """A position at a block boundary that is not a window boundary, with one-block windows
  too (then every block boundary is one)."""
  for window_blocks in (1, 4):
    layout = _layout(id_shards, block_records=10, window_blocks=window_blocks)
    full = _stream_ids(layout, 0, 2 * layout.records_per_epoch)
    for position in (10, 40, layout.records_per_epoch + 10):
      assert _stream_ids(layout, position, 60) == full[position:position + 60], (
          window_blocks, position)


def _dataset(data, vocab, **kwargs):
  args = dict(batch_size=2, max_seq_length=L, max_predictions_per_seq=P, mask_prob=0.15,
              vocab=vocab, seed=3, block_records=16, shuffle_buffer_size=48)
  return pipeline.make_pretraining_dataset(data, **{**args, **kwargs})


def _batch_ids(dataset, count):
  return [(b[features.INPUT_IDS][:, 1].numpy() - ID_BASE).tolist()
          for b in dataset.take(count)]


def test_deterministic_batches_resume_exactly_masks_included(id_shards, bert_vocab):
  full = [{k: v.numpy() for k, v in b.items()}
          for b in _dataset(id_shards, bert_vocab, deterministic=True).take(300)]
  resumed = _dataset(id_shards, bert_vocab, deterministic=True, start_batch=250).take(50)
  for expected, got in zip(full[250:], resumed, strict=True):
    for key in features.PRETRAIN_KEYS:
      np.testing.assert_array_equal(got[key].numpy(), expected[key], err_msg=key)


@pytest.mark.parametrize("pipelines", [1, 2])
def test_default_mode_resume_covers_each_record_once_per_epoch(id_shards, bert_vocab,
                                                               pipelines):
  """Parallel mode (random masks): steps 0..k of one run and k.. of a resumed one read every
  record of the epoch once, and the same batches as the run left alone."""
  per_pipeline = {}
  for pipeline_id in range(pipelines):
    context = tf.distribute.InputContext(num_input_pipelines=pipelines,
                                         input_pipeline_id=pipeline_id)

    def make(start, context=context):
      return _dataset(id_shards, bert_vocab, deterministic=False, start_batch=start,
                      input_context=context)

    blocks = record_index.blocks_of(sorted(glob.glob(id_shards)), 16)
    share = int(blocks.records[pipeline_id::pipelines].sum())
    batches = -(-share // 2)  # one epoch at batch 2 (its last batch may begin the next)
    alone = _batch_ids(make(0), batches)
    interrupted = _batch_ids(make(0), batches // 3) + _batch_ids(make(batches // 3),
                                                                batches - batches // 3)
    assert interrupted == alone
    per_pipeline[pipeline_id] = [i for batch in interrupted for i in batch][:share]
  # The masks are drawn at random: this is not the deterministic mode, even under a global
  # seed. Three batches per draw: one batch of two short sequences can leave a single
  # maskable choice.
  tf.random.set_seed(11)
  masks = [np.concatenate([b[features.MASKED_LM_POSITIONS].numpy() for b in make(0).take(3)])
           for _ in range(4)]
  assert any(not np.array_equal(masks[0], m) for m in masks[1:])
  counts = collections.Counter(i for ids in per_pipeline.values() for i in ids)
  assert sorted(counts) == list(range(sum(SHARD_SIZES))) and set(counts.values()) == {1}


def test_pretraining_resumes_the_default_mode_stream(id_shards, bert_vocab):
  """make_dataset (what the pretraining run reads) starts at its step without --deterministic."""
  config = PretrainConfig(max_seq_length=L, batch_size=4, deterministic=False)
  data = pretraining.TrainData(sorted(glob.glob(id_shards)), bert_vocab)
  strategy = tf.distribute.get_strategy()

  def steps(start, count):
    iterator = iter(pretraining.make_dataset(config, data, strategy, start_step=start))
    return [(next(iterator)[features.INPUT_IDS][:, 1].numpy() - ID_BASE).tolist()
            for _ in range(count)]

  assert steps(0, 150)[130:] == steps(130, 20)


def _rchar() -> int:
  with open("/proc/self/io", encoding="ascii") as f:
    return int(re.search(r"rchar: (\d+)", f.read()).group(1))


@pytest.fixture(scope="module")
def large_data(tmp_path_factory, bert_vocab) -> str:
  """About 16 MB of records (the built-in corpus, L=128) in 4 shards."""
  from electra_tf.data import builtin, pretraining_data

  root = tmp_path_factory.mktemp("large")
  files = builtin.builtin_corpus(str(root / "cache"))
  out = str(root / "data")
  pretraining_data.build_pretraining_data(files, bert_vocab, out, max_seq_length=128,
                                          num_workers=1, min_shards=4, show_progress=False)
  return out


def test_manifest_index_is_where_the_records_are(large_data):
  manifest = read_manifest(large_data)
  assert manifest.index_every == RECORD_INDEX_EVERY
  for shard, path in zip(manifest.shards, manifest.shard_paths, strict=True):
    assert record_index.scan_offsets(path, RECORD_INDEX_EVERY) == (shard.records,
                                                                   list(shard.offsets))
    assert len(shard.offsets) > 1
    # The record at each offset is the one a plain reader finds there.
    plain = list(tf.data.TFRecordDataset(path).take(RECORD_INDEX_EVERY + 1))
    blocks = record_index.blocks_of([path])
    assert blocks.records.sum() == shard.records and blocks.bytes.sum() == shard.bytes
    second = tf.data.Dataset.from_tensors(
        (path, blocks.offset[1], 1, blocks.bytes[1])).flat_map(record_index.read_block)
    assert [r.numpy() for r in second] == [plain[RECORD_INDEX_EVERY].numpy()]


def test_a_deep_position_is_reached_without_reading_the_data_before_it(large_data,
                                                                        bert_vocab):
  """Bytes read (/proc/self/io rchar) to the first batch: the same at position 0 and deep
  in epoch 3, and a small part of the data."""
  manifest = read_manifest(large_data)
  args = dict(batch_size=32, max_seq_length=128, max_predictions_per_seq=19, mask_prob=0.15,
              vocab=bert_vocab, seed=0, deterministic=True, shuffle_buffer_size=1024)
  per_epoch_batches = manifest.examples // 32
  read = {}
  for start in (0, per_epoch_batches * 3 + per_epoch_batches // 2):
    before = _rchar()
    dataset = pipeline.make_pretraining_dataset(large_data, start_batch=start, **args)
    next(iter(dataset))
    read[start] = _rchar() - before
  data_bytes = manifest.record_bytes
  first, deep = read.values()
  # Two windows of two blocks are read ahead; a block is about 0.35 MB here.
  assert deep < 1.5 * first + (1 << 20), read
  assert deep < data_bytes / 4, (read, data_bytes)  # 3.5 passes of it lie before it


def test_data_without_an_index_loads_and_streams_alike(large_data, bert_vocab, tmp_path,
                                                       capfd):
  old = str(tmp_path / "old")
  shutil.copytree(large_data, old)
  path = os.path.join(old, "manifest.json")
  with open(path, encoding="utf-8") as f:
    values = json.load(f)
  del values["index_every"]
  for shard in values["shards"]:
    del shard["offsets"]
  with open(path, "w", encoding="utf-8") as f:
    json.dump(values, f)
  args = dict(batch_size=32, max_seq_length=128, max_predictions_per_seq=19, mask_prob=0.15,
              vocab=bert_vocab, seed=0, deterministic=True, start_batch=100)
  new_batches = list(pipeline.make_pretraining_dataset(large_data, **args).take(2))
  old_batches = list(pipeline.make_pretraining_dataset(old, **args).take(2))
  for new, got in zip(new_batches, old_batches, strict=True):
    np.testing.assert_array_equal(got[features.INPUT_IDS], new[features.INPUT_IDS])
  assert re.search(r"note: 4 data file\(s\) .* have no record index .*; scanned their "
                   r"record headers", capfd.readouterr().err)


def test_a_damaged_index_or_file_is_refused(large_data, tmp_path):
  broken = str(tmp_path / "broken")
  shutil.copytree(large_data, broken)
  path = os.path.join(broken, "manifest.json")
  with open(path, encoding="utf-8") as f:
    values = json.load(f)
  values["shards"][0]["offsets"] = values["shards"][0]["offsets"][:-1]
  with open(path, "w", encoding="utf-8") as f:
    json.dump(values, f)
  with pytest.raises(UserError, match=r"the record index of shard-00000.tfrecord does not "
                                      r"fit its \d+ records"):
    read_manifest(broken)
  text = tmp_path / "text.tfrecord"
  text.write_text("not a record file\n" * 100)
  with pytest.raises(UserError, match="is not a TFRecord file, or is truncated or corrupt"):
    record_index.scan_offsets(str(text), 16)
