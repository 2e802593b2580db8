"""SeededDropout: keep probability, scaling, independence of the 16-bit draws, gradient."""

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.model import dropout


def _seeded(layer, x, step, training=True):
  with dropout.step_seed(7, tf.constant(step, tf.int64)):
    return layer(x, training=training)


@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_keep_fraction_and_scale(rate):
  # An odd element count exercises the half word left over at the end.
  x = tf.ones([257, 511])
  y = _seeded(dropout.SeededDropout(rate, name="d"), x, step=3).numpy()
  p = dropout.drop_probability(rate)
  kept = y != 0
  n = y.size
  sd = np.sqrt(n * p * (1 - p))
  assert abs((n - kept.sum()) - n * p) < 5 * sd
  np.testing.assert_allclose(y[kept], 1.0 / (1.0 - p), rtol=1e-7)
  # The last element is drawn too (not left at a fixed value by the odd-size slice).
  assert 0 < kept[-1].sum() < 511


def test_drop_probability_resolution():
  assert dropout.drop_probability(0.1) == 6554 / 65536
  assert abs(dropout.drop_probability(0.1) - 0.1) < 1e-5
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
  scale = np.asarray(1.0 / (1.0 - dropout.drop_probability(0.25))).astype(np_dtype)
  mask = np.where(y.numpy() != 0, scale, np.zeros((), np_dtype)).astype(np_dtype)
  # Forward: kept elements are the input times the scale in the layer's dtype (x != 0
  # almost surely); backward: the upstream gradient times the same mask.
  np.testing.assert_array_equal(y.numpy(), x.numpy() * mask)
  np.testing.assert_array_equal(grad.numpy(), weights.numpy() * mask)
