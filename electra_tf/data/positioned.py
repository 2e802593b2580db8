"""The shuffled pretraining stream, started at any record position without reading the
records before it.

An input pipeline's records are cut into blocks of K consecutive records (record_index.py).
Epoch e reads all blocks once, in a permutation seeded by (seed, e), in windows of W
consecutive blocks of that permutation, and shuffles each window's records among
themselves with a stateless seed from (seed, e, window). The blocks of a window are read in
parallel and put back in their order before the shuffle, so the stream is a pure function
of (seed, position) whatever the timing of the reads.

Position p of the stream (records delivered so far) is therefore in epoch
p // records_per_epoch, in the window that the window sizes of that epoch's permutation
point to, at a known offset inside it. The stream starts by seeking to the blocks of that
window and skipping inside it: the first record delivered waits for at most W * K records
to be read (the next window is read ahead meanwhile), wherever p is.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from electra_tf.data.record_index import Blocks, read_block

_READERS = 8  # blocks of a window read at once


@dataclasses.dataclass(frozen=True)
class Layout:
  """How one input pipeline's blocks are ordered and grouped, epoch by epoch.

  Args:
    blocks: the pipeline's blocks.
    window_blocks: W, blocks whose records are shuffled together (the shuffle buffer).
    seed: seeds each epoch's block permutation and the shuffle of its windows.
  """

  blocks: Blocks
  window_blocks: int
  seed: int

  @property
  def records_per_epoch(self) -> int:
    return int(self.blocks.records.sum())

  @property
  def windows_per_epoch(self) -> int:
    return -(-len(self.blocks.records) // self.window_blocks)

  def order(self, epoch: tf.Tensor) -> tf.Tensor:
    """The epoch's block permutation, int64 [N] (the same eagerly and inside tf.data)."""
    count = len(self.blocks.records)
    return tf.random.experimental.stateless_shuffle(
        tf.range(count, dtype=tf.int64),
        seed=tf.stack([tf.constant(self.seed, tf.int64), tf.cast(epoch, tf.int64)]),
        alg="philox")

  def locate(self, position: int) -> tuple[int, int, int]:
    """(epoch, window within the epoch, records into that window) of record `position`."""
    epoch, rest = divmod(position, self.records_per_epoch)
    # Eager even when a strategy builds the dataset inside a graph, and on the CPU, where
    # tf.data computes the same permutation (one algorithm named, not left to the device).
    with tf.init_scope(), tf.device("/CPU:0"):
      order = self.order(tf.constant(epoch, tf.int64)).numpy()
    starts = np.arange(0, len(order), self.window_blocks)
    ends = np.cumsum(np.add.reduceat(self.blocks.records[order], starts))
    window = int(np.searchsorted(ends, rest, side="right"))
    return epoch, window, rest - (int(ends[window - 1]) if window else 0)

  def window_records(self, epoch: tf.Tensor, window: tf.Tensor) -> tf.Tensor:
    """The shuffled serialized records of one window, string [n]."""
    chosen = self.order(epoch)[window * self.window_blocks:(window + 1) * self.window_blocks]
    paths = tf.gather(tf.constant(self.blocks.files), tf.gather(self.blocks.file, chosen))
    blocks = tf.data.Dataset.from_tensor_slices(
        (paths, tf.gather(self.blocks.offset, chosen), tf.gather(self.blocks.records, chosen),
         tf.gather(self.blocks.bytes, chosen)))
    readers = min(self.window_blocks, _READERS)
    # Parallel reads; block_length K takes each block whole, so the output is the blocks'
    # concatenation in their order.
    records = blocks.interleave(read_block, cycle_length=readers, block_length=self.blocks.size,
                                num_parallel_calls=readers, deterministic=True)
    values = records.batch(self.window_blocks * self.blocks.size).get_single_element()
    seed = tf.random.experimental.stateless_fold_in(
        tf.stack([tf.constant(self.seed, tf.int64), tf.cast(epoch, tf.int64)]), window,
        alg="philox")
    return tf.random.experimental.stateless_shuffle(values, seed=seed, alg="philox")


def records_from(layout: Layout, position: int, repeat: bool) -> tf.data.Dataset:
  """The serialized records of the stream from record `position` on.

  Args:
    layout: the pipeline's blocks, windows and seed.
    position: records already delivered (over all epochs).
    repeat: epochs without end; else only the epoch `position` is in.
  """
  epoch, window, offset = layout.locate(position)
  if not repeat and epoch > 0:
    raise ValueError("the start position is past the single pass of repeat=False")
  per_epoch = layout.windows_per_epoch
  first = epoch * per_epoch + window
  windows = tf.data.Dataset.range(first, (epoch + 1) * per_epoch if not repeat else 2**62)

  def load(index: tf.Tensor) -> tf.Tensor:
    return layout.window_records(index // per_epoch, index % per_epoch)

  # Two windows at a time: the next one is read and shuffled while this one is consumed.
  windows = windows.map(load, num_parallel_calls=2, deterministic=True)
  return windows.unbatch().skip(offset)
