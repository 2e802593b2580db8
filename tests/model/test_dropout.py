"""SeededDropout: keep probability, scaling, independence of the 16-bit draws, gradient; the
fused (XLA, SplitMix64) dropout of a pretraining step against a NumPy reference."""

import numpy as np
import pytest
import tensorflow as tf
from testing_utils import xla_compiled_functions

from electra_tf.model import dropout, fused


def _seeded(layer, x, step, training=True):
  with dropout.step_seed(7, tf.constant(step, tf.int64)):
    return layer(x, training=training)


@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_keep_fraction_and_scale(rate):
  # An odd element count exercises the half word left over at the end.
  x = tf.ones([257, 511])
  y = _seeded(dropout.SeededDropout(rate, name="d"), x, step=3).numpy()
  p = dropout.drop_probability_16bit(rate)
  kept = y != 0
  n = y.size
  sd = np.sqrt(n * p * (1 - p))
  assert abs((n - kept.sum()) - n * p) < 5 * sd
  np.testing.assert_allclose(y[kept], 1.0 / (1.0 - p), rtol=1e-7)
  # The last element is drawn too (not left at a fixed value by the odd-size slice).
  assert 0 < kept[-1].sum() < 511


def test_drop_probability_resolutions():
  assert dropout.drop_probability_16bit(0.1) == 6554 / 65536
  assert abs(dropout.drop_probability_16bit(0.1) - 0.1) < 1e-5
  # The fused kernel compares 32 bits: its rate is resolved 65536 times finer.
  assert fused.drop_probability_32bit(0.1) == 429496730 / 2**32
  assert fused.drop_probability_32bit(0.1) != dropout.drop_probability_16bit(0.1)
  with pytest.raises(ValueError, match="rounds to 1"):
    dropout.SeededDropout(1 - 2**-18)


def test_halves_of_a_word_are_independent():
  # Each int32 word feeds two neighbouring elements. If they shared bits, neighbours would
  # be dropped together with probability p instead of p**2.
  keep = dropout.keep_mask(tf.constant([1_000_000]), 0.5,
                           tf.constant([11, 12], tf.int64)).numpy()
  pairs = keep.reshape(-1, 2)
  both_dropped = np.mean(~pairs[:, 0] & ~pairs[:, 1])
  assert abs(both_dropped - 0.25) < 5 * np.sqrt(0.25 * 0.75 / pairs.shape[0])
  low, high = np.mean(~pairs[:, 0]), np.mean(~pairs[:, 1])
  assert abs(low - 0.5) < 0.005 and abs(high - 0.5) < 0.005


def test_masks_follow_seed_step_and_layer():
  x = tf.ones([64, 128])
  a = dropout.SeededDropout(0.1, name="a")
  b = dropout.SeededDropout(0.1, name="b")
  with tf.name_scope("block_a"):
    first = _seeded(a, x, step=5)
    again = _seeded(a, x, step=5)
    next_step = _seeded(a, x, step=6)
  with tf.name_scope("block_b"):
    other_layer = _seeded(b, x, step=5)
  np.testing.assert_array_equal(first, again)
  assert np.any(first.numpy() != next_step.numpy())
  assert np.any(first.numpy() != other_layer.numpy())
  np.testing.assert_array_equal(_seeded(a, x, step=5, training=False), x)


def test_static_and_dynamic_shapes_draw_the_same_mask():
  seed = tf.constant([3, 4], tf.int64)
  static = dropout.keep_mask(tf.constant([37, 9]), 0.1, seed)

  @tf.function(input_signature=[tf.TensorSpec([None, None], tf.float32)])
  def dynamic(x):
    return dropout.keep_mask(tf.shape(x), 0.1, seed)

  np.testing.assert_array_equal(static, dynamic(tf.zeros([37, 9])))


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_gradient_is_the_same_scaled_mask(dtype):
  x = tf.random.normal([32, 48], dtype=tf.float32)
  x = tf.cast(x, dtype)
  weights = tf.cast(tf.random.normal([32, 48]), dtype)
  layer = dropout.SeededDropout(0.25, name="g", dtype=dtype)
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = _seeded(layer, x, step=1)
    loss = tf.reduce_sum(weights * y)
  grad = tape.gradient(loss, x)
  np_dtype = dtype.as_numpy_dtype
  scale = np.asarray(1.0 / (1.0 - dropout.drop_probability_16bit(0.25))).astype(np_dtype)
  mask = np.where(y.numpy() != 0, scale, np.zeros((), np_dtype)).astype(np_dtype)
  # Forward: kept elements are the input times the scale in the layer's dtype (x != 0
  # almost surely); backward: the upstream gradient times the same mask.
  np.testing.assert_array_equal(y.numpy(), x.numpy() * mask)
  np.testing.assert_array_equal(grad.numpy(), weights.numpy() * mask)


# The fused dropout of a pretraining step (electra_tf/model/fused.py).

_U64 = np.uint64


def _numpy_keep(size, rate, seed):
  """SplitMix64 masks as fused.py documents them, in NumPy (uint64 arithmetic wraps)."""
  def mix64(z):
    z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
    return z ^ (z >> _U64(31))

  with np.errstate(over="ignore"):
    key = mix64(mix64(_U64(seed[0])) ^ _U64(seed[1]))
    counter = np.arange(1, size + 1, dtype=_U64)
    bits = mix64(key + counter * _U64(0x9E3779B97F4A7C15))
  return (bits >> _U64(32)) >= _U64(round(rate * 2**32))


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_fused_dropout_matches_numpy_and_its_gradient_reuses_the_mask(dtype):
  seed = tf.constant([123456789, 42 * 4096 + 1], tf.int64)
  x = tf.cast(tf.random.stateless_normal([37, 91], seed=[1, 1]), dtype)
  weights = tf.cast(tf.random.stateless_normal([37, 91], seed=[2, 2]), dtype)
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = fused.dropout(x, 0.3, seed)
    loss = tf.reduce_sum(tf.cast(weights * y, tf.float32))
  grad = tape.gradient(loss, x)
  keep = _numpy_keep(x.shape.num_elements(), 0.3, seed.numpy()).reshape(37, 91)
  scale = 1.0 / (1.0 - fused.drop_probability_32bit(0.3))

  def expected(v):  # scaled in float32, rounded once to the dtype
    scaled = tf.cast(tf.cast(v, tf.float32) * scale, dtype).numpy()
    return np.where(keep, scaled, np.zeros((), scaled.dtype))

  np.testing.assert_array_equal(y.numpy(), expected(x))
  np.testing.assert_array_equal(grad.numpy(), expected(weights))


def _fused(layer, x, step):
  with fused.enabled(True):
    return _seeded(layer, x, step)


@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_fused_keep_fraction_and_scale(rate):
  y = _fused(dropout.SeededDropout(rate, name="d"), tf.ones([257, 511]), step=3).numpy()
  p = fused.drop_probability_32bit(rate)
  kept = y != 0
  sd = np.sqrt(y.size * p * (1 - p))
  assert abs((y.size - kept.sum()) - y.size * p) < 5 * sd
  np.testing.assert_allclose(y[kept], 1.0 / (1.0 - p), rtol=1e-7)
  # Not the Philox mask of the unfused path.
  assert np.any(kept != (_seeded(dropout.SeededDropout(rate, name="d"), tf.ones([257, 511]),
                                 step=3).numpy() != 0))


def test_fused_masks_are_independent_across_neighbours_steps_and_layers():
  x = tf.ones([1000, 1000])
  a, b = dropout.SeededDropout(0.5, name="a"), dropout.SeededDropout(0.5, name="b")
  dropped = {"a5": _fused(a, x, 5).numpy() == 0, "a6": _fused(a, x, 6).numpy() == 0,
             "b5": _fused(b, x, 5).numpy() == 0}
  np.testing.assert_array_equal(dropped["a5"], _fused(a, x, 5).numpy() == 0)
  bound = 5 * np.sqrt(0.25 * 0.75 / 500_000)
  pairs = dropped["a5"].reshape(-1, 2)
  assert abs(np.mean(pairs[:, 0] & pairs[:, 1]) - 0.25) < bound  # neighbours
  for other in ("a6", "b5"):  # the next step, another layer
    assert abs(np.mean(dropped["a5"] & dropped[other]) - 0.25) < 2 * bound


def test_fused_dropout_is_one_xla_kernel_each_way_and_only_when_enabled():
  layer = dropout.SeededDropout(0.1, name="k")
  x = tf.ones([8, 16])

  def traced(use_fused):
    def fn():
      with tf.GradientTape() as tape:
        tape.watch(x)
        with fused.enabled(use_fused):
          y = _seeded(layer, x, step=2)
      return tape.gradient(y, x)
    return len(xla_compiled_functions(fn))

  assert traced(True) >= 1 and traced(False) == 0


def test_fused_dropout_with_a_batch_dimension_unknown_when_traced():
  # As in a distributed or last partial batch: XLA compiles for the shape it is given.
  seed = tf.constant([5, 6], tf.int64)
  x = tf.random.stateless_normal([7, 16], seed=[3, 3])

  @tf.function(input_signature=[tf.TensorSpec([None, 16], tf.float32)])
  def dynamic(x):
    return fused.dropout(x, 0.2, seed)

  np.testing.assert_array_equal(dynamic(x), fused.dropout(x, 0.2, seed))
  assert dynamic(x[:3]).shape == (3, 16)


# Micro-batches of gradient accumulation (electra_tf/model/accumulation.py).

def _micro(layer, x, step, micro_batch, use_fused):
  with fused.enabled(use_fused), dropout.step_seed(7, tf.constant(step, tf.int64), micro_batch):
    return layer(x, training=True).numpy()


def test_fused_micro_batches_draw_the_whole_batch_mask_at_their_rows():
  layer = dropout.SeededDropout(0.5, name="m")
  x = tf.ones([6, 5, 7])
  whole = _micro(layer, x, 4, 0, True)
  parts = [_micro(layer, x[2 * j:2 * j + 2], 4, tf.constant(j), True) for j in range(3)]
  np.testing.assert_array_equal(np.concatenate(parts), whole)


def test_philox_micro_batches_draw_other_masks_and_micro_batch_zero_the_step_mask():
  layer = dropout.SeededDropout(0.5, name="m")
  x = tf.ones([4, 64])
  step_mask = _micro(layer, x, 4, 0, False)
  np.testing.assert_array_equal(_micro(layer, x, 4, tf.constant(0), False), step_mask)
  dropped = [_micro(layer, x, 4, tf.constant(j), False) == 0 for j in (1, 2)]
  for other in dropped:  # independent of micro-batch 0's: both dropped a quarter of the time
    assert abs(np.mean(other & (step_mask == 0)) - 0.25) < 0.1
  assert np.any(dropped[0] != dropped[1])
