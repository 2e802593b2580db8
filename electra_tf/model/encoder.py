"""ElectraEncoder: shared embeddings -> optional E->H projection -> transformer blocks."""

from __future__ import annotations

import tensorflow as tf
import tf_keras

from electra_tf import features as F
from electra_tf.config import EncoderConfig
from electra_tf.model.layers import ElectraEmbeddings, transformer_block, truncated_normal


def make_embeddings(config: EncoderConfig, name: str = "embeddings") -> ElectraEmbeddings:
  """The embedding layer for `config`; pass the same instance to both encoders to tie them."""
  return ElectraEmbeddings(
      vocab_size=config.vocab_size, embedding_size=config.embedding_size,
      max_position_embeddings=config.max_position_embeddings,
      type_vocab_size=config.type_vocab_size, dropout_rate=config.dropout_rate,
      initializer_range=config.initializer_range, layer_norm_eps=config.layer_norm_eps,
      name=name)


class ElectraEncoder(tf_keras.layers.Layer):
  """A BERT-style encoder that reads from a (possibly shared) ElectraEmbeddings.

  Args:
    config: the encoder's sizes.
    embeddings: the embedding layer; shared between generator and discriminator.

  Call args:
    inputs: dict with int32 [B, L] `input_ids`, `input_mask`, `segment_ids`.
    output_hidden_states: also return the embedding output and every block's output.

  Returns:
    [B, L, H] sequence output, or (sequence output, list of num_layers + 1 [B, L, H]).

  Example:
    >>> enc = ElectraEncoder(EncoderConfig(hidden_size=64, num_layers=2, num_heads=2,
    ...                                    intermediate_size=256, embedding_size=32),
    ...                      make_embeddings(...))
    >>> enc({"input_ids": ids, "input_mask": mask, "segment_ids": seg}).shape  # [B, L, 64]
  """

  def __init__(self, config: EncoderConfig | dict, embeddings: ElectraEmbeddings | None = None,
               **kwargs):
    super().__init__(**kwargs)
    if isinstance(config, dict):
      config = EncoderConfig.from_dict(config)
    self.config = config
    self.embeddings = embeddings if embeddings is not None else make_embeddings(config)
    self.embeddings_project = None
    if config.embedding_size != config.hidden_size:
      self.embeddings_project = tf_keras.layers.Dense(
          config.hidden_size, kernel_initializer=truncated_normal(config.initializer_range),
          name="embeddings_project")
    self.blocks = [
        transformer_block(config.hidden_size, config.num_heads, config.intermediate_size,
                          config.dropout_rate, config.attention_dropout_rate,
                          config.initializer_range, config.layer_norm_eps, name=f"layer_{i}")
        for i in range(config.num_layers)
    ]

  def call(self, inputs: dict[str, tf.Tensor], training=None, output_hidden_states=False):
    hidden = self.embeddings(inputs[F.INPUT_IDS], inputs[F.SEGMENT_IDS], training=training)
    if self.embeddings_project is not None:
      hidden = self.embeddings_project(hidden)
    # [B, 1, L]: every query position attends to the same non-pad keys.
    attention_mask = tf.cast(inputs[F.INPUT_MASK], hidden.dtype)[:, tf.newaxis, :]
    all_hidden = [hidden]
    for block in self.blocks:
      hidden = block([hidden, attention_mask], training=training)
      all_hidden.append(hidden)
    if output_hidden_states:
      return hidden, all_hidden
    return hidden

  def get_config(self):
    config = super().get_config()
    config.update(config=self.config.to_dict())
    return config
