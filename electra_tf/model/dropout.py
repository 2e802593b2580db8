"""Dropout whose masks depend only on (seed, step, layer, replica): exact on resume.

Keras' Dropout draws from stateful random ops whose position lives in the running
process, so a run restarted from a checkpoint draws other masks than the run it continues.
`SeededDropout` instead draws stateless random bits from a seed set by the caller for the
current step (`step_seed`), folded with a key of the layer's place in the model (its name
scope when traced) and the replica. Outside a `step_seed` block (fine-tuning, plain
`model(x, training=True)`) it falls back to ordinary stateful dropout.
"""

from __future__ import annotations

import contextlib
import contextvars
import zlib
from collections.abc import Iterator

import tensorflow as tf
import tf_keras

_STEP_SEED: contextvars.ContextVar = contextvars.ContextVar("electra_dropout_seed", default=None)


@contextlib.contextmanager
def step_seed(seed: int, step: tf.Tensor) -> Iterator[None]:
  """Within this block (at trace time), SeededDropout masks are a function of (seed, step)."""
  token = _STEP_SEED.set((int(seed), step))
  try:
    yield
  finally:
    _STEP_SEED.reset(token)


def _layer_key() -> int:
  """A stable 31-bit key for the op being traced: a hash of the current name scope."""
  return zlib.crc32(tf.get_current_name_scope().encode("utf-8")) & 0x7FFFFFFF


def _replica_id() -> tf.Tensor:
  context = tf.distribute.get_replica_context()
  replica = context.replica_id_in_sync_group if context is not None else 0
  return tf.cast(replica, tf.int64)


def keep_mask(shape: tf.Tensor, rate: float, seed: tf.Tensor) -> tf.Tensor:
  """Bool mask, True with probability 1 - rate, from full-range int32 stateless bits.

  Comparing raw bits against an integer threshold skips the int -> float conversion of a
  uniform draw; the keep probability is exact to 2**-32.
  """
  bits = tf.random.stateless_uniform(shape, seed=seed, minval=None, maxval=None,
                                     dtype=tf.int32)
  threshold = int(round(rate * 2**32)) - 2**31  # P(bits >= threshold) = 1 - rate
  return bits >= threshold


class SeededDropout(tf_keras.layers.Layer):
  """Inverted dropout with masks drawn from the seed of `step_seed` (see the module doc).

  Args:
    rate: fraction of units zeroed, in [0, 1).
  """

  def __init__(self, rate: float, **kwargs):
    super().__init__(**kwargs)
    if not 0.0 <= rate < 1.0:
      raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
    self.rate = float(rate)
    self.supports_masking = True

  def call(self, inputs: tf.Tensor, training=None) -> tf.Tensor:
    if training is None:
      training = tf_keras.backend.learning_phase()
    if self.rate == 0.0 or training is False or training == 0:
      return inputs
    current = _STEP_SEED.get()
    if current is None:
      dropped = tf.nn.dropout(inputs, rate=self.rate)
    else:
      base, step = current
      seed = tf.stack([tf.constant((base * 1_000_003 + _layer_key()) % 2**62, tf.int64),
                       tf.cast(step, tf.int64) * 4096 + _replica_id()])
      keep = keep_mask(tf.shape(inputs), self.rate, seed)
      scale = tf.constant(1.0 / (1.0 - self.rate), inputs.dtype)
      dropped = tf.where(keep, inputs * scale, tf.zeros_like(inputs))
    if training is True or training == 1:
      return dropped
    return tf.cond(tf.cast(training, tf.bool), lambda: dropped, lambda: inputs)

  def get_config(self):
    config = super().get_config()
    config.update(rate=self.rate)
    return config
