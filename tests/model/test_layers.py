"""exact_gelu (plain and XLA-fused), LayerNorm, EinsumDense and attention equal
TensorFlow's and Keras' own: values and gradients."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from electra_tf.model import elementwise, fused, layers


def _value_and_grads(fn, x, params=()):
  # bfloat16-representable, so a bfloat16 gradient gets it unrounded.
  upstream = tf.cast(tf.cast(tf.random.stateless_normal(x.shape, seed=[5, 6]), tf.bfloat16),
                     tf.float32)
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = fn(x)
    loss = tf.reduce_sum(tf.cast(y, tf.float32) * upstream)
  return [y] + tape.gradient(loss, [x, *params])


def _gelu(use_fused):
  def gelu(x):
    with fused.enabled(use_fused):
      return layers.exact_gelu(x)
  return gelu


@pytest.mark.parametrize("use_fused", [False, True], ids=["ops", "fused"])
def test_exact_gelu_matches_tf_gelu_float32(use_fused):
  x = tf.random.stateless_normal([64, 96], seed=[1, 2]) * 3.0
  ours = _value_and_grads(_gelu(use_fused), x)
  ref = _value_and_grads(lambda t: tf.nn.gelu(t, approximate=False), x)
  for a, b in zip(ours, ref):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("use_fused", [False, True], ids=["ops", "fused"])
def test_exact_gelu_bfloat16_rounds_the_float32_result(use_fused):
  x32 = tf.random.stateless_normal([64, 96], seed=[3, 4]) * 3.0
  x = tf.cast(x32, tf.bfloat16)
  y, dx = _value_and_grads(_gelu(use_fused), x)
  assert y.dtype == tf.bfloat16 and dx.dtype == tf.bfloat16
  y_ref, dx_ref = _value_and_grads(lambda t: tf.nn.gelu(t, approximate=False),
                                   tf.cast(x, tf.float32))
  # Computed in float32 and rounded once: within one bfloat16 ulp (2**-8 relative).
  np.testing.assert_allclose(tf.cast(y, tf.float32), y_ref, rtol=2**-8, atol=1e-6)
  np.testing.assert_allclose(tf.cast(dx, tf.float32), dx_ref, rtol=2**-8, atol=1e-3)


@pytest.mark.parametrize("products", [False, True], ids=["reductions", "products"])
@pytest.mark.parametrize("shape", [(4, 16, 32), (8, 48)])
def test_layer_norm_matches_keras(shape, products):
  # products: as traced in the pretrainer's step off XLA (fused.enabled), where the
  # gradient's sums and row means are matrix-vector products.
  x = tf.random.stateless_normal(shape, seed=[7, 8]) * 2.0 + 0.5
  ours = layers.LayerNorm(epsilon=1e-12, dtype=tf.float32)
  ref = tf_keras.layers.LayerNormalization(epsilon=1e-12, dtype=tf.float32)
  ours.build(shape)
  ref.build(shape)
  for layer in (ours, ref):
    layer.gamma.assign(tf.random.stateless_normal([shape[-1]], seed=[9, 9]) + 1.0)
    layer.beta.assign(tf.random.stateless_normal([shape[-1]], seed=[9, 10]))
  with fused.enabled(products):
    a = _value_and_grads(ours, x, [ours.gamma, ours.beta])
  b = _value_and_grads(ref, x, [ref.gamma, ref.beta])
  for got, want in zip(a, b):
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-5, atol=2e-5)
  # Same variables and names as Keras', so checkpoints load either way.
  assert [v.name for v in ours.weights] == [v.name.replace(ref.name, ours.name)
                                            for v in ref.weights]


def test_attention_matches_keras_einsums_with_a_padding_mask():
  # Two heads and a padded second example: our batched matmuls on heads-major copies must
  # give Keras' einsum attention output and gradients, with the same variables.
  x = tf.random.stateless_normal([2, 5, 8], seed=[3, 4])
  input_mask = tf.constant([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], tf.int32)
  attention_mask = tf.cast(input_mask[:, tf.newaxis, :] * tf.ones([2, 5, 1], tf.int32), bool)
  ours = layers._SeededAttention(num_heads=2, key_dim=4, dropout=0.1)
  ref = tf_keras.layers.MultiHeadAttention(num_heads=2, key_dim=4, dropout=0.1)
  ours(x, x, attention_mask=attention_mask)
  ref(x, x, attention_mask=attention_mask)
  ref.set_weights(ours.get_weights())

  ours_probs, ref_probs = [m(x, x, attention_mask=attention_mask,
                             return_attention_scores=True)[1] for m in (ours, ref)]
  np.testing.assert_allclose(ours_probs.numpy(), ref_probs.numpy(), rtol=1e-5, atol=1e-6)
  # The padded keys get no attention.
  assert np.abs(ours_probs.numpy()[1, :, :, 3:]).max() < 1e-6
  got, want = [_value_and_grads(lambda t, m=m: m(t, t, attention_mask=attention_mask), x,
                                m.trainable_variables) for m in (ours, ref)]
  for a, b in zip(got, want):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("use_fused", [False, True], ids=["ops", "fused"])
def test_bfloat16_block_keeps_its_activation_in_bfloat16_bit_for_bit(use_fused):
  """Under mixed bfloat16 the block's GELU takes and returns bfloat16 (no casts of the
  [tokens, 4H] activations around it), with exactly the values and gradients of Model
  Garden's float32 activation layer."""
  tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    block = layers.transformer_block(32, 2, 128, 0.0, 0.0, 0.02, 1e-12, name="block")
    x = tf.random.stateless_normal([2, 8, 32], seed=[3, 4])
    block(x)
    assert block._intermediate_activation_layer.compute_dtype == "bfloat16"

    def run():
      @tf.function
      def step(x):
        with fused.enabled(use_fused):
          return _value_and_grads(lambda t: block(t, training=True), x,
                                  block.trainable_variables)
      return step, [t.numpy() for t in step(x)]

    ours_fn, ours = run()
    block._intermediate_activation_layer = tf_keras.layers.Activation(
        layers.exact_gelu, dtype=tf.float32)
    model_garden_fn, model_garden = run()
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")
  for a, b in zip(ours, model_garden, strict=True):
    np.testing.assert_array_equal(a, b)

  def casts(fn):
    graph = fn.get_concrete_function(x).graph
    return sum(op.type == "Cast" and op.outputs[0].shape.num_elements() == 2 * 8 * 128
               for op in graph.get_operations())
  # Fused, the casts happen inside the XLA kernels: four fewer graph ops of [tokens, 4H]
  # (two forward, two backward). As TensorFlow ops, _gelu_ops does the same casts itself.
  assert casts(ours_fn) == casts(model_garden_fn) - (4 if use_fused else 0)


@pytest.mark.parametrize("equation,bias_axes,out_shape", [
    ("abc,cd->abd", "d", (None, 12)),           # the block's intermediate and output
    ("abc,cde->abde", "de", (None, 3, 4)),      # attention's query, key and value
    ("abc,cd->abd", "b", (5, 12)),              # a bias not over the trailing axes
])
@pytest.mark.parametrize("products", [False, True], ids=["reductions", "products"])
def test_einsum_dense_matches_keras(equation, bias_axes, out_shape, products):
  """elementwise.EinsumDense (in the pretrainer's step off XLA, a bias gradient summed as
  a product with ones): the same values and gradients as Keras' layer, whose bias add is
  differentiated by a Sum."""
  x = tf.random.stateless_normal([2, 5, 8], seed=[1, 1])
  ours = layers.EinsumDense(equation, output_shape=out_shape, bias_axes=bias_axes)
  ref = tf_keras.layers.EinsumDense(equation, output_shape=out_shape, bias_axes=bias_axes)
  ours(x)
  ref(x)
  ours.bias.assign(tf.random.stateless_normal(ours.bias.shape, seed=[2, 2]))
  ref.set_weights(ours.get_weights())
  upstream = tf.random.stateless_normal([2, 5, 12], seed=[4, 4])

  def value_and_grads(layer):
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = layer(x)
      loss = tf.reduce_sum(tf.reshape(y, upstream.shape) * upstream)
    return [y] + tape.gradient(loss, [x, *layer.trainable_variables])

  with fused.enabled(products):
    got = value_and_grads(ours)
  for a, b in zip(got, value_and_grads(ref), strict=True):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)
  # Which way the bias gradient was summed: a MatMul (the einsum is an Einsum op) or not.
  with fused.enabled(products):
    graph = tf.function(lambda: value_and_grads(ours)).get_concrete_function().graph
  summed_by_product = any(op.type == "MatMul" for op in graph.get_operations())
  assert summed_by_product == (products and bias_axes != "b")
  assert [v.name for v in ours.weights] == [v.name.replace(ref.name, ours.name)
                                            for v in ref.weights]


def test_sum_rows_accumulates_bfloat16_in_float32():
  # 4,096 rows of bfloat16: a bfloat16 running sum would lose the small terms; the
  # product with ones rounds once, so it is within one bfloat16 ulp of the exact sum.
  x = tf.cast(tf.random.stateless_uniform([4096, 8], seed=[3, 3]) + 0.01, tf.bfloat16)
  exact = tf.reduce_sum(tf.cast(x, tf.float64), axis=0).numpy()
  got = tf.cast(elementwise.sum_rows(x), tf.float64).numpy()
  np.testing.assert_allclose(got, exact, rtol=2**-8)
  np.testing.assert_allclose(elementwise.sum_rows(tf.cast(x, tf.float32)).numpy(), exact,
                             rtol=1e-6)
