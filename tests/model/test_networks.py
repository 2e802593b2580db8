"""Shapes, shared embeddings, config round trips and gradient flow of the networks."""

import numpy as np
import tensorflow as tf
import tf_keras
from testing_utils import make_batch

from electra_tf import features as F
from electra_tf.config import EncoderConfig
from electra_tf.model.encoder import ElectraEncoder
from electra_tf.model.networks import Discriminator, Generator, build_networks
from electra_tf.model.pretrainer import ElectraPretrainer


def _inputs(batch, ids_key=F.INPUT_IDS):
  return {F.INPUT_IDS: tf.constant(batch[ids_key]), F.INPUT_MASK: tf.constant(batch[F.INPUT_MASK]),
          F.SEGMENT_IDS: tf.constant(batch[F.SEGMENT_IDS])}


def test_shapes_and_projection(micro_config, micro_batch):
  gen, disc = build_networks(micro_config)
  B, L = micro_batch[F.INPUT_IDS].shape
  P = micro_config.max_predictions_per_seq
  inputs = _inputs(micro_batch)
  assert disc(inputs).shape == (B, L)
  assert gen({**inputs, F.MASKED_LM_POSITIONS: micro_batch[F.MASKED_LM_POSITIONS]}).shape == (
      B, P, micro_config.model.vocab_size)
  assert gen(inputs).shape == (B, L, micro_config.model.vocab_size)  # full-sequence MLM
  # E (4) != H (8, and 4 for the generator): both encoders project, from the same E.
  assert disc.encoder.embeddings_project.kernel.shape == (4, 8)
  assert micro_config.generator.hidden_size == 4
  assert gen.encoder.embeddings_project is None  # generator H equals E here: no projection


def test_embeddings_are_one_set_of_variables(micro_config):
  gen, disc = build_networks(micro_config)
  assert gen.embeddings is disc.embeddings
  model = ElectraPretrainer(micro_config, gen, disc)
  names = [v.name for v in model.trainable_variables]
  assert len(names) == len(set(id(v) for v in model.trainable_variables))
  assert sum("word_embeddings" in n for n in names) == 1
  assert sum("position_embeddings" in n for n in names) == 1


def test_embeddings_get_gradient_from_both_losses(micro_config, micro_batch):
  model = ElectraPretrainer(micro_config)
  features = {k: tf.constant(v) for k, v in micro_batch.items()}
  emb = model.generator.embeddings
  tables = [emb.word_embeddings, emb.position_embeddings, emb.token_type_embeddings]
  with tf.GradientTape(persistent=True) as tape:
    losses = model.compute_losses(model.forward(features, tf.constant(0), training=True),
                                  features)
  for table in tables:
    g_gen = tf.convert_to_tensor(tape.gradient(losses["gen_loss"], table))
    g_disc = tf.convert_to_tensor(tape.gradient(losses["disc_loss"], table))
    g_total = tf.convert_to_tensor(tape.gradient(losses["loss"], table))
    assert float(tf.norm(g_gen)) > 0 and float(tf.norm(g_disc)) > 0
    np.testing.assert_allclose(g_total, g_gen + micro_config.disc_weight * g_disc, atol=1e-5)
  # No gradient reaches the generator's own layers from the discriminator loss.
  gen_only = model.generator.encoder.blocks[0].trainable_variables
  assert all(tape.gradient(losses["disc_loss"], v) is None for v in gen_only)


def test_padding_does_not_change_real_token_outputs(micro_config):
  _, disc = build_networks(micro_config)
  batch = make_batch(micro_config, seed=3, batch_size=1)
  n = int(batch[F.INPUT_MASK].sum())
  short = {k: batch[k][:, :n] for k in (F.INPUT_IDS, F.INPUT_MASK, F.SEGMENT_IDS)}
  full = disc(_inputs(batch)).numpy()[:, :n]
  np.testing.assert_allclose(disc(short).numpy(), full, atol=1e-5)


def test_get_config_round_trip(micro_config, micro_batch):
  gen, disc = build_networks(micro_config)
  for model, cls in ((gen, Generator), (disc, Discriminator)):
    clone = cls.from_config(model.get_config())
    clone(_inputs(micro_batch))
    assert clone.config == model.config
    assert [v.shape for v in clone.weights] == [v.shape for v in model.weights]
  encoder = disc.encoder
  restored = ElectraEncoder.from_config(encoder.get_config())
  assert restored.config == encoder.config and restored.name == encoder.name


def test_hidden_size_not_divisible_by_heads_is_a_clear_error():
  try:
    EncoderConfig(hidden_size=30, num_heads=4)
  except ValueError as exc:
    assert "not divisible by num_heads" in str(exc)
  else:
    raise AssertionError("no error")


def test_mixed_precision_keeps_logits_float32(micro_config, micro_batch):
  tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    gen, disc = build_networks(micro_config)
    assert disc.encoder.blocks[0].compute_dtype == "bfloat16"
    assert disc(_inputs(micro_batch)).dtype == tf.float32
    assert gen(_inputs(micro_batch)).dtype == tf.float32
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")
