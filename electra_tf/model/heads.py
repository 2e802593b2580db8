"""Output heads: the generator's tied MLM head and the discriminator's per-token head."""

from __future__ import annotations

import tensorflow as tf
import tf_keras

from electra_tf.model.elementwise import exact_gelu
from electra_tf.model.layers import ElectraEmbeddings, truncated_normal


def gather_positions(sequence: tf.Tensor, positions: tf.Tensor) -> tf.Tensor:
  """Rows of `sequence` at `positions`.

  Args:
    sequence: [B, L, H].
    positions: int32 [B, P].

  Returns:
    [B, P, H].
  """
  return tf.gather(sequence, positions, batch_dims=1)


class GeneratorHead(tf_keras.layers.Layer):
  """Dense(E, gelu) -> LayerNorm -> logits against the shared word embeddings + bias.

  Args:
    embeddings: the shared ElectraEmbeddings (its word matrix [V, E] is the output layer).
    initializer_range: stddev of the dense kernel initializer.
    layer_norm_eps: LayerNorm epsilon.

  Call args:
    hidden: [..., H] hidden states, usually only at the masked positions ([B, P, H]).

  Returns:
    float32 logits [..., V].
  """

  def __init__(self, embeddings: ElectraEmbeddings, initializer_range: float = 0.02,
               layer_norm_eps: float = 1e-12, **kwargs):
    super().__init__(**kwargs)
    self.embeddings = embeddings
    self.initializer_range = initializer_range
    self.layer_norm_eps = layer_norm_eps
    self.dense = tf_keras.layers.Dense(
        embeddings.embedding_size, activation=exact_gelu,
        kernel_initializer=truncated_normal(initializer_range), name="dense")
    self.layer_norm = tf_keras.layers.LayerNormalization(
        epsilon=layer_norm_eps, dtype=tf.float32, name="layer_norm")

  def build(self, input_shape):
    if not self.embeddings.built:  # the head reads the word table before the encoder runs
      self.embeddings.build(None)
    self.output_bias = self.add_weight(
        "output_bias", shape=[self.embeddings.vocab_size], initializer="zeros",
        experimental_autocast=False)  # added to float32 logits
    super().build(input_shape)

  def call(self, hidden: tf.Tensor) -> tf.Tensor:
    shape = tf.shape(hidden)
    # Flatten to 2-D so the vocab projection is one plain matmul.
    flat = tf.reshape(hidden, [-1, hidden.shape[-1]])
    flat = tf.cast(self.layer_norm(self.dense(flat)), self.compute_dtype)
    word = tf.cast(self.embeddings.word_embeddings, self.compute_dtype)
    logits = tf.matmul(flat, word, transpose_b=True)
    logits = tf.cast(logits, tf.float32) + self.output_bias
    return tf.reshape(logits, tf.concat([shape[:-1], [self.embeddings.vocab_size]], 0))

  def get_config(self):
    config = super().get_config()
    config.update(embeddings=tf_keras.layers.serialize(self.embeddings),
                  initializer_range=self.initializer_range, layer_norm_eps=self.layer_norm_eps)
    return config

  @classmethod
  def from_config(cls, config):
    """A head over a new ElectraEmbeddings of the same config (sharing is not serialized)."""
    config = dict(config)
    config["embeddings"] = ElectraEmbeddings.from_config(config["embeddings"]["config"])
    return cls(**config)


class DiscriminatorHead(tf_keras.layers.Layer):
  """Dense(H, gelu) -> Dense(1): one replaced-token logit per position.

  Args:
    hidden_size: H.
    initializer_range: stddev of the kernel initializers.

  Call args:
    hidden: [B, L, H].

  Returns:
    float32 logits [B, L].
  """

  def __init__(self, hidden_size: int, initializer_range: float = 0.02, **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.initializer_range = initializer_range
    self.dense = tf_keras.layers.Dense(
        hidden_size, activation=exact_gelu,
        kernel_initializer=truncated_normal(initializer_range), name="dense")
    self.dense_prediction = tf_keras.layers.Dense(
        1, kernel_initializer=truncated_normal(initializer_range), name="dense_prediction")

  def call(self, hidden: tf.Tensor) -> tf.Tensor:
    logits = self.dense_prediction(self.dense(hidden))
    return tf.cast(tf.squeeze(logits, -1), tf.float32)

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, initializer_range=self.initializer_range)
    return config
