"""Dropout whose masks depend only on (seed, step, layer, replica, micro-batch): exact on resume.

Keras' Dropout draws from stateful random ops whose position lives in the running
process, so a run restarted from a checkpoint draws other masks than the run it continues.
`SeededDropout` instead draws stateless random bits from a seed set by the caller for the
current step (`step_seed`), folded with a key of the layer's place in the model (its name
scope when traced) and the replica. Outside a `step_seed` block (fine-tuning, plain
`model(x, training=True)`) it falls back to ordinary stateful dropout. In a pretraining
step with `fused.enabled` the mask comes from `fused.dropout` (a counter-based hash of the
same seed inside one XLA kernel) instead of the Philox bits of `keep_mask`.
"""

from __future__ import annotations

import contextlib
import contextvars
import zlib
from collections.abc import Iterator

import numpy as np
import tensorflow as tf
import tf_keras

from electra_tf.model import fused

_STEP_SEED: contextvars.ContextVar = contextvars.ContextVar("electra_dropout_seed", default=None)


@contextlib.contextmanager
def step_seed(seed: int, step: tf.Tensor, micro_batch: int | tf.Tensor = 0) -> Iterator[None]:
  """Within this block (at trace time), SeededDropout masks are a function of (seed, step).

  `micro_batch` j > 0: the inputs are micro-batch j of equal micro-batches of the step's
  batch (gradient accumulation). The fused masks are then the whole batch's at those rows
  (the element count continues after j micro-batches); the Philox masks are drawn anew
  from a seed that folds in j.
  """
  token = _STEP_SEED.set((int(seed), step, micro_batch))
  try:
    yield
  finally:
    _STEP_SEED.reset(token)


def _layer_key(name: str) -> int:
  """A stable 31-bit key for a dropout site: a hash of the current name scope and `name`."""
  where = tf.get_current_name_scope() + "|" + name
  return zlib.crc32(where.encode("utf-8")) & 0x7FFFFFFF


def _replica_id() -> tf.Tensor:
  context = tf.distribute.get_replica_context()
  replica = context.replica_id_in_sync_group if context is not None else 0
  return tf.cast(replica, tf.int64)


def _is_zero(value: int | tf.Tensor) -> bool:
  """Whether `value` is the Python int 0 (the micro-batch of a step without accumulation)."""
  return isinstance(value, int) and value == 0


def keep_mask(shape: tf.Tensor, rate: float, seed: tf.Tensor) -> tf.Tensor:
  """Bool mask of `shape`, True with probability 1 - round(rate * 2**16) / 2**16.

  Each element gets 16 random bits: full-range int32 stateless bits for half as many
  elements, each word split into two int16 halves. That is half the random-number work of
  one 32-bit draw per element (a large non-matmul cost of a training step on CPU), and
  comparing raw bits against an integer threshold skips the int -> float conversion of a
  uniform draw. The drop probability is rate rounded to a multiple of 2**-16 (0.1 becomes
  0.100006).
  """
  static = tf.get_static_value(shape)
  # Sizes are usually known when traced; then an even count needs no slice.
  size = int(np.prod(static)) if static is not None else tf.reduce_prod(shape)
  words = tf.random.stateless_uniform(tf.reshape((size + 1) // 2, [1]), seed=seed,
                                      minval=None, maxval=None, dtype=tf.int32)
  halves = tf.reshape(tf.bitcast(words, tf.int16), [-1])
  if static is None or size % 2:
    halves = halves[:size]
  threshold = round(drop_probability_16bit(rate) * 2**16) - 2**15  # P(halves >= threshold) = 1 - p
  return tf.reshape(halves >= threshold, shape)


def drop_probability_16bit(rate: float) -> float:
  """The drop probability `keep_mask` realises for `rate`: rate rounded to 2**-16.

  Not `fused.drop_probability_32bit`, the fused kernel's (rate rounded to 2**-32).
  """
  return round(rate * 2**16) / 2**16


@tf.custom_gradient
def _apply_mask(inputs: tf.Tensor, mask: tf.Tensor):
  """inputs * mask whose gradient is one multiply by the same mask (none for the mask)."""
  def grad(upstream):
    return upstream * mask, None
  return inputs * mask, grad


class SeededDropout(tf_keras.layers.Layer):
  """Inverted dropout with masks drawn from the seed of `step_seed` (see the module doc).

  Args:
    rate: fraction of units zeroed, in [0, 1).
  """

  def __init__(self, rate: float, **kwargs):
    super().__init__(**kwargs)
    if not 0.0 <= rate < 1.0:
      raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
    if drop_probability_16bit(rate) == 1.0:
      raise ValueError(f"dropout rate {rate} rounds to 1 at 16-bit resolution; use at most "
                       f"{1 - 2**-16:.6f}")
    self.rate = float(rate)
    self.supports_masking = True

  def call(self, inputs: tf.Tensor, training=None) -> tf.Tensor:
    if training is None:
      training = tf_keras.backend.learning_phase()
    if self.rate == 0.0 or training is False or training == 0:
      return inputs
    static_training = training is True or training == 1
    if static_training and fused.active() and _STEP_SEED.get() is not None:
      # A pretraining step's forward pass: one XLA kernel each way, masks from a hash.
      micro_batch = _STEP_SEED.get()[2]
      first = None if _is_zero(micro_batch) else (
          tf.cast(micro_batch, tf.int64) * tf.size(inputs, out_type=tf.int64))
      return fused.dropout(inputs, self.rate, self._seed(), first_element=first)
    dropped = _apply_mask(inputs, self._scaled_mask(tf.shape(inputs), inputs.dtype))
    if static_training:
      return dropped
    return tf.cond(tf.cast(training, tf.bool), lambda: dropped, lambda: inputs)

  def _seed(self) -> tf.Tensor:
    """The stateless seed of this site within `step_seed`: (seed, step, place, replica).

    The key hashes the traced name scope and this layer's name.
    """
    base, step, _ = _STEP_SEED.get()
    return tf.stack([tf.constant((base * 1_000_003 + _layer_key(self.name)) % 2**62, tf.int64),
                     tf.cast(step, tf.int64) * 4096 + _replica_id()])

  def _scaled_mask(self, shape: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    """The multiplier applied in training: 0 or 1 / (1 - p) per element.

    Within `step_seed`, drawn from `_seed()`; elsewhere from TensorFlow's stateful random ops.
    """
    if _STEP_SEED.get() is None:
      keep = tf.random.uniform(shape) >= drop_probability_16bit(self.rate)
    else:
      seed, micro_batch = self._seed(), _STEP_SEED.get()[2]
      if not _is_zero(micro_batch):  # bits 48..62 of the second word (steps < 2**36)
        seed += tf.stack([tf.constant(0, tf.int64), tf.cast(micro_batch, tf.int64) * 2**48])
      keep = keep_mask(shape, self.rate, seed)
    # The scale uses the realised drop probability, so E[output] = inputs exactly. A cast
    # and a scalar multiply: cheaper on CPU than a select with broadcast scalars.
    scale = 1.0 / (1.0 - drop_probability_16bit(self.rate))
    return tf.cast(keep, dtype) * tf.constant(scale, dtype)

  def get_config(self):
    config = super().get_config()
    config.update(rate=self.rate)
    return config
