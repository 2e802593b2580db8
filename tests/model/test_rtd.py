"""Golden values for sampling, corruption, labels and losses on a 10-token vocabulary."""

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.model import rtd


def test_scatter_update_writes_only_real_slots():
  ids = tf.constant([[101, 5, 6, 7, 102, 0]], tf.int32)
  positions = tf.constant([[1, 3, 0]], tf.int32)  # the last slot is padding
  weights = tf.constant([[1.0, 1.0, 0.0]])
  updates = tf.constant([[9, 8, 4]], tf.int32)
  out = rtd.scatter_update(ids, updates, positions, weights).numpy()
  np.testing.assert_array_equal(out, [[101, 9, 6, 8, 102, 0]])  # [CLS] untouched


def test_replaced_labels_count_correct_samples_as_original():
  original = tf.constant([[1, 2, 3, 4, 0]], tf.int32)
  corrupted = tf.constant([[1, 7, 3, 4, 0]], tf.int32)  # position 2 was masked but resampled as 3
  mask = tf.constant([[1, 1, 1, 1, 0]], tf.int32)
  np.testing.assert_array_equal(rtd.replaced_labels(original, corrupted, mask).numpy(),
                                [[0, 1, 0, 0, 0]])


def test_sampling_matches_softmax_distribution():
  logits = tf.constant([0.0, 1.0, 2.0, -1.0, 0.5, -3.0, 0.0, 1.5, -0.5, 0.2])
  n = 20000
  rows = tf.range(n)
  u = rtd.position_uniforms(3, tf.constant(7), rows, 1)  # [n, 1]
  samples = rtd.sample_from_logits(tf.broadcast_to(logits, [n, 1, 10]), u).numpy().ravel()
  freq = np.bincount(samples, minlength=10) / n
  expected = tf.nn.softmax(logits).numpy()
  assert np.abs(freq - expected).max() < 0.015
  # Temperature 0.5 sharpens towards the mode exactly as softmax(logits / 0.5).
  samples = rtd.sample_from_logits(tf.broadcast_to(logits, [n, 1, 10]), u, 0.5).numpy().ravel()
  freq = np.bincount(samples, minlength=10) / n
  assert np.abs(freq - tf.nn.softmax(logits / 0.5).numpy()).max() < 0.015


def test_disallow_correct_never_samples_the_original():
  logits = tf.constant([[[0.0, 8.0, 0.0, 0.0]]] * 500)  # id 1 would win almost always
  u = rtd.position_uniforms(0, tf.constant(1), tf.range(500), 1)
  disallow = tf.ones([500, 1], tf.int32)
  samples = rtd.sample_from_logits(logits, u, disallow_ids=disallow).numpy()
  assert (samples != 1).all()
  assert set(np.unique(samples)) == {0, 2, 3}


def test_uniforms_are_counter_based():
  all_rows = rtd.position_uniforms(5, tf.constant(11), tf.range(8), 4).numpy()
  second_half = rtd.position_uniforms(5, tf.constant(11), tf.range(4, 8), 4).numpy()
  np.testing.assert_array_equal(all_rows[4:], second_half)
  other_step = rtd.position_uniforms(5, tf.constant(12), tf.range(8), 4).numpy()
  assert not np.allclose(all_rows, other_step)
  assert 0.0 < all_rows.min() and all_rows.max() < 1.0
  many = rtd.position_uniforms(1, tf.constant(0), tf.range(5000), 19).numpy()
  assert abs(many.mean() - 0.5) < 0.01 and abs(many.var() - 1 / 12) < 0.005


def test_loss_terms_match_numpy():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(2, 3, 10)).astype(np.float32)
  targets = np.array([[1, 2, 3], [4, 5, 0]], np.int32)
  weights = np.array([[1, 1, 1], [1, 1, 0]], np.float32)
  num, den = rtd.mlm_loss_terms(tf.constant(logits), tf.constant(targets), tf.constant(weights))
  log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  ce = -np.take_along_axis(log_probs, targets[..., None], -1)[..., 0]
  np.testing.assert_allclose(num.numpy(), (ce * weights).sum(), rtol=1e-5)
  assert den.numpy() == 5.0

  disc_logits = rng.normal(size=(2, 4)).astype(np.float32)
  labels = np.array([[0, 1, 0, 1], [1, 0, 0, 0]], np.int32)
  mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0]], np.int32)
  num, den = rtd.rtd_loss_terms(tf.constant(disc_logits), tf.constant(labels), tf.constant(mask))
  p = 1 / (1 + np.exp(-disc_logits))
  bce = -(labels * np.log(p) + (1 - labels) * np.log(1 - p))
  np.testing.assert_allclose(num.numpy(), (bce * mask).sum(), rtol=1e-5)
  assert den.numpy() == 6.0


def test_two_level_search_matches_a_float64_inverse_cdf():
  # Several blocks, a vocab that is not a multiple of the block, and disallowed ids that
  # carry most of the mass, against the one-level inverse CDF in float64.
  rng = np.random.default_rng(0)
  B, P, V, K = 40, 5, 1003, 64
  logits = rng.normal(0.0, 3.0, size=(B, P, V)).astype(np.float32)
  disallow = rng.integers(0, V, size=(B, P)).astype(np.int32)
  logits[np.arange(B)[:, None], np.arange(P)[None], disallow] += 6.0
  u = rtd.position_uniforms(5, tf.constant(2), tf.range(B), P).numpy()
  for blocked in (None, disallow):
    got = rtd.sample_from_logits(tf.constant(logits), tf.constant(u), disallow_ids=blocked,
                                 block_size=K).numpy()
    probs = np.exp(logits.astype(np.float64) - logits.max(-1, keepdims=True))
    if blocked is not None:
      probs[np.arange(B)[:, None], np.arange(P)[None], blocked] = 0.0
    cdf = np.cumsum(probs, -1)
    want = np.minimum((cdf < u[..., None] * cdf[..., -1:]).sum(-1), V - 1)
    assert (got != want).sum() <= 1, (got != want).sum()  # float32 rounding at a boundary
    if blocked is not None:
      assert not (got == blocked).any()


@pytest.mark.parametrize("shape", [(5, 7), (2, 3, 11)])
def test_sparse_cross_entropy_matches_tf_values_and_gradients(shape):
  rng = np.random.default_rng(1)
  logits = tf.constant(rng.normal(scale=4.0, size=shape).astype(np.float32))
  labels = tf.constant(rng.integers(0, shape[-1], size=shape[:-1]).astype(np.int32))
  # Uneven upstream weights, so a gradient that ignored them would fail.
  weights = tf.constant(rng.uniform(0.1, 2.0, size=shape[:-1]).astype(np.float32))

  def loss_and_grad(fn):
    with tf.GradientTape() as tape:
      tape.watch(logits)
      ce = fn(logits, labels)
      loss = tf.reduce_sum(ce * weights)
    return ce, tape.gradient(loss, logits)

  ours, ours_grad = loss_and_grad(rtd.sparse_cross_entropy)
  ref, ref_grad = loss_and_grad(
      lambda x, y: tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=x))
  assert ours.shape == ref.shape == shape[:-1]
  np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ours_grad.numpy(), ref_grad.numpy(), rtol=1e-5, atol=1e-6)
  # Large logits: the max is subtracted before exp, so nothing overflows.
  big, _ = loss_and_grad(lambda x, y: rtd.sparse_cross_entropy(x * 100.0, y))
  assert np.isfinite(big.numpy()).all()
