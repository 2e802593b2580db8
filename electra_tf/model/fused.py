"""XLA-fused elementwise kernels for the training step when the step itself is not compiled.

On CPU (and GPU) without `--jit_compile`, TensorFlow runs GELU as about fifteen separate
elementwise ops over the feed-forward activations ([tokens, 4H], forward and backward),
each a full pass through memory, and its erfc kernel is slow. Here the forward and the
backward are each one XLA-compiled function: in the small bfloat16 pretraining step on
this 2-core CPU, GELU's forward and backward at [4096, 1024] take 3.6 ms instead of 12.9,
and the whole step about 5% less time (`python bench/step_ab.py --variants=ours,unfused_gelu`).

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

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@contextlib.contextmanager
def enabled(on: bool = True) -> Iterator[None]:
  """Within this block (at trace time), `gelu` callers use the fused kernels if `on`."""
  token = _ACTIVE.set(bool(on))
  try:
    yield
  finally:
    _ACTIVE.reset(token)


def active() -> bool:
  return _ACTIVE.get()


def available() -> bool:
  """False where TensorFlow has no XLA JIT (macOS on Apple silicon); then the plain ops run."""
  return not (platform.system() == "Darwin" and platform.machine() == "arm64")


# Arithmetic in float32 whatever the input dtype, rounded once to it on the way out. The
# erf form 0.5 * (1 + erf(x / sqrt 2)) is PyTorch's and tf.nn.gelu's float32 arithmetic
# to within 1e-6; XLA's erf is a fast polynomial (its erfc is about 25% slower).
@tf.function(jit_compile=True, autograph=False)
def _gelu_forward(x):
  z = tf.cast(x, tf.float32)
  return tf.cast(z * (0.5 + 0.5 * tf.math.erf(z * _SQRT_HALF)), x.dtype)


@tf.function(jit_compile=True, autograph=False)
def _gelu_backward(x, upstream):
  # d/dx x * Phi(x) = Phi(x) + x * phi(x); Phi recomputed from x costs less than a saved
  # float32 copy of it would in memory traffic.
  z = tf.cast(x, tf.float32)
  slope = (0.5 + 0.5 * tf.math.erf(z * _SQRT_HALF)
           + z * tf.exp(-0.5 * tf.square(z)) * _INV_SQRT_2PI)
  return tf.cast(tf.cast(upstream, tf.float32) * slope, upstream.dtype)


@tf.custom_gradient
def gelu(x: tf.Tensor):
  """Exact (erf) GELU of x, in x's dtype, forward and backward as one XLA kernel each."""
  def grad(upstream):
    return _gelu_backward(x, upstream)

  return _gelu_forward(x), grad
