"""The pretraining metrics of every objective, updated from one forward pass's outputs."""

from __future__ import annotations

import tensorflow as tf
import tf_keras

from electra_tf import features as F


class PretrainMetrics(tf_keras.layers.Layer):
  """Running metrics of ElectraPretrainer; Keras collects them through the model.

  Which metrics exist depends on the objective: the generator's (every objective), the
  replaced-token detector's ("electra", "electra_15", over the positions its loss covers),
  and the second network's masked-LM accuracy ("replace_mlm", "all_tokens_mlm").

  Args:
    objective: the run's PretrainConfig.objective.
  """

  def __init__(self, objective: str, **kwargs):
    kwargs.setdefault("name", "pretrain_metrics")
    super().__init__(**kwargs)
    self.objective = objective
    mean = tf_keras.metrics.Mean
    self.loss = mean("loss")
    self.gen_loss = mean("gen_loss")
    self.gen_accuracy = mean("gen_accuracy")
    self.grad_norm = mean("grad_norm")
    # Steps whose update was dropped for a non-finite loss or gradient.
    self.nonfinite_steps = tf_keras.metrics.Sum(name="nonfinite_steps")
    if objective == "mlm":
      return
    self.sampled_accuracy = mean("sampled_accuracy")
    if objective in ("electra", "electra_15"):
      self.disc_loss = mean("disc_loss")
      self.disc_accuracy = mean("disc_accuracy")
      self.disc_precision = tf_keras.metrics.Precision(name="disc_precision")
      self.disc_recall = tf_keras.metrics.Recall(name="disc_recall")
      self.disc_auc = tf_keras.metrics.AUC(num_thresholds=200, name="disc_auc")
      self.replaced_fraction = mean("replaced_fraction")
    else:
      self.mlm_loss = mean("mlm_loss")
      self.mlm_accuracy = mean("mlm_accuracy")

  def update(self, outputs: dict[str, tf.Tensor] | None, features: dict[str, tf.Tensor],
             losses: dict[str, tf.Tensor], grad_norm: tf.Tensor | None = None) -> None:
    """Adds one batch; `losses` are global (summed over replicas). With `outputs` None only
    the losses and the norm are added (gradient accumulation adds each micro-batch's
    predictions with `update_predictions` as it goes)."""
    self.loss.update_state(losses["loss"])
    self.gen_loss.update_state(losses["gen_loss"])
    if grad_norm is not None:
      self.grad_norm.update_state(grad_norm)
    for name in ("disc_loss", "mlm_loss"):
      if name in losses:
        getattr(self, name).update_state(losses[name])
    if outputs is not None:
      self.update_predictions(outputs, features)

  def update_predictions(self, outputs: dict[str, tf.Tensor],
                         features: dict[str, tf.Tensor]) -> None:
    """Adds the accuracies (and the detector's counts) of one forward pass."""
    weights = features[F.MASKED_LM_WEIGHTS]
    targets = features[F.MASKED_LM_IDS]
    self.gen_accuracy.update_state(_hits(outputs["gen_logits"], targets), weights)
    if "samples" not in outputs:  # "mlm", or a two-stage run's generator stage
      return
    self.sampled_accuracy.update_state(
        tf.cast(outputs["samples"] == targets, tf.float32), weights)
    if "disc_logits" in outputs:
      self._update_detector(outputs)
    elif "mlm_predictions" in outputs:
      hits = tf.cast(outputs["mlm_predictions"] == outputs["mlm_targets"], tf.float32)
      self.mlm_accuracy.update_state(hits, outputs["mlm_weights"])

  def _update_detector(self, outputs) -> None:
    mask = outputs["disc_weights"]
    labels = outputs["labels"]
    probs = tf.sigmoid(outputs["disc_logits"])
    self.disc_accuracy.update_state(
        tf.cast(tf.cast(probs > 0.5, tf.int32) == labels, tf.float32), mask)
    for metric in (self.disc_precision, self.disc_recall, self.disc_auc):
      metric.update_state(labels, probs, sample_weight=mask)
    self.replaced_fraction.update_state(tf.cast(labels, tf.float32), mask)

  def get_config(self):
    config = super().get_config()
    config.update(objective=self.objective)
    return config


def _hits(logits: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
  """1.0 where the target's logit is the largest of `logits` [..., V] (the argmax, a tie
  counting as a hit), else 0.0; `targets` [...] in [0, V).

  The row maximum is the one the generator's sampler takes (rtd.sample_from_logits), which
  TensorFlow's graph optimiser computes once for both: a gather then replaces a second pass
  over the [..., V] logits for an ArgMax.
  """
  peak = tf.reduce_max(logits, axis=-1, keepdims=True)
  target_logit = tf.gather(logits, targets[..., tf.newaxis], batch_dims=len(targets.shape))
  return tf.cast(target_logit[..., 0] >= peak[..., 0], tf.float32)
