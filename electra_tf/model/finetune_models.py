"""Fine-tuning models for sentence classification and SQuAD, and the model of each task."""

from __future__ import annotations

import dataclasses

import tensorflow as tf
import tf_keras

from electra_tf import features as F
from electra_tf.config import EncoderConfig, FinetuneConfig
from electra_tf.model.finetune_base import (  # noqa: F401 - re-exported for the tasks
  END_POSITIONS,
  IS_IMPOSSIBLE,
  LABEL,
  LABEL_IDS,
  LABEL_WEIGHTS,
  START_POSITIONS,
  FinetuneModel,
  _encoder_inputs,
)
from electra_tf.model.tagger import ElectraTagger
from electra_tf.model.task_heads import ClassificationHead, SpanHead


class ElectraClassifier(FinetuneModel):
  """Sentence (pair) classification or regression from the [CLS] hidden state (or the mean
  of the hidden states).

  Args:
    encoder_config: the discriminator's sizes.
    num_labels: classes; 1 means regression (mean squared error).
    dropout_rate: before the output layer.
    clip_norm: global gradient-norm clip of the train step.
    head_initializer: the output layer's kernel initializer (see `task_heads.head_initializer`).
    pooling: "cls" (the [CLS] hidden state) or "mean" (over the real tokens).

  Call args:
    features: dict of int32 [B, L] `input_ids`, `input_mask`, `segment_ids`.

  Returns:
    dict with float32 "logits" [B, num_labels] and "probabilities" [B, num_labels]
    (softmax), or "predictions" [B] for regression.
  """

  def __init__(self, encoder_config: EncoderConfig | dict, num_labels: int,
               dropout_rate: float = 0.1, clip_norm: float = 1.0,
               head_initializer: str = "truncated_normal", pooling: str = "cls", **kwargs):
    kwargs.setdefault("name", "classifier")
    super().__init__(encoder_config, clip_norm, **kwargs)
    self.num_labels = num_labels
    self.dropout_rate = dropout_rate
    self.head_initializer = head_initializer
    self.pooling = pooling
    self.head = ClassificationHead(num_labels, dropout_rate,
                                   self.encoder_config.initializer_range, head_initializer,
                                   pooling=pooling, name="classifier_head")
    self.accuracy = None if num_labels == 1 else tf_keras.metrics.Mean("accuracy")

  @property
  def is_regression(self) -> bool:
    return self.num_labels == 1

  def call(self, features, training=None):
    logits = self.head(self.encoder(_encoder_inputs(features), training=training),
                       features[F.INPUT_MASK], training=training)
    if self.is_regression:
      return {"logits": logits, "predictions": logits[:, 0]}
    return {"logits": logits, "probabilities": tf.nn.softmax(logits)}

  def per_example_loss(self, outputs, features):
    if self.is_regression:
      return tf.square(outputs["predictions"] - tf.cast(features[LABEL], tf.float32))
    return tf.nn.sparse_softmax_cross_entropy_with_logits(
        tf.cast(features[LABEL], tf.int32), outputs["logits"])

  def update_task_metrics(self, outputs, features):
    if self.accuracy is not None:
      predicted = tf.argmax(outputs["logits"], -1, output_type=tf.int32)
      self.accuracy.update_state(
          tf.cast(predicted == tf.cast(features[LABEL], tf.int32), tf.float32))

  def get_config(self):
    return {"encoder_config": self.encoder_config.to_dict(), "num_labels": self.num_labels,
            "dropout_rate": self.dropout_rate, "clip_norm": self.clip_norm,
            "head_initializer": self.head_initializer, "pooling": self.pooling,
            "name": self.name}


class ElectraSpanQA(FinetuneModel):
  """Extractive question answering (SQuAD 1.1 / 2.0).

  Args:
    encoder_config: the discriminator's sizes.
    joint_end: the authors' start-conditioned end head.
    answerable: the SQuAD 2.0 answerability classifier, with loss weight `answerable_weight`.
    beam_size: starts kept by the joint end head in inference.
    clip_norm: global gradient-norm clip of the train step.
    head_initializer: the head's kernel initializer (see `task_heads.head_initializer`).

  Call args:
    features: dict of int32 [B, L] `input_ids`, `input_mask`, `segment_ids`, and in training
      int32 [B] `start_positions` (used by the joint end head).

  Returns:
    SpanHead's outputs: "start_logits" [B, L], "end_logits" [B, L] (or [B, K, L] with
    "start_top_index" [B, K]), and "impossible_logit" [B] when answerable.
  """

  def __init__(self, encoder_config: EncoderConfig | dict, joint_end: bool = False,
               answerable: bool = False, answerable_weight: float = 0.5, beam_size: int = 20,
               clip_norm: float = 1.0, head_initializer: str = "truncated_normal", **kwargs):
    kwargs.setdefault("name", "span_qa")
    super().__init__(encoder_config, clip_norm, **kwargs)
    self.joint_end = joint_end
    self.answerable = answerable
    self.answerable_weight = answerable_weight
    self.beam_size = beam_size
    self.head_initializer = head_initializer
    self.head = SpanHead(joint_end, answerable, beam_size,
                         initializer_range=self.encoder_config.initializer_range,
                         initializer=head_initializer, name="qa_head")
    self.start_accuracy = tf_keras.metrics.Mean("start_accuracy")

  def call(self, features, training=None):
    hidden = self.encoder(_encoder_inputs(features), training=training)
    starts = features.get(START_POSITIONS) if (training and self.joint_end) else None
    return self.head(hidden, features[F.INPUT_MASK], start_positions=starts, training=training)

  def per_example_loss(self, outputs, features):
    starts = tf.cast(features[START_POSITIONS], tf.int32)
    ends = tf.cast(features[END_POSITIONS], tf.int32)
    end_logits = outputs["end_logits"]
    if len(end_logits.shape) == 3:  # joint head outside training: score the gold start's row
      raise ValueError("the joint end head computes training losses only with training=True")
    loss = 0.5 * (tf.nn.sparse_softmax_cross_entropy_with_logits(starts, outputs["start_logits"])
                  + tf.nn.sparse_softmax_cross_entropy_with_logits(ends, end_logits))
    if self.answerable:
      loss += self.answerable_weight * tf.nn.sigmoid_cross_entropy_with_logits(
          tf.cast(features[IS_IMPOSSIBLE], tf.float32), outputs["impossible_logit"])
    return loss

  def test_step(self, features):
    # The joint head needs the gold start for a loss; evaluation uses predictions instead.
    if self.joint_end:
      outputs = self(dict(features), training=False)
      self.update_task_metrics(outputs, features)
      return {m.name: m.result() for m in self.metrics}
    return super().test_step(features)

  def update_task_metrics(self, outputs, features):
    if START_POSITIONS in features:
      predicted = tf.argmax(outputs["start_logits"], -1, output_type=tf.int32)
      self.start_accuracy.update_state(tf.cast(
          predicted == tf.cast(features[START_POSITIONS], tf.int32), tf.float32))

  def get_config(self):
    return {"encoder_config": self.encoder_config.to_dict(), "joint_end": self.joint_end,
            "answerable": self.answerable, "answerable_weight": self.answerable_weight,
            "beam_size": self.beam_size, "clip_norm": self.clip_norm,
            "head_initializer": self.head_initializer, "name": self.name}


def build_finetune_model(model: FinetuneModel, seq_len: int = 8) -> FinetuneModel:
  """Creates every variable of `model` by calling it once on zeros."""
  ids = tf.zeros([2, seq_len], tf.int32)
  features = {F.INPUT_IDS: ids, F.INPUT_MASK: tf.ones_like(ids), F.SEGMENT_IDS: ids}
  model(features, training=False)
  if isinstance(model, ElectraSpanQA) and model.joint_end:
    model({**features, START_POSITIONS: tf.zeros([2], tf.int32)}, training=True)
  return model


def model_for_task(config: FinetuneConfig, encoder_config: EncoderConfig,
                   num_labels: int = 1) -> FinetuneModel:
  """The (unbuilt) model of `config.task`; `num_labels` is for classification (1: regression)
  and tagging."""
  encoder_config = dataclasses.replace(encoder_config, dropout_rate=config.dropout_rate)
  if config.is_squad:
    return ElectraSpanQA(encoder_config, joint_end=config.joint_end_head,
                         answerable=config.version_2 and config.answerable_classifier,
                         answerable_weight=config.answerable_weight,
                         beam_size=config.beam_size, clip_norm=config.clip_norm,
                         head_initializer=config.head_initializer)
  if config.is_tagging:
    return ElectraTagger(encoder_config, num_labels, config.dropout_rate,
                         clip_norm=config.clip_norm, head_initializer=config.head_initializer)
  return ElectraClassifier(encoder_config, num_labels, config.dropout_rate,
                           clip_norm=config.clip_norm, head_initializer=config.head_initializer,
                           pooling=config.pooling)
