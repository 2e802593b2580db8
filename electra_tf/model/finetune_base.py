"""What every fine-tuning model shares: the feature names of labels, and FinetuneModel, the
encoder with a replica-exact train step that a task head completes."""

from __future__ import annotations

import tensorflow as tf
import tf_keras

from electra_tf import features as F
from electra_tf.config import EncoderConfig
from electra_tf.model import train_loop
from electra_tf.model.encoder import ElectraEncoder
from electra_tf.model.replicas import global_sum as _global_sum  # noqa: F401 - for the heads
from electra_tf.model.replicas import scale_loss, summed_gradients

LABEL = "label"
START_POSITIONS = "start_positions"
END_POSITIONS = "end_positions"
IS_IMPOSSIBLE = "is_impossible"
LABEL_IDS = "label_ids"  # tagging: int [B, L] label index per token
LABEL_WEIGHTS = "label_weights"  # tagging: float [B, L], 1 where a word's label is scored


def _encoder_inputs(features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
  return {k: features[k] for k in (F.INPUT_IDS, F.INPUT_MASK, F.SEGMENT_IDS)}


class FinetuneModel(train_loop.TracedOnce, tf_keras.Model):
  """Shared train/test steps: a global-batch mean loss, clipped gradients, task metrics.

  Subclasses define `call(features, training)` -> dict of outputs and
  `per_example_loss(outputs, features)` -> [B] float32.
  """

  def __init__(self, encoder_config: EncoderConfig | dict, clip_norm: float = 1.0, **kwargs):
    super().__init__(**kwargs)
    if isinstance(encoder_config, dict):  # from get_config
      encoder_config = EncoderConfig.from_dict(encoder_config)
    self.encoder_config = encoder_config
    self.clip_norm = clip_norm
    self.encoder = ElectraEncoder(encoder_config, name="encoder")
    self.loss_tracker = tf_keras.metrics.Mean("loss")
    self.grad_norm = tf_keras.metrics.Mean("grad_norm")

  def _loss(self, outputs, features):
    # Each replica divides by the global number of examples, so the replica losses (and
    # gradients) sum to the mean over the whole global batch whatever the replica count.
    per_example = self.per_example_loss(outputs, features)
    count = tf.cast(tf.shape(per_example)[0], tf.float32)
    return tf.reduce_sum(per_example) / tf.maximum(_global_sum(count), 1.0)

  def train_step(self, features):
    opt = self.optimizer
    with tf.GradientTape() as tape:
      outputs = self(features, training=True)
      loss = self._loss(outputs, features)
      scaled = scale_loss(opt, loss)
    grads = summed_gradients(opt, tape, scaled, self.trainable_variables)
    grads, norm = tf.clip_by_global_norm(grads, self.clip_norm)
    opt.apply_gradients(zip(grads, self.trainable_variables),
                        experimental_aggregate_gradients=False)
    self.loss_tracker.update_state(_global_sum(loss))
    self.grad_norm.update_state(norm)
    self.update_task_metrics(outputs, features)
    return {m.name: m.result() for m in self.metrics}

  def test_step(self, features):
    outputs = self(features, training=False)
    self.loss_tracker.update_state(_global_sum(self._loss(outputs, features)))
    self.update_task_metrics(outputs, features)
    return {m.name: m.result() for m in self.metrics}

  def predict_step(self, features):
    outputs = self(features, training=False)
    for key in ("unique_id", "example_index"):
      if key in features:
        outputs[key] = features[key]
    return outputs

  def update_task_metrics(self, outputs, features):
    """Streaming training metrics (the real evaluation runs on predictions)."""
