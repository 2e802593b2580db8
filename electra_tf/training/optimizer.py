"""Optimisers and schedules: the authors' AdamW, Model Garden's LAMB, warmup + linear decay."""

from __future__ import annotations

import re
from collections.abc import Sequence

import tensorflow as tf
import tf_keras
from official.modeling.optimization import lamb

# LayerNorm parameters and biases get no weight decay (and no LAMB trust ratio).
NO_DECAY_PATTERNS = ("layer_norm", "LayerNorm", "bias")


class WarmupLinearDecay(tf_keras.optimizers.schedules.LearningRateSchedule):
  """peak * (1 - step / total) * min(1, step / warmup): the authors' schedule.

  The decay runs from step 0 and is multiplied by the warmup ramp, as in the
  original ELECTRA code (not warmup-then-decay-from-peak).
  """

  def __init__(self, peak_learning_rate: float, total_steps: int, warmup_steps: int,
               end_learning_rate: float = 0.0):
    self.peak_learning_rate = peak_learning_rate
    self.total_steps = total_steps
    self.warmup_steps = warmup_steps
    self.end_learning_rate = end_learning_rate

  def __call__(self, step):
    step = tf.cast(step, tf.float32)
    progress = tf.minimum(step / float(max(1, self.total_steps)), 1.0)
    lr = (self.peak_learning_rate - self.end_learning_rate) * (1.0 - progress)
    lr += self.end_learning_rate
    if self.warmup_steps > 0:
      lr *= tf.minimum(1.0, step / float(self.warmup_steps))
    return lr

  def get_config(self):
    return {"peak_learning_rate": self.peak_learning_rate, "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps, "end_learning_rate": self.end_learning_rate}


def _matches(name: str, patterns: Sequence[str] | None) -> bool:
  return any(re.search(p, name) for p in patterns or ())


class AdamWeightDecay(tf_keras.optimizers.legacy.Optimizer):
  """Adam with decoupled weight decay, as in BERT/ELECTRA (no bias correction by default).

  Args:
    learning_rate: float or schedule.
    weight_decay_rate: decoupled decay added to the update (times the learning rate).
    beta_1, beta_2, epsilon: Adam constants.
    bias_correction: apply Adam's bias correction (the authors' code does not).
    exclude_from_weight_decay: regexes of variable names that get no decay.
    lr_multipliers: ordered (regex, factor) pairs; the first match scales a variable's
      learning rate (layer-wise decay in fine-tuning).
  """

  def __init__(self, learning_rate=1e-3, weight_decay_rate: float = 0.01, beta_1: float = 0.9,
               beta_2: float = 0.999, epsilon: float = 1e-6, bias_correction: bool = False,
               exclude_from_weight_decay: Sequence[str] | None = NO_DECAY_PATTERNS,
               lr_multipliers: Sequence[tuple[str, float]] | None = None,
               name: str = "AdamWeightDecay", **kwargs):
    super().__init__(name, **kwargs)
    self._set_hyper("learning_rate", kwargs.get("lr", learning_rate))
    self._set_hyper("beta_1", beta_1)
    self._set_hyper("beta_2", beta_2)
    self.epsilon = epsilon
    self.weight_decay_rate = weight_decay_rate
    self.bias_correction = bias_correction
    self.exclude_from_weight_decay = list(exclude_from_weight_decay or ())
    self.lr_multipliers = [(p, float(f)) for p, f in (lr_multipliers or ())]

  def _create_slots(self, var_list):
    for var in var_list:
      self.add_slot(var, "m")
    for var in var_list:
      self.add_slot(var, "v")

  def _lr_factor(self, name: str) -> float:
    for pattern, factor in self.lr_multipliers:
      if re.search(pattern, name):
        return factor
    return 1.0

  # One ResourceApplyAdam op per variable (TensorFlow's fused Adam kernel, after the
  # decay) instead of a dozen elementwise ops: the same update, up to rounding.
  # `_written_out_update` is the update as ops, kept as the reference the tests and
  # bench/speed/step_ab.py compare with.
  fused_update = True

  def _prepare_local(self, var_device, var_dtype, apply_state):
    """The step's scalars, once per (device, dtype) rather than once per variable: the
    schedule's learning rate, the betas, the fused kernel's powers and epsilon."""
    super()._prepare_local(var_device, var_dtype, apply_state)
    coefficients = apply_state[(var_device, var_dtype)]
    beta_1 = tf.identity(self._get_hyper("beta_1", var_dtype))
    beta_2 = tf.identity(self._get_hyper("beta_2", var_dtype))
    epsilon = tf.constant(self.epsilon, var_dtype)
    t = tf.cast(self.iterations + 1, var_dtype)
    if self.bias_correction:
      # The kernel's step is lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps'), which
      # is lr * m_hat / (sqrt(v_hat) + eps) for eps' = eps * sqrt(1 - b2^t).
      beta_1_power, beta_2_power = tf.pow(beta_1, t), tf.pow(beta_2, t)
      fused_epsilon = epsilon * tf.sqrt(1.0 - beta_2_power)
    else:  # powers of 0: the kernel's step is lr * m / (sqrt(v) + eps)
      beta_1_power = beta_2_power = tf.zeros([], var_dtype)
      fused_epsilon = epsilon
    coefficients.update(beta_1=beta_1, beta_2=beta_2, t=t, beta_1_power=beta_1_power,
                        beta_2_power=beta_2_power, fused_epsilon=fused_epsilon)

  def _resource_apply_dense(self, grad, var, apply_state=None):
    key = (var.device, var.dtype.base_dtype)
    c = (apply_state or {}).get(key) or self._fallback_apply_state(*key)
    factor = self._lr_factor(var.name)
    lr = c["lr_t"] * factor if factor != 1.0 else c["lr_t"]
    decays = bool(self.weight_decay_rate) and not _matches(var.name,
                                                           self.exclude_from_weight_decay)
    m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
    if not self.fused_update:
      return self._written_out_update(grad, var, m, v, lr, c, decays)
    deps = []
    if decays:
      # var - lr * (adam + wd * var) = (var - lr * wd * var) - lr * adam: the decay first.
      deps.append(tf.raw_ops.ResourceApplyGradientDescent(
          var=var.handle, alpha=lr * self.weight_decay_rate, delta=tf.identity(var),
          use_locking=self._use_locking))
    with tf.control_dependencies(deps):
      return tf.raw_ops.ResourceApplyAdam(
          var=var.handle, m=m.handle, v=v.handle, beta1_power=c["beta_1_power"],
          beta2_power=c["beta_2_power"], lr=lr, beta1=c["beta_1"], beta2=c["beta_2"],
          epsilon=c["fused_epsilon"], grad=grad, use_locking=self._use_locking)

  def _written_out_update(self, grad, var, m, v, lr, c, decays: bool):
    beta_1, beta_2 = c["beta_1"], c["beta_2"]
    m_t = m.assign(beta_1 * m + (1.0 - beta_1) * grad, use_locking=self._use_locking)
    v_t = v.assign(beta_2 * v + (1.0 - beta_2) * tf.square(grad), use_locking=self._use_locking)
    if self.bias_correction:
      m_t = m_t / (1.0 - tf.pow(beta_1, c["t"]))
      v_t = v_t / (1.0 - tf.pow(beta_2, c["t"]))
    update = m_t / (tf.sqrt(v_t) + self.epsilon)
    if decays:
      update += self.weight_decay_rate * var
    return var.assign_sub(lr * update, use_locking=self._use_locking)

  def _resource_apply_sparse(self, grad, var, indices, apply_state=None):
    # Weight decay touches every row anyway, so a dense update costs nothing extra.
    dense = tf.math.unsorted_segment_sum(grad, indices, tf.shape(var)[0])
    return self._resource_apply_dense(dense, var, apply_state)

  def get_config(self):
    config = super().get_config()
    config.update(learning_rate=self._serialize_hyperparameter("learning_rate"),
                  beta_1=self._serialize_hyperparameter("beta_1"),
                  beta_2=self._serialize_hyperparameter("beta_2"), epsilon=self.epsilon,
                  weight_decay_rate=self.weight_decay_rate,
                  bias_correction=self.bias_correction,
                  exclude_from_weight_decay=self.exclude_from_weight_decay,
                  lr_multipliers=self.lr_multipliers)
    return config


def create_optimizer(name: str, learning_rate, *, weight_decay: float = 0.01,
                     beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-6,
                     bias_correction: bool = False, precision: str = "float32",
                     lr_multipliers: Sequence[tuple[str, float]] | None = None):
  """AdamW ("adamw") or LAMB ("lamb"), wrapped for dynamic loss scaling under float16."""
  if name == "adamw":
    optimizer = AdamWeightDecay(
        learning_rate, weight_decay_rate=weight_decay, beta_1=beta_1, beta_2=beta_2,
        epsilon=epsilon, bias_correction=bias_correction, lr_multipliers=lr_multipliers)
  elif name == "lamb":
    if lr_multipliers:
      raise ValueError("layer-wise learning-rate multipliers are supported with adamw only")
    optimizer = lamb.LAMB(
        learning_rate, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon,
        weight_decay_rate=weight_decay, exclude_from_weight_decay=list(NO_DECAY_PATTERNS))
  else:
    raise ValueError(f"unknown optimizer {name!r}; choose adamw or lamb")
  if precision == "mixed_float16":
    optimizer = tf_keras.mixed_precision.LossScaleOptimizer(optimizer)
  return optimizer
