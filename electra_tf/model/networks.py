"""Generator and Discriminator models, built on one shared embedding layer."""

from __future__ import annotations

import tensorflow as tf
import tf_keras

from electra_tf import features as F
from electra_tf.config import EncoderConfig, PretrainConfig
from electra_tf.model.encoder import ElectraEncoder, make_embeddings
from electra_tf.model.heads import DiscriminatorHead, GeneratorHead, gather_positions
from electra_tf.model.layers import GDESEmbeddings, truncated_normal


def _as_config(config: EncoderConfig | dict) -> EncoderConfig:
  return EncoderConfig.from_dict(config) if isinstance(config, dict) else config


class Generator(tf_keras.Model):
  """The small masked-LM: encoder + MLM head tied to the shared word embeddings.

  Args:
    config: the generator's encoder sizes.
    embeddings: the shared ElectraEmbeddings (made here when None).
    encoder: an ElectraEncoder to use instead of a new one (sharing every weight).

  Call args:
    inputs: dict of int32 [B, L] `input_ids` (already masked), `input_mask`, `segment_ids`,
      and optionally int32 [B, P] `masked_lm_positions`.

  Returns:
    float32 logits [B, P, V] at the masked positions, or [B, L, V] when no positions
    are given (full-sequence MLM, as Hugging Face's ElectraForMaskedLM).
  """

  def __init__(self, config: EncoderConfig | dict, embeddings=None, encoder=None, **kwargs):
    kwargs.setdefault("name", "generator")
    super().__init__(**kwargs)
    self.config = _as_config(config)
    self.encoder = encoder or _encoder(self.config, embeddings)
    embeddings = self.encoder.embeddings
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
    embeddings: the shared ElectraEmbeddings or GDESEmbeddings (made here when None).
    encoder: an ElectraEncoder to use instead of a new one (sharing every weight).

  Call args:
    inputs: dict of int32 [B, L] `input_ids`, `input_mask`, `segment_ids`.

  Returns:
    float32 logits [B, L]: > 0 means "replaced".
  """

  def __init__(self, config: EncoderConfig | dict, embeddings=None, encoder=None, **kwargs):
    kwargs.setdefault("name", "discriminator")
    super().__init__(**kwargs)
    self.config = _as_config(config)
    self.encoder = encoder or _encoder(self.config, embeddings)
    self.head = DiscriminatorHead(self.config.hidden_size, self.config.initializer_range,
                                  name="discriminator_predictions")

  @property
  def embeddings(self):
    return self.encoder.embeddings

  def call(self, inputs, training=None):
    return self.head(self.encoder(inputs, training=training))

  def get_config(self):
    return {"config": self.config.to_dict(), "name": self.name}


class AllTokensPredictor(Generator):
  """All-Tokens MLM: predicts every input token's identity with a copy mechanism.

  A Generator (encoder + tied MLM head) applied at every position, plus a per-token copy
  logit c = w . h + b (the paper's D = sigmoid(c)): the model's distribution over the
  vocabulary is D * onehot(input token) + (1 - D) * softmax(MLM logits).

  Call args:
    inputs: dict of int32 [B, L] `input_ids`, `input_mask`, `segment_ids`.

  Returns:
    (float32 MLM logits [B, L, V], float32 copy logits [B, L]).
  """

  def __init__(self, config: EncoderConfig | dict, embeddings=None, encoder=None, **kwargs):
    kwargs.setdefault("name", "all_tokens_predictor")
    super().__init__(config, embeddings, encoder, **kwargs)
    self.copy_head = tf_keras.layers.Dense(
        1, kernel_initializer=truncated_normal(self.config.initializer_range),
        name="copy_predictions")

  def call(self, inputs, training=None):
    hidden = self.encoder(inputs, training=training)
    copy_logits = tf.cast(tf.squeeze(self.copy_head(hidden), -1), tf.float32)
    return self.head(hidden), copy_logits


def _encoder(config: EncoderConfig, embeddings) -> ElectraEncoder:
  embeddings = embeddings if embeddings is not None else make_embeddings(config)
  return ElectraEncoder(config, embeddings, name="encoder")


def dummy_inputs(batch_size: int = 2, seq_len: int = 8, num_predictions: int = 2):
  """Zero inputs that build every variable of a Generator or Discriminator."""
  ids = tf.zeros([batch_size, seq_len], tf.int32)
  return {F.INPUT_IDS: ids, F.INPUT_MASK: tf.ones_like(ids), F.SEGMENT_IDS: ids,
          F.MASKED_LM_POSITIONS: tf.zeros([batch_size, num_predictions], tf.int32)}


# The network trained beside the generator, by objective. For the masked-LM ablations it
# is an MLM network of the discriminator's size; it is still the one fine-tuned.
_SECOND_NETWORK = {"electra": Discriminator, "electra_15": Discriminator,
                   "replace_mlm": Generator, "all_tokens_mlm": AllTokensPredictor}


def build_networks(config: PretrainConfig) -> tuple[Generator, tf_keras.Model | None]:
  """The generator and the second network of `config`, sharing as it says, built.

  With objective "mlm" (the BERT baseline) the generator has the discriminator's size
  and there is no second network. `embedding_sharing`: "tied" gives both one
  ElectraEmbeddings; "none" gives each its own; "all" gives both one ElectraEncoder;
  "gdes" gives the second network a GDESEmbeddings over the generator's.
  """
  if config.objective == "mlm":
    generator = Generator(config.model)
    generator(dummy_inputs())
    return generator, None
  sharing = config.embedding_sharing
  generator = Generator(config.generator)
  second = _SECOND_NETWORK[config.objective]
  name = "discriminator"
  if sharing == "all":
    discriminator = second(config.model, encoder=generator.encoder, name=name)
  elif sharing == "none":
    discriminator = second(config.model, name=name)
  elif sharing == "gdes":
    embeddings = GDESEmbeddings(generator.embeddings, name="embeddings")
    discriminator = second(config.model, embeddings, name=name)
  else:
    discriminator = second(config.model, generator.embeddings, name=name)
  inputs = dummy_inputs()
  generator(inputs)
  discriminator(inputs)
  return generator, discriminator


def standalone_discriminator(discriminator: tf_keras.Model) -> tf_keras.Model:
  """`discriminator` with weights of its own: for exports and fine-tuning.

  A network whose embeddings are GDESEmbeddings is copied into the same class with plain
  embeddings whose word table is shared + delta (the fold); any other network is
  returned as it is (its shared variables are its own as far as a checkpoint goes).
  """
  embeddings = discriminator.encoder.embeddings
  if not isinstance(embeddings, GDESEmbeddings):
    return discriminator
  copy = type(discriminator)(discriminator.config, name=discriminator.name)
  copy(dummy_inputs())
  source = [v for v in discriminator.weights if v is not embeddings.word_embeddings_delta]
  if len(source) != len(copy.weights):
    raise ValueError(f"cannot fold {discriminator.name}: {len(source)} weights vs "
                     f"{len(copy.weights)}")
  for target, value in zip(copy.weights, source):
    if value is embeddings.shared.word_embeddings:
      value = embeddings.folded_word_embeddings()
    target.assign(value)
  return copy
