"""XLA-fused elementwise kernels for the training step when the step itself is not compiled.

On CPU (and GPU) without `--jit_compile`, TensorFlow runs each elementwise op as its own
pass through memory. Two parts of the step are many such passes and gain most from being
one XLA-compiled function each (what each is worth: docs/benchmarks.md, measured with
`python bench/speed/step_ab.py`; the design: docs/design.md, "Performance"):

- GELU: about fifteen ops over the feed-forward activations ([tokens, 4H]) forward and
  backward, with a slow erfc kernel.
- Dropout: Philox random bits, a compare, a cast and two multiplies. Fused, the keep mask
  comes from a counter-based hash computed inside the kernel, forward and again in the
  backward (no mask is stored).

The kernels are used only inside `enabled(True)`, which the pretrainer enters while it
traces a training forward pass (see `ElectraPretrainer.forward`). Everything else (eval,
fine-tuning, SavedModel export, and so TF Serving, which need not have XLA) traces the
plain TensorFlow ops. When the step is compiled as a whole (`--jit_compile`, TPUs) XLA
fuses those ops itself, and the pretrainer leaves this off.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import platform
from collections.abc import Iterator

import tensorflow as tf

_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("electra_fused_kernels", default=False)

# Shared with elementwise._gelu_ops, the unfused GELU.
SQRT_HALF = 1.0 / math.sqrt(2.0)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@contextlib.contextmanager
def enabled(on: bool = True) -> Iterator[None]:
  """Within this block (at trace time), exact_gelu and seeded dropout use these kernels if `on`."""
  token = _ACTIVE.set(bool(on))
  try:
    yield
  finally:
    _ACTIVE.reset(token)


def active() -> bool:
  return _ACTIVE.get()


_PORTABLE: contextvars.ContextVar = contextvars.ContextVar("electra_portable_gelu",
                                                           default=False)


@contextlib.contextmanager
def portable_gelu() -> Iterator[None]:
  """Within this block (at trace time), exact_gelu is `erf_gelu`, not the Erfc ops.

  The same function (within 1e-6) in a form that other runtimes' converters lower (tf2onnx
  to ONNX's Erf, TFLite's to its builtins): neither ONNX nor TFLite has the Erfc op of
  layers._gelu_ops and tf.nn.gelu. For exports, which never take its gradient.
  """
  token = _PORTABLE.set(True)
  try:
    yield
  finally:
    _PORTABLE.reset(token)


def portable() -> bool:
  return _PORTABLE.get()


_SERVING: contextvars.ContextVar = contextvars.ContextVar("electra_serving_graph", default=None)


@contextlib.contextmanager
def serving_graph(kernels: dict | None = None) -> Iterator[None]:
  """Within this block (at trace time) the transformer blocks trace their inference form.

  The same function as the Keras call in inference (outputs equal within float32 rounding),
  in the ops that serve fastest on CPU: every projection a 2-D MatMul + BiasAdd over the
  batch's rows (which oneDNN fuses, GELU included) instead of Einsum, LayerNorm and GELU
  (its erf form) as plain ops. For SavedModel signatures, which never take a gradient.

  Args:
    kernels: {kernel variable's ref(): a [in, out] copy to multiply by instead}, such as
      the bfloat16 copies of a `--serving_dtype=bfloat16` export; others are read as they are.
  """
  token = _SERVING.set(dict(kernels or {}))
  try:
    yield
  finally:
    _SERVING.reset(token)


def serving() -> dict | None:
  """The kernel copies of the enclosing serving_graph block ({} if none), or None outside one."""
  return _SERVING.get()


def erf_gelu(x: tf.Tensor) -> tf.Tensor:
  """0.5 * x * (1 + erf(x / sqrt 2)) in float32, returned in x's dtype (no written gradient)."""
  z = tf.cast(x, tf.float32)
  return tf.cast(0.5 * z * (1.0 + tf.math.erf(z * SQRT_HALF)), x.dtype)


def available() -> bool:
  """False where TensorFlow has no XLA JIT (macOS on Apple silicon); then the plain ops run."""
  return not (platform.system() == "Darwin" and platform.machine() == "arm64")


# Arithmetic in float32 whatever the input dtype, rounded once to it on the way out. The
# erf form 0.5 * (1 + erf(x / sqrt 2)) is PyTorch's and tf.nn.gelu's float32 arithmetic
# to within 1e-6; XLA's erf is a fast polynomial (its erfc is slower).
@tf.function(jit_compile=True, autograph=False)
def _gelu_forward(x):
  z = tf.cast(x, tf.float32)
  return tf.cast(z * (0.5 + 0.5 * tf.math.erf(z * SQRT_HALF)), x.dtype)


@tf.function(jit_compile=True, autograph=False)
def _gelu_backward(x, upstream):
  # d/dx x * Phi(x) = Phi(x) + x * phi(x); Phi recomputed from x costs less than a saved
  # float32 copy of it would in memory traffic.
  z = tf.cast(x, tf.float32)
  slope = (0.5 + 0.5 * tf.math.erf(z * SQRT_HALF)
           + z * tf.exp(-0.5 * tf.square(z)) * INV_SQRT_2PI)
  return tf.cast(tf.cast(upstream, tf.float32) * slope, upstream.dtype)


@tf.custom_gradient
def gelu(x: tf.Tensor):
  """Exact (erf) GELU of x, in x's dtype, forward and backward as one XLA kernel each."""
  def grad(upstream):
    return _gelu_backward(x, upstream)

  return _gelu_forward(x), grad


# Dropout masks from SplitMix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number
# generators", OOPSLA 2014): element i of a site keyed k keeps its value when the top 32
# bits of mix64(k + (i + 1) * GOLDEN) are at or above round(rate * 2**32). That is exactly
# SplitMix64's output stream started at state k, a generator that passes BigCrush, so the
# elements of one site are as independent as its draws. Sites (seed, step, layer, replica)
# get keys hashed from SeededDropout's two seed words: windows of a few million draws at
# random places in a 2**64 cycle, whose overlap is vanishingly unlikely. These masks differ
# from the Philox masks of the unfused path; either is a pure function of its seed.
_GOLDEN = 0x9E3779B97F4A7C15


def _mix64(z: tf.Tensor) -> tf.Tensor:
  """SplitMix64's output function on uint64 (a bijection with full avalanche)."""
  def shift(v, n):
    return tf.bitwise.right_shift(v, tf.constant(n, tf.uint64))

  z = tf.bitwise.bitwise_xor(z, shift(z, 30)) * tf.constant(0xBF58476D1CE4E5B9, tf.uint64)
  z = tf.bitwise.bitwise_xor(z, shift(z, 27)) * tf.constant(0x94D049BB133111EB, tf.uint64)
  return tf.bitwise.bitwise_xor(z, shift(z, 31))


def drop_threshold(rate: float) -> int:
  """Elements whose 32 drawn bits fall below this are dropped: rate rounded to 2**-32."""
  return round(rate * 2**32)


def drop_probability_32bit(rate: float) -> float:
  """The drop probability the fused dropout realises for `rate`: rate rounded to 2**-32.

  Not `dropout.drop_probability_16bit`, the unfused path's (rate rounded to 2**-16).
  """
  return drop_threshold(rate) / 2**32


def dropout_bits(shape: tf.Tensor, seed: tf.Tensor,
                 first_element: tf.Tensor | None = None) -> tf.Tensor:
  """uint64 draws of `shape` for the site seeded by int64 [2] `seed`.

  `shape` may be a tensor: a batch dimension unknown when traced (a last partial batch,
  a distributed dataset) is known to XLA when it compiles for the real shape.
  `first_element` (int64 scalar): the draws are elements first_element.. of the site's
  stream instead of 0.. (a micro-batch of a larger batch).
  """
  words = tf.cast(seed, tf.uint64)
  key = _mix64(tf.bitwise.bitwise_xor(_mix64(words[0]), words[1]))
  size = tf.reduce_prod(tf.cast(shape, tf.int64))
  counter = tf.cast(tf.range(1, size + 1, dtype=tf.int64), tf.uint64)
  if first_element is not None:
    counter += tf.cast(first_element, tf.uint64)
  return tf.reshape(_mix64(key + counter * tf.constant(_GOLDEN, tf.uint64)), shape)


@tf.function(jit_compile=True, autograph=False)
def _dropout_kernel(x, seed, first_element, threshold: int, scale: float):
  bits = dropout_bits(tf.shape(x), seed, first_element)
  keep = tf.bitwise.right_shift(bits, tf.constant(32, tf.uint64)) >= tf.constant(
      threshold, tf.uint64)
  # Scaled in float32 and rounded once (a bfloat16 scale of 1/0.9 would be 0.16% low).
  scaled = tf.cast(tf.cast(x, tf.float32) * scale, x.dtype)
  return tf.where(keep, scaled, tf.zeros_like(scaled))


def dropout(x: tf.Tensor, rate: float, seed: tf.Tensor,
            first_element: tf.Tensor | None = None) -> tf.Tensor:
  """Inverted dropout of x at `rate` with the mask of int64 [2] `seed`, one XLA kernel each way.

  The gradient applies the same mask to the upstream gradient, recomputed from the seed.
  `first_element`: see `dropout_bits` (x is then a slice of the leading axis of a larger
  tensor whose mask it takes).
  """
  threshold = drop_threshold(rate)
  scale = 1.0 / (1.0 - drop_probability_32bit(rate))

  @tf.custom_gradient
  def apply(x):
    def grad(upstream):
      return _dropout_kernel(upstream, seed, first_element, threshold, scale)

    return _dropout_kernel(x, seed, first_element, threshold, scale), grad

  return apply(x)
