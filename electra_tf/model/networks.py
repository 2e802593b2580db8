"""Generator and Discriminator models, built on one shared embedding layer."""

from __future__ import annotations

import tensorflow as tf
import tf_keras

from electra_tf import features as F
from electra_tf.config import EncoderConfig, PretrainConfig
from electra_tf.model.encoder import ElectraEncoder, make_embeddings
from electra_tf.model.heads import DiscriminatorHead, GeneratorHead, gather_positions


def _as_config(config: EncoderConfig | dict) -> EncoderConfig:
  return EncoderConfig.from_dict(config) if isinstance(config, dict) else config


class Generator(tf_keras.Model):
  """The small masked-LM: encoder + MLM head tied to the shared word embeddings.

  Args:
    config: the generator's encoder sizes.
    embeddings: the shared ElectraEmbeddings (made here when None).

  Call args:
    inputs: dict of int32 [B, L] `input_ids` (already masked), `input_mask`, `segment_ids`,
      and optionally int32 [B, P] `masked_lm_positions`.

  Returns:
    float32 logits [B, P, V] at the masked positions, or [B, L, V] when no positions
    are given (full-sequence MLM, as Hugging Face's ElectraForMaskedLM).
  """

  def __init__(self, config: EncoderConfig | dict, embeddings=None, **kwargs):
    kwargs.setdefault("name", "generator")
    super().__init__(**kwargs)
    self.config = _as_config(config)
    embeddings = embeddings if embeddings is not None else make_embeddings(self.config)
    self.encoder = ElectraEncoder(self.config, embeddings, name="encoder")
    self.head = GeneratorHead(embeddings, self.config.initializer_range,
                              self.config.layer_norm_eps, name="generator_predictions")

  @property
  def embeddings(self):
    return self.encoder.embeddings

  def call(self, inputs, training=None):
    hidden = self.encoder(inputs, training=training)
    if F.MASKED_LM_POSITIONS in inputs:
      hidden = gather_positions(hidden, inputs[F.MASKED_LM_POSITIONS])
    return self.head(hidden)

  def get_config(self):
    return {"config": self.config.to_dict(), "name": self.name}


class Discriminator(tf_keras.Model):
  """The replaced-token detector: encoder + per-token head. Fine-tuning starts from it.

  Args:
    config: the discriminator's encoder sizes.
    embeddings: the shared ElectraEmbeddings (made here when None).

  Call args:
    inputs: dict of int32 [B, L] `input_ids`, `input_mask`, `segment_ids`.

  Returns:
    float32 logits [B, L]: > 0 means "replaced".
  """

  def __init__(self, config: EncoderConfig | dict, embeddings=None, **kwargs):
    kwargs.setdefault("name", "discriminator")
    super().__init__(**kwargs)
    self.config = _as_config(config)
    embeddings = embeddings if embeddings is not None else make_embeddings(self.config)
    self.encoder = ElectraEncoder(self.config, embeddings, name="encoder")
    self.head = DiscriminatorHead(self.config.hidden_size, self.config.initializer_range,
                                  name="discriminator_predictions")

  @property
  def embeddings(self):
    return self.encoder.embeddings

  def call(self, inputs, training=None):
    return self.head(self.encoder(inputs, training=training))

  def get_config(self):
    return {"config": self.config.to_dict(), "name": self.name}


def dummy_inputs(batch_size: int = 2, seq_len: int = 8, num_predictions: int = 2):
  """Zero inputs that build every variable of a Generator or Discriminator."""
  ids = tf.zeros([batch_size, seq_len], tf.int32)
  return {F.INPUT_IDS: ids, F.INPUT_MASK: tf.ones_like(ids), F.SEGMENT_IDS: ids,
          F.MASKED_LM_POSITIONS: tf.zeros([batch_size, num_predictions], tf.int32)}


def build_networks(config: PretrainConfig) -> tuple[Generator, Discriminator | None]:
  """The generator and discriminator of `config`, sharing one embedding layer, built.

  With objective "mlm" (the BERT baseline) the generator has the discriminator's size
  and there is no discriminator.
  """
  if config.objective == "mlm":
    generator = Generator(config.model)
    generator(dummy_inputs())
    return generator, None
  embeddings = make_embeddings(config.model)
  generator = Generator(config.generator, embeddings)
  discriminator = Discriminator(config.model, embeddings)
  inputs = dummy_inputs()
  generator(inputs)
  discriminator(inputs)
  return generator, discriminator
