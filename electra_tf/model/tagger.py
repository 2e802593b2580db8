"""The token-classification model (named entities, chunks, part of speech)."""

from __future__ import annotations

import tensorflow as tf
import tf_keras

from electra_tf.config import EncoderConfig
from electra_tf.model.finetune_base import (
    LABEL_IDS,
    LABEL_WEIGHTS,
    FinetuneModel,
    _encoder_inputs,
    _global_sum,
)
from electra_tf.model.task_heads import TokenClassificationHead


class ElectraTagger(FinetuneModel):
  """A label per token (named entities, chunks, part of speech): dropout + Dense on every
  hidden state. The loss is the mean cross-entropy over the weighted tokens of the global
  batch (each word's first piece), as transformers' token classification computes it.

  Args:
    encoder_config: the discriminator's sizes.
    num_labels: tags.
    dropout_rate: before the output layer.
    clip_norm: global gradient-norm clip of the train step.
    head_initializer: the output layer's kernel initializer.

  Call args:
    features: dict of int32 [B, L] `input_ids`, `input_mask`, `segment_ids`; for the loss
      int32 [B, L] `label_ids` and float32 [B, L] `label_weights`.

  Returns:
    dict with float32 "logits" [B, L, num_labels].
  """

  def __init__(self, encoder_config: EncoderConfig | dict, num_labels: int,
               dropout_rate: float = 0.1, clip_norm: float = 1.0,
               head_initializer: str = "truncated_normal", **kwargs):
    kwargs.setdefault("name", "tagger")
    super().__init__(encoder_config, clip_norm, **kwargs)
    self.num_labels = num_labels
    self.dropout_rate = dropout_rate
    self.head_initializer = head_initializer
    self.head = TokenClassificationHead(num_labels, dropout_rate,
                                        self.encoder_config.initializer_range,
                                        head_initializer, name="tagger_head")
    self.accuracy = tf_keras.metrics.Mean("accuracy")

  def call(self, features, training=None):
    hidden = self.encoder(_encoder_inputs(features), training=training)
    return {"logits": self.head(hidden, training=training)}

  def _token_losses(self, outputs, features):
    return tf.nn.sparse_softmax_cross_entropy_with_logits(
        tf.cast(features[LABEL_IDS], tf.int32), outputs["logits"])

  def per_example_loss(self, outputs, features):
    return tf.reduce_sum(self._token_losses(outputs, features) * features[LABEL_WEIGHTS], -1)

  def _loss(self, outputs, features):
    # Divided by the scored tokens of the global batch: replica losses sum to its mean.
    weights = tf.cast(features[LABEL_WEIGHTS], tf.float32)
    total = tf.reduce_sum(self._token_losses(outputs, features) * weights)
    return total / tf.maximum(_global_sum(tf.reduce_sum(weights)), 1.0)

  def update_task_metrics(self, outputs, features):
    predicted = tf.argmax(outputs["logits"], -1, output_type=tf.int32)
    correct = tf.cast(predicted == tf.cast(features[LABEL_IDS], tf.int32), tf.float32)
    self.accuracy.update_state(correct, sample_weight=features[LABEL_WEIGHTS])

  def get_config(self):
    return {"encoder_config": self.encoder_config.to_dict(), "num_labels": self.num_labels,
            "dropout_rate": self.dropout_rate, "clip_norm": self.clip_norm,
            "head_initializer": self.head_initializer, "name": self.name}
