"""Fine-tuning heads on the discriminator's hidden states (ELECTRA_SPEC section 5)."""

from __future__ import annotations

import tensorflow as tf
import tf_keras

from electra_tf.config import HEAD_INITIALIZERS, POOLINGS
from electra_tf.model.elementwise import exact_gelu
from electra_tf.model.layers import truncated_normal


def head_initializer(kind: str, stddev: float) -> tf_keras.initializers.Initializer:
  """The authors' truncated normal (cut at 2 stddev, so its spread is 0.88 * stddev), or a
  plain normal as transformers' _init_weights."""
  if kind == "normal":
    return tf_keras.initializers.RandomNormal(stddev=stddev)
  if kind == "truncated_normal":
    return truncated_normal(stddev)
  raise ValueError(f"unknown head initializer {kind!r}; choose one of {HEAD_INITIALIZERS}")

# Added to the logits of padding positions: exp() of it is 0 in float32, and it stays finite.
_NEG = -10000.0


def mask_logits(logits: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
  """logits [..., L] (float32) with positions where mask [B, L] == 0 pushed to -1e4."""
  mask = tf.cast(mask, logits.dtype)
  while len(mask.shape) < len(logits.shape):
    mask = mask[:, tf.newaxis]
  return logits + (1.0 - mask) * _NEG


class ClassificationHead(tf_keras.layers.Layer):
  """Dropout + Dense on the [CLS] hidden state (ELECTRA has no pooler), or with
  `pooling="mean"` on the mean of the hidden states over the real tokens.

  Call args:
    hidden: [B, L, H] encoder output.
    mask: [B, L], 1 at real tokens; needed by mean pooling.

  Returns:
    float32 logits [B, num_labels] (num_labels 1 for regression).
  """

  def __init__(self, num_labels: int, dropout_rate: float = 0.1,
               initializer_range: float = 0.02, initializer: str = "truncated_normal",
               pooling: str = "cls", **kwargs):
    super().__init__(**kwargs)
    if pooling not in POOLINGS:
      raise ValueError(f"unknown pooling {pooling!r}; choose one of {POOLINGS}")
    self.pooling = pooling
    self.num_labels = num_labels
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range
    self.initializer = initializer
    self.dropout = tf_keras.layers.Dropout(dropout_rate, name="dropout")
    self.dense = tf_keras.layers.Dense(
        num_labels, kernel_initializer=head_initializer(initializer, initializer_range),
        name="dense")

  def call(self, hidden, mask=None, training=None):
    if self.pooling == "cls":
      pooled = hidden[:, 0]
    else:
      if mask is None:
        raise ValueError("mean pooling needs the input mask")
      weights = tf.cast(mask, tf.float32)[:, :, tf.newaxis]
      total = tf.reduce_sum(tf.cast(hidden, tf.float32) * weights, axis=1)
      pooled = tf.cast(total / tf.maximum(tf.reduce_sum(weights, axis=1), 1.0), hidden.dtype)
    logits = self.dense(self.dropout(pooled, training=training))
    return tf.cast(logits, tf.float32)

  def get_config(self):
    config = super().get_config()
    config.update(num_labels=self.num_labels, dropout_rate=self.dropout_rate,
                  initializer_range=self.initializer_range, initializer=self.initializer,
                  pooling=self.pooling)
    return config


class TokenClassificationHead(tf_keras.layers.Layer):
  """Dropout + Dense on every token's hidden state: a label per token (tagging).

  Call args:
    hidden: [B, L, H] encoder output.

  Returns:
    float32 logits [B, L, num_labels].
  """

  def __init__(self, num_labels: int, dropout_rate: float = 0.1,
               initializer_range: float = 0.02, initializer: str = "truncated_normal",
               **kwargs):
    super().__init__(**kwargs)
    self.num_labels = num_labels
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range
    self.initializer = initializer
    self.dropout = tf_keras.layers.Dropout(dropout_rate, name="dropout")
    self.dense = tf_keras.layers.Dense(
        num_labels, kernel_initializer=head_initializer(initializer, initializer_range),
        name="dense")

  def call(self, hidden, training=None):
    return tf.cast(self.dense(self.dropout(hidden, training=training)), tf.float32)

  def get_config(self):
    config = super().get_config()
    config.update(num_labels=self.num_labels, dropout_rate=self.dropout_rate,
                  initializer_range=self.initializer_range, initializer=self.initializer)
    return config


class _MLP(tf_keras.layers.Layer):
  """Dense(width, gelu) -> Dense(1), squeezed: the authors' scoring MLP."""

  def __init__(self, width: int, initializer_range: float,
               initializer: str = "truncated_normal", **kwargs):
    super().__init__(**kwargs)
    self.width = width
    self.initializer_range = initializer_range
    self.initializer = initializer
    self.dense = tf_keras.layers.Dense(
        width, activation=exact_gelu,
        kernel_initializer=head_initializer(initializer, initializer_range), name="dense")
    self.score = tf_keras.layers.Dense(
        1, kernel_initializer=head_initializer(initializer, initializer_range), name="score")

  def call(self, features):
    return tf.cast(tf.squeeze(self.score(self.dense(features)), -1), tf.float32)

  def get_config(self):
    config = super().get_config()
    config.update(width=self.width, initializer_range=self.initializer_range,
                  initializer=self.initializer)
    return config


class SpanHead(tf_keras.layers.Layer):
  """Start/end logits for extractive QA, optionally the authors' refinements.

  Simple: Dense(2) over every token. With `joint_end`: end logits conditioned on a start
  position ([start hidden; token hidden] -> Dense 512 gelu -> Dense 1), on the gold start in
  training and on each of the top `beam_size` starts in inference. With `answerable`: a logit
  that the question has no answer, from [CLS hidden; softmax(start)-weighted hidden] ->
  Dense 512 gelu -> Dense 1.

  Call args:
    hidden: [B, L, H] encoder output.
    mask: int [B, L], 1 on real tokens.
    start_positions: int [B] gold starts (joint_end training only).

  Returns:
    dict of float32 "start_logits" [B, L]; "end_logits" [B, L], or [B, K, L] in joint-end
    inference together with int32 "start_top_index" [B, K]; "impossible_logit" [B] when
    `answerable` (> 0 means "no answer").
  """

  def __init__(self, joint_end: bool = False, answerable: bool = False, beam_size: int = 20,
               mlp_width: int = 512, initializer_range: float = 0.02,
               initializer: str = "truncated_normal", **kwargs):
    super().__init__(**kwargs)
    self.joint_end = joint_end
    self.answerable = answerable
    self.beam_size = beam_size
    self.mlp_width = mlp_width
    self.initializer_range = initializer_range
    self.initializer = initializer
    self.start_end = tf_keras.layers.Dense(
        1 if joint_end else 2,
        kernel_initializer=head_initializer(initializer, initializer_range), name="start_end")
    self.end_mlp = (_MLP(mlp_width, initializer_range, initializer, name="end")
                    if joint_end else None)
    self.answer_mlp = (_MLP(mlp_width, initializer_range, initializer, name="answerable")
                       if answerable else None)

  def _end_given_start(self, hidden, start_hidden, mask):
    """End logits [B, K, L] for start states [B, K, H]."""
    L, K = tf.shape(hidden)[1], tf.shape(start_hidden)[1]
    tokens = tf.tile(hidden[:, tf.newaxis], [1, K, 1, 1])                     # [B, K, L, H]
    starts = tf.tile(start_hidden[:, :, tf.newaxis], [1, 1, L, 1])            # [B, K, L, H]
    return mask_logits(self.end_mlp(tf.concat([starts, tokens], -1)), mask)

  def call(self, hidden, mask, start_positions=None, training=None):
    scores = tf.cast(self.start_end(hidden), tf.float32)
    start_logits = mask_logits(scores[..., 0], mask)
    outputs = {"start_logits": start_logits}
    if not self.joint_end:
      outputs["end_logits"] = mask_logits(scores[..., 1], mask)
    elif start_positions is not None:
      start_hidden = tf.gather(hidden, start_positions[:, tf.newaxis], batch_dims=1)
      outputs["end_logits"] = self._end_given_start(hidden, start_hidden, mask)[:, 0]
    else:
      k = tf.minimum(self.beam_size, tf.shape(hidden)[1])
      top = tf.math.top_k(start_logits, k=k).indices                          # [B, K]
      outputs["start_top_index"] = top
      outputs["end_logits"] = self._end_given_start(
          hidden, tf.gather(hidden, top, batch_dims=1), mask)
    if self.answerable:
      weights = tf.cast(tf.nn.softmax(start_logits), hidden.dtype)           # [B, L]
      attended = tf.einsum("bl,blh->bh", weights, hidden)
      outputs["impossible_logit"] = self.answer_mlp(tf.concat([hidden[:, 0], attended], -1))
    return outputs

  def get_config(self):
    config = super().get_config()
    config.update(joint_end=self.joint_end, answerable=self.answerable,
                  beam_size=self.beam_size, mlp_width=self.mlp_width,
                  initializer_range=self.initializer_range, initializer=self.initializer)
    return config
