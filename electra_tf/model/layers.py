"""Building blocks: the shared ELECTRA embeddings and the transformer block factory.

GELU and LayerNorm with written-out gradients are in elementwise.py."""

from __future__ import annotations

import math

import tensorflow as tf
import tf_keras
from official.nlp.modeling import layers as nlp_layers

from electra_tf.model import fused, serving_form
from electra_tf.model.dropout import SeededDropout
from electra_tf.model.elementwise import EinsumDense, LayerNorm, exact_gelu


def truncated_normal(stddev: float) -> tf_keras.initializers.Initializer:
  return tf_keras.initializers.TruncatedNormal(stddev=stddev)


class ElectraEmbeddings(tf_keras.layers.Layer):
  """Token + position + segment embeddings, LayerNorm and dropout.

  One instance is shared by the generator and the discriminator, so both train
  the same variables (ELECTRA's embedding tying).

  Args:
    vocab_size: V.
    embedding_size: E.
    max_position_embeddings: rows of the position table.
    type_vocab_size: number of segment ids.
    dropout_rate: dropout after the LayerNorm.
    initializer_range: stddev of the truncated-normal initializer.
    layer_norm_eps: LayerNorm epsilon.

  Call args:
    input_ids: int32 [B, L].
    segment_ids: int32 [B, L].

  Returns:
    [B, L, E] in the layer's compute dtype.
  """

  def __init__(self, vocab_size: int, embedding_size: int, max_position_embeddings: int = 512,
               type_vocab_size: int = 2, dropout_rate: float = 0.1,
               initializer_range: float = 0.02, layer_norm_eps: float = 1e-12, **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.embedding_size = embedding_size
    self.max_position_embeddings = max_position_embeddings
    self.type_vocab_size = type_vocab_size
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range
    self.layer_norm_eps = layer_norm_eps
    # float32 LayerNorm keeps mixed-precision statistics stable (Model Garden does the same).
    self.layer_norm = LayerNorm(epsilon=layer_norm_eps, dtype=tf.float32, name="layer_norm")
    self.dropout = SeededDropout(dropout_rate, name="dropout")

  def build(self, input_shape):
    # A fresh initializer per table: one unseeded instance would repeat its values.
    self.word_embeddings = self.add_weight(
        "word_embeddings", shape=[self.vocab_size, self.embedding_size],
        initializer=truncated_normal(self.initializer_range))
    self.position_embeddings = self.add_weight(
        "position_embeddings", shape=[self.max_position_embeddings, self.embedding_size],
        initializer=truncated_normal(self.initializer_range))
    self.token_type_embeddings = self.add_weight(
        "token_type_embeddings", shape=[self.type_vocab_size, self.embedding_size],
        initializer=truncated_normal(self.initializer_range))
    super().build(input_shape)

  def call(self, input_ids: tf.Tensor, segment_ids: tf.Tensor, training=None) -> tf.Tensor:
    return self.embed(tf.gather(self.word_embeddings, input_ids), segment_ids, training)

  def embed(self, words: tf.Tensor, segment_ids: tf.Tensor, training=None) -> tf.Tensor:
    """Adds segment and position embeddings to looked-up words [B, L, E]; LayerNorm, dropout."""
    seq_len = tf.shape(words)[1]
    # A one-hot matmul over the 2 segment rows is cheaper than a gather on TPUs.
    types = tf.einsum("blt,te->ble", tf.one_hot(segment_ids, self.type_vocab_size,
                                                dtype=self.token_type_embeddings.dtype),
                      self.token_type_embeddings)
    positions = self.position_embeddings[tf.newaxis, :seq_len, :]
    embeddings = self.layer_norm(words + types + positions)
    embeddings = tf.cast(embeddings, self.compute_dtype)
    return self.dropout(embeddings, training=training)

  def get_config(self):
    config = super().get_config()
    config.update(vocab_size=self.vocab_size, embedding_size=self.embedding_size,
                  max_position_embeddings=self.max_position_embeddings,
                  type_vocab_size=self.type_vocab_size, dropout_rate=self.dropout_rate,
                  initializer_range=self.initializer_range, layer_norm_eps=self.layer_norm_eps)
    return config


class GDESEmbeddings(tf_keras.layers.Layer):
  """The discriminator's embeddings under gradient-disentangled sharing (DeBERTaV3).

  Word vectors are stop_gradient(shared table) + a zero-initialised delta of the same
  shape, so the discriminator's loss trains only the delta and the generator's loss alone
  trains the shared table. Position and segment embeddings and the LayerNorm are the
  shared layer's own (trained by both losses, as under plain tying).

  Args:
    shared: the generator's ElectraEmbeddings.

  Call args:
    input_ids, segment_ids: int32 [B, L].

  Returns:
    [B, L, E] in the layer's compute dtype.
  """

  def __init__(self, shared: ElectraEmbeddings, **kwargs):
    super().__init__(**kwargs)
    self.shared = shared
    self.vocab_size = shared.vocab_size
    self.embedding_size = shared.embedding_size

  def build(self, input_shape):
    if not self.shared.built:
      self.shared.build(input_shape)
    self.word_embeddings_delta = self.add_weight(
        "word_embeddings_delta", shape=[self.vocab_size, self.embedding_size],
        initializer="zeros")
    super().build(input_shape)

  def call(self, input_ids: tf.Tensor, segment_ids: tf.Tensor, training=None) -> tf.Tensor:
    words = (tf.stop_gradient(tf.gather(self.shared.word_embeddings, input_ids))
             + tf.gather(self.word_embeddings_delta, input_ids))
    return self.shared.embed(words, segment_ids, training)

  @property
  def word_embeddings(self) -> tf.Tensor:
    """The discriminator's word table as its loss sees it: [V, E]."""
    return tf.stop_gradient(self.shared.word_embeddings) + self.word_embeddings_delta

  def folded_word_embeddings(self) -> tf.Tensor:
    """shared + delta: the table a standalone discriminator exports, [V, E]."""
    return tf.convert_to_tensor(self.shared.word_embeddings) + self.word_embeddings_delta

  @property
  def position_embeddings(self):
    return self.shared.position_embeddings

  @property
  def token_type_embeddings(self):
    return self.shared.token_type_embeddings

  @property
  def layer_norm(self):
    return self.shared.layer_norm

  def get_config(self):
    config = super().get_config()
    config.update(shared=tf_keras.layers.serialize(self.shared))
    return config

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    config["shared"] = ElectraEmbeddings.from_config(config["shared"]["config"])
    return cls(**config)


class _SeededAttention(tf_keras.layers.MultiHeadAttention):
  """Keras MultiHeadAttention whose attention-probability dropout is a SeededDropout.

  The scores and the context are batched matmuls over heads-major [B, N, T, H] copies of
  the projections rather than Keras's einsums on [B, T, N, H]: the same products, which
  oneDNN runs faster in this layout, transposes included (measured by
  `python bench/speed/step_ab.py --variants=ours,keras_attention`; docs/benchmarks.md). The
  projections are elementwise.EinsumDense. Same variables and outputs.
  """

  def _build_from_signature(self, query, value, key=None):
    super()._build_from_signature(query, value, key)
    # Unbuilt: the same projections with the bias gradient of elementwise.EinsumDense.
    for name in ("_query_dense", "_key_dense", "_value_dense", "_output_dense"):
      setattr(self, name, EinsumDense.from_config(getattr(self, name).get_config()))

  def _build_attention(self, rank):
    super()._build_attention(rank)
    self._dropout_layer = SeededDropout(self._dropout, dtype=self._dtype_policy,
                                        name="probs_dropout")

  def _compute_attention(self, query, key, value, attention_mask=None, training=None):
    if query.shape.rank != 4:  # attention over more than one axis: Keras's einsums
      return super()._compute_attention(query, key, value, attention_mask, training)
    heads_major = [0, 2, 1, 3]  # [B, T, N, H] <-> [B, N, T, H]
    query = tf.multiply(query, 1.0 / math.sqrt(float(self._key_dim)))
    scores = tf.matmul(tf.transpose(query, heads_major), tf.transpose(key, heads_major),
                       transpose_b=True)  # [B, N, T, S]
    probs = self._masked_softmax(scores, attention_mask)
    context = tf.matmul(self._dropout_layer(probs, training=training),
                        tf.transpose(value, heads_major))  # [B, N, T, H]
    return tf.transpose(context, heads_major), probs


class ElectraTransformerBlock(nlp_layers.TransformerEncoderBlock):
  """Model Garden's block with every dropout a SeededDropout, and the LayerNorms and
  projections of elementwise.py (same variables and names)."""

  def build(self, input_shape):
    super().build(input_shape)
    # The attention layer has no variables before its first call: swap it for the same
    # configuration with seeded probability dropout.
    config = self._attention_layer.get_config()
    for unbuilt in ("query_shape", "key_shape", "value_shape"):
      config.pop(unbuilt, None)
    self._attention_layer = _SeededAttention(**config)
    self._attention_dropout = SeededDropout(self._attention_dropout_rate,
                                            name="attention_dropout")
    self._inner_dropout_layer = SeededDropout(self._inner_dropout, name="inner_dropout")
    self._output_dropout = SeededDropout(self._output_dropout_rate, name="output_dropout")
    # Unbuilt too: the same LayerNorms with the written-out gradient.
    self._attention_layer_norm = LayerNorm.from_config(self._attention_layer_norm.get_config())
    self._output_layer_norm = LayerNorm.from_config(self._output_layer_norm.get_config())
    self._intermediate_dense = EinsumDense.from_config(self._intermediate_dense.get_config())
    self._output_dense = EinsumDense.from_config(self._output_dense.get_config())
    # Model Garden runs the activation layer in float32 under mixed bfloat16: a cast of the
    # [tokens, 4H] activations to float32 and back around it, forward and backward. GELU
    # (exact_gelu) computes in float32 inside and rounds once to its input's dtype, so in
    # the block's own dtype it gives the same values, bit for bit, without the four casts.
    self._intermediate_activation_layer = tf_keras.layers.Activation(
        self._inner_activation, dtype=self.dtype_policy, name="activation")

  def call(self, inputs, output_range=None):
    if (fused.serving() is not None and output_range is None
        and serving_form.applies(self, inputs)):
      return serving_form.block_call(self, inputs)
    return super().call(inputs, output_range=output_range)

  def get_config(self):
    config = super().get_config()
    # Model Garden keeps the activation as given; a function goes in by its registered name.
    if callable(config["inner_activation"]):
      config["inner_activation"] = tf_keras.saving.get_registered_name(
          config["inner_activation"])
    return config


def transformer_block(hidden_size: int, num_heads: int, intermediate_size: int,
                      dropout_rate: float, attention_dropout_rate: float,
                      initializer_range: float, layer_norm_eps: float,
                      name: str) -> tf_keras.layers.Layer:
  """A post-LayerNorm BERT block (attention -> add & norm -> FFN -> add & norm)."""
  del hidden_size  # taken from the input by the block
  return ElectraTransformerBlock(
      num_attention_heads=num_heads,
      inner_dim=intermediate_size,
      inner_activation=exact_gelu,
      output_dropout=dropout_rate,
      attention_dropout=attention_dropout_rate,
      kernel_initializer=truncated_normal(initializer_range),
      norm_first=False,
      norm_epsilon=layer_norm_eps,
      name=name)
