"""Fine-tuning models: the encoder + a task head, with a replica-exact train step."""

from __future__ import annotations

import dataclasses

import tensorflow as tf
import tf_keras

from electra_tf import features as F
from electra_tf.config import EncoderConfig, FinetuneConfig
from electra_tf.model import train_loop
from electra_tf.model.encoder import ElectraEncoder
from electra_tf.model.replicas import global_sum as _global_sum
from electra_tf.model.replicas import scale_loss, summed_gradients
from electra_tf.model.task_heads import ClassificationHead, SpanHead, TokenClassificationHead

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
