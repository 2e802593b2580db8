"""bench/fidelity/authors_lib.py's stand-in for tf.contrib.layers.layer_norm (gone from
TensorFlow 2): the authors' graph must find its LayerNorm tensors under contrib's names
and normalise as TF 1.15 did. Needs no checkout of their code."""

import os
import sys

import numpy as np
from testing_utils import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench", "fidelity"))


def test_layer_norm_shim_keeps_contribs_names_and_arithmetic(tmp_path, monkeypatch):
  monkeypatch.setenv("TF_USE_LEGACY_KERAS", "1")  # undone after the test
  import authors_lib
  import tensorflow as tf

  authors_lib.install_shims(str(tmp_path))
  from tensorflow.contrib import layers  # the shim, as their modeling.py imports it

  tf1 = tf.compat.v1
  x = (np.random.default_rng(0).normal(size=(2, 3, 8)) * 3 + 1).astype(np.float32)
  with tf.Graph().as_default():
    with tf1.variable_scope("electra/embeddings"):
      y = layers.layer_norm(inputs=tf.constant(x), begin_norm_axis=-1, begin_params_axis=-1,
                            scope=None)
    with tf1.variable_scope("electra/embeddings", reuse=tf1.AUTO_REUSE):
      layers.layer_norm(inputs=tf.constant(x), begin_norm_axis=-1, begin_params_axis=-1)
    names = sorted(v.op.name for v in tf1.global_variables())
    gamma = [v for v in tf1.global_variables() if v.op.name.endswith("gamma")][0]
    with tf1.Session() as session:
      session.run(tf1.global_variables_initializer())
      session.run(gamma.assign(np.full(8, 2.0, np.float32)))
      out = session.run(y)
  # Entered again under AUTO_REUSE (their generator, then discriminator): the same tensors.
  assert names == ["electra/embeddings/LayerNorm/beta", "electra/embeddings/LayerNorm/gamma"]
  mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
  np.testing.assert_allclose(out, 2.0 * (x - mean) / np.sqrt(var + 1e-12), rtol=1e-5,
                             atol=1e-5)
