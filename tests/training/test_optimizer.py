"""The authors' schedule and AdamW (no bias correction, decay exclusions) against NumPy."""

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.training.optimizer import AdamWeightDecay, WarmupLinearDecay, create_optimizer


def test_schedule_is_decay_times_warmup():
  schedule = WarmupLinearDecay(1e-3, total_steps=100, warmup_steps=10)
  for step in (0, 5, 10, 50, 100, 150):
    expected = 1e-3 * max(0.0, 1 - step / 100) * min(1.0, step / 10)
    np.testing.assert_allclose(float(schedule(step)), expected, rtol=1e-6, atol=1e-12)


def _numpy_adamw(w, grads, lr, wd, decay, b1=0.9, b2=0.999, eps=1e-6, bias_correction=False):
  m = np.zeros_like(w)
  v = np.zeros_like(w)
  for t, g in enumerate(grads, start=1):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    if bias_correction:
      update = (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
    else:
      update = m / (np.sqrt(v) + eps)
    if decay:
      update = update + wd * w
    w = w - lr * update
  return w


def test_adamw_matches_numpy_with_exclusions_and_multipliers():
  # rtol 1e-4: TF forms 1 - beta in float32; decay alone moves the weights by ~3e-3.
  rng = np.random.default_rng(0)
  kernel0 = rng.normal(size=(3, 2)).astype(np.float32)
  bias0 = rng.normal(size=(2,)).astype(np.float32)
  top0 = rng.normal(size=(2,)).astype(np.float32)
  kernel = tf.Variable(kernel0, name="dense/kernel")
  bias = tf.Variable(bias0, name="dense/bias")
  top = tf.Variable(top0, name="layer_9/kernel")
  opt = AdamWeightDecay(0.1, weight_decay_rate=0.01, lr_multipliers=[("layer_9", 0.5)])
  grads = [[rng.normal(size=v.shape).astype(np.float32) for v in (kernel, bias, top)]
           for _ in range(3)]
  for g in grads:
    opt.apply_gradients(zip([tf.constant(x) for x in g], [kernel, bias, top]))
  np.testing.assert_allclose(kernel.numpy(), _numpy_adamw(kernel0, [g[0] for g in grads],
                                                          0.1, 0.01, True), rtol=1e-4)
  np.testing.assert_allclose(bias.numpy(), _numpy_adamw(bias0, [g[1] for g in grads],
                                                        0.1, 0.01, False), rtol=1e-4)
  np.testing.assert_allclose(top.numpy(), _numpy_adamw(top0, [g[2] for g in grads],
                                                       0.05, 0.01, True), rtol=1e-4)


@pytest.mark.parametrize("bias_correction", [False, True])
def test_fused_update_matches_the_written_out_update_and_numpy(bias_correction):
  # The default update is TensorFlow's fused Adam kernel after the decay; the reference is
  # the update written out as ops. 40 steps in one compiled function, eps large enough
  # (1e-3) that the bias-corrected epsilon's rescaling matters.
  rng = np.random.default_rng(1)
  start = rng.normal(size=(4, 3)).astype(np.float32)
  grads = rng.normal(size=(40, 4, 3)).astype(np.float32)
  results = []
  for fused in (True, False):
    var = tf.Variable(start, name="dense/kernel")
    opt = AdamWeightDecay(0.01, weight_decay_rate=0.1, epsilon=1e-3,
                          bias_correction=bias_correction)
    opt.fused_update = fused

    @tf.function
    def run(var=var, opt=opt):
      for i in tf.range(len(grads)):
        opt.apply_gradients([(tf.gather(tf.constant(grads), i), var)])

    run()
    results.append(var.numpy())
  expected = _numpy_adamw(start, list(grads), 0.01, 0.1, True, eps=1e-3,
                          bias_correction=bias_correction)
  np.testing.assert_allclose(results[0], results[1], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(results[0], expected, rtol=1e-4, atol=1e-6)
  assert np.abs(results[0] - start).max() > 0.1  # the steps moved the weights


def test_sparse_gradients_update_like_dense():
  table = tf.Variable(np.ones((5, 2), np.float32), name="word_embeddings")
  dense_table = tf.Variable(np.ones((5, 2), np.float32), name="word_embeddings_dense")
  sparse = tf.IndexedSlices(tf.constant([[1.0, 2.0], [3.0, 4.0]]), tf.constant([1, 3]),
                            dense_shape=tf.constant([5, 2]))
  AdamWeightDecay(0.1).apply_gradients([(sparse, table)])
  AdamWeightDecay(0.1).apply_gradients([(tf.convert_to_tensor(sparse), dense_table)])
  np.testing.assert_allclose(table.numpy(), dense_table.numpy(), rtol=1e-6)


def test_lamb_is_selectable_and_excludes_layer_norm_from_decay():
  opt = create_optimizer("lamb", 1e-3)
  assert type(opt).__name__ == "LAMB"
  assert any("layer_norm" in p for p in opt.exclude_from_weight_decay)
