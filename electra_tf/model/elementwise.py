"""Elementwise pieces with their gradients written out: exact GELU, LayerNorm, bias adds."""

from __future__ import annotations

import tensorflow as tf
import tf_keras

from electra_tf.model import fused


@tf_keras.saving.register_keras_serializable(package="electra_tf")
def exact_gelu(x: tf.Tensor) -> tf.Tensor:
  """GELU with the erf form, as in BERT and ELECTRA (not the tanh approximation).

  Computed in float32 whatever x's dtype (Model Garden keeps the activation in float32
  under mixed bfloat16), returned in x's dtype. In a pretraining step's forward pass (see
  `fused.enabled`) the forward and backward are one XLA kernel each; elsewhere they are
  TensorFlow ops with the gradient written out (`_gelu_ops`).
  """
  if fused.portable() or fused.serving() is not None:
    return fused.erf_gelu(x)
  if fused.active():
    return fused.gelu(x)
  return _gelu_ops(x)


@tf.custom_gradient
def _gelu_ops(x: tf.Tensor):
  """exact_gelu as TensorFlow ops, its gradient Phi(x) + x * phi(x) from the saved Phi(x).

  Fewer elementwise passes over the FFN's [tokens, 4H] activations than differentiating
  tf.nn.gelu op by op (docs/design.md, "Performance").
  """
  z = tf.cast(x, tf.float32)
  cdf = 0.5 * tf.math.erfc(z * -fused.SQRT_HALF)

  def grad(upstream):
    pdf = tf.exp(-0.5 * tf.square(z)) * fused.INV_SQRT_2PI
    return tf.cast(tf.cast(upstream, tf.float32) * (cdf + z * pdf), upstream.dtype)

  return tf.cast(z * cdf, x.dtype), grad


def sum_rows(x: tf.Tensor) -> tf.Tensor:
  """x [rows, n] summed over its rows, [n], as a product with a row of ones.

  The gradients of biases and LayerNorm parameters are such sums over every token. On CPU
  oneDNN's matrix-vector product does them several times faster than TensorFlow's Sum
  kernel, in float32 and bfloat16 (`bench/speed/step_ab.py --variants=ours,reduction_kernels`
  times the step both ways; docs/benchmarks.md). It accumulates in float32 in either dtype.
  """
  ones = tf.ones([1, tf.shape(x)[0]], x.dtype)
  return tf.reshape(tf.matmul(ones, x), [-1])


def _products() -> bool:
  """Whether the gradients traced now sum rows by matrix-vector products: in the
  pretrainer's training forward pass off XLA (where `fused` kernels are on). Under XLA a
  product with ones is a dot, which XLA's CPU backend runs far slower than its reductions;
  elsewhere (fine-tuning, evaluation) TensorFlow's reductions are kept."""
  return fused.active()


def _sum_leading(x: tf.Tensor, trailing: tf.TensorShape, products: bool) -> tf.Tensor:
  """x summed over every axis before its last len(trailing), shaped `trailing`."""
  rows = tf.reshape(x, [-1, trailing.num_elements()])
  return tf.reshape(sum_rows(rows) if products else tf.reduce_sum(rows, axis=0), trailing)


def _row_mean(x: tf.Tensor, gamma: tf.Tensor, products: bool) -> tf.Tensor:
  """The mean of x * gamma along x's last axis, [..., 1]: a matrix-vector product with
  gamma / n if `products`."""
  if not products:
    return tf.reduce_mean(x * gamma, axis=-1, keepdims=True)
  column = tf.reshape(gamma, [-1, 1]) / tf.cast(tf.shape(gamma)[0], gamma.dtype)
  rows = tf.matmul(tf.reshape(x, [-1, tf.shape(x)[-1]]), column)
  return tf.reshape(rows, tf.concat([tf.shape(x)[:-1], [1]], 0))


def add_bias(x: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
  """x + bias, where bias [...] has the shape of x's trailing axes; in the pretrainer's
  step off XLA its gradient is summed by `sum_rows`."""
  if not _products():
    return x + bias
  return _add_bias(x, bias)


@tf.custom_gradient
def _add_bias(x: tf.Tensor, bias: tf.Tensor):
  def grad(upstream):
    return upstream, _sum_leading(upstream, bias.shape, products=True)

  return x + bias, grad


def _layer_norm(x: tf.Tensor, gamma: tf.Tensor, beta: tf.Tensor, epsilon: float) -> tf.Tensor:
  """LayerNorm over the last axis with its gradient written out (float32 x, gamma, beta)."""

  @tf.custom_gradient
  def norm(x, gamma, beta):
    mean = tf.reduce_mean(x, axis=-1, keepdims=True)
    centred = x - mean
    rstd = tf.math.rsqrt(tf.reduce_mean(tf.square(centred), axis=-1, keepdims=True) + epsilon)
    normed = centred * rstd
    products = _products()  # decided where the forward pass is traced

    def grad(upstream):
      scaled = upstream * normed
      d_gamma = _sum_leading(scaled, gamma.shape, products)
      d_beta = _sum_leading(upstream, beta.shape, products)
      # d_x = rstd * (g - mean(g) - normed * mean(g * normed)) for g = upstream * gamma; as
      # products, the two row means need no [..., H] multiply of their own.
      d_x = rstd * (upstream * gamma - _row_mean(upstream, gamma, products)
                    - normed * _row_mean(scaled, gamma, products))
      return d_x, d_gamma, d_beta

    return normed * gamma + beta, grad

  return norm(x, gamma, beta)


def layer_norm_rows(x: tf.Tensor, layer: tf_keras.layers.LayerNormalization) -> tf.Tensor:
  """`layer` (normalising the last axis) applied to float32 rows x [rows, H], forward only."""
  mean = tf.reduce_mean(x, axis=-1, keepdims=True)
  centred = x - mean
  rstd = tf.math.rsqrt(tf.reduce_mean(tf.square(centred), axis=-1, keepdims=True)
                       + layer.epsilon)
  return centred * rstd * layer.gamma + layer.beta


class LayerNorm(tf_keras.layers.LayerNormalization):
  """Keras LayerNormalization (same variables and config) with a written-out gradient.

  Differentiating Keras' moments + batch_normalization op by op takes more elementwise
  passes than the closed form d_x = rstd * (g - mean(g) - x_hat * mean(g * x_hat)) with
  g = upstream * gamma (docs/design.md, "Performance"). Only the
  last-axis, centred and scaled float32 case is taken over; anything else is Keras' own.
  """

  def call(self, inputs):
    if not (self.axis == [len(inputs.shape) - 1] and self.center and self.scale
            and self.compute_dtype == "float32"):
      return super().call(inputs)
    # Values, not variables, go into the custom gradient (it then needs no `variables`
    # argument); the reads carry the gradient on to the variables.
    return _layer_norm(tf.cast(inputs, tf.float32), tf.convert_to_tensor(self.gamma),
                       tf.convert_to_tensor(self.beta), self.epsilon)


class EinsumDense(tf_keras.layers.EinsumDense):
  """Keras EinsumDense (same variables and config) whose bias is added by `add_bias`.

  A bias over the output's trailing axes (every projection of the blocks) gets its
  gradient as a product with a row of ones instead of TensorFlow's Sum; any other bias
  layout is Keras' own call.
  """

  def call(self, inputs):
    if self.bias is None or self.activation not in (None, tf_keras.activations.linear):
      return super().call(inputs)
    out = tf.einsum(self.equation, inputs, self.kernel)
    bias = tf.convert_to_tensor(self.bias)
    if out.shape.rank is None or out.shape[out.shape.rank - bias.shape.rank:] != bias.shape:
      return out + bias
    return add_bias(out, bias)
