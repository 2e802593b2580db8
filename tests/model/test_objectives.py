"""The ablation objectives and sharing modes: losses on hand-built inputs, gradients, folds."""

import math

import numpy as np
import pytest
import tensorflow as tf

from electra_tf import features as F
from electra_tf.config import ConfigError, EncoderConfig, PretrainConfig
from electra_tf.model import flops, networks, rtd
from electra_tf.model.layers import GDESEmbeddings
from electra_tf.model.pretrainer import STAGE_DISCRIMINATOR, ElectraPretrainer

ENCODER = EncoderConfig(vocab_size=50, hidden_size=32, num_layers=1, num_heads=2,
                        intermediate_size=64, embedding_size=16)


def _config(**changes):
  values = dict(model=ENCODER, generator_fraction=0.5, max_seq_length=8,
                max_predictions_per_seq=2, batch_size=2, num_train_steps=10, warmup_steps=0)
  values.update(changes)
  return PretrainConfig(**values)


def _batch():
  ids = np.array([[2, 10, 11, 12, 13, 3, 0, 0], [2, 20, 21, 22, 23, 24, 25, 3]], np.int32)
  mask = (ids > 0).astype(np.int32)
  positions = np.array([[1, 3], [2, 5]], np.int32)
  weights = np.array([[1.0, 1.0], [1.0, 0.0]], np.float32)
  masked = ids.copy()
  for row in range(2):
    for slot in range(2):
      if weights[row, slot]:
        masked[row, positions[row, slot]] = 4
  return {F.INPUT_IDS: ids, F.INPUT_MASK: mask, F.SEGMENT_IDS: np.zeros_like(ids),
          F.MASKED_INPUT_IDS: masked, F.MASKED_LM_POSITIONS: positions,
          F.MASKED_LM_IDS: np.take_along_axis(ids, positions, 1), F.MASKED_LM_WEIGHTS: weights}


def test_position_mask_marks_real_masked_slots_only():
  mask = rtd.position_mask(tf.constant([[1, 3], [2, 5]]), tf.constant([[1.0, 1.0], [1.0, 0.0]]),
                           8).numpy()
  expected = np.zeros([2, 8], np.float32)
  expected[0, [1, 3]] = 1
  expected[1, 2] = 1  # the slot with weight 0 (position 5) does not count
  np.testing.assert_array_equal(mask, expected)


def test_electra_15_detector_loss_covers_masked_positions_only():
  model = ElectraPretrainer(_config(objective="electra_15"))
  batch = {k: tf.constant(v) for k, v in _batch().items()}
  outputs = model(batch, training=False)
  np.testing.assert_array_equal(outputs["disc_weights"].numpy().sum(1), [2, 1])
  # The loss is the mean sigmoid cross-entropy over exactly those three positions.
  ce = tf.nn.sigmoid_cross_entropy_with_logits(
      labels=tf.cast(outputs["labels"], tf.float32), logits=outputs["disc_logits"]).numpy()
  expected = (ce[0, 1] + ce[0, 3] + ce[1, 2]) / 3
  losses = model.compute_losses(outputs, batch)
  assert losses["disc_loss"].numpy() == pytest.approx(expected, rel=1e-5)
  full = ElectraPretrainer(_config(objective="electra"), model.generator, model.discriminator)
  weights = full(batch, training=False)["disc_weights"].numpy()
  assert weights.sum() == batch[F.INPUT_MASK].numpy().sum()


def test_copy_mechanism_loss_by_hand():
  # One sequence of two tokens over a 3-word vocabulary.
  logits = tf.constant([[[0.0, 1.0, 2.0], [1.0, 0.0, -1.0]]])
  copy_logits = tf.constant([[0.5, -1.0]])
  targets = tf.constant([[2, 1]])
  inputs = tf.constant([[2, 0]])  # first token kept (target == input), second replaced
  num, den = rtd.copy_mlm_loss_terms(logits, copy_logits, targets, inputs, tf.ones([1, 2]))

  def softmax(row):
    e = np.exp(np.array(row) - max(row))
    return e / e.sum()

  d0, d1 = 1 / (1 + math.exp(-0.5)), 1 / (1 + math.exp(1.0))
  p0 = d0 * 1.0 + (1 - d0) * softmax([0.0, 1.0, 2.0])[2]
  p1 = (1 - d1) * softmax([1.0, 0.0, -1.0])[1]  # the input (0) is not the target (1)
  assert num.numpy() == pytest.approx(-math.log(p0) - math.log(p1), rel=1e-5)
  assert den.numpy() == 2.0
  # The mixture's most probable token: the input for the first (copy wins), argmax for the
  # second.
  predictions = rtd.copy_mlm_predictions(logits, copy_logits, inputs).numpy()
  np.testing.assert_array_equal(predictions, [[2, 0]])


def test_copy_mechanism_gradient_is_finite_for_confident_copies():
  logits = tf.Variable([[[0.0, 50.0, -50.0]]])
  copy_logits = tf.Variable([[40.0]])
  with tf.GradientTape() as tape:
    num, _ = rtd.copy_mlm_loss_terms(logits, copy_logits, tf.constant([[2]]), tf.constant([[2]]),
                                     tf.ones([1, 1]))
  grads = tape.gradient(num, [logits, copy_logits])
  assert np.isfinite(num.numpy()) and all(np.all(np.isfinite(g.numpy())) for g in grads)


@pytest.mark.parametrize("objective", ["replace_mlm", "all_tokens_mlm"])
def test_mlm_objectives_read_samples_not_mask_tokens(objective):
  model = ElectraPretrainer(_config(objective=objective))
  batch = {k: tf.constant(v) for k, v in _batch().items()}
  outputs = model(batch, training=False)
  corrupted = outputs["corrupted_ids"].numpy()
  # The second network reads the original tokens with the generator's samples at the real
  # masked slots, never the generator's [MASK]ed input (a sample may itself be [MASK]).
  expected = batch[F.INPUT_IDS].numpy().copy()
  samples = outputs["samples"].numpy()
  for row, slot in zip(*np.nonzero(batch[F.MASKED_LM_WEIGHTS].numpy())):
    expected[row, batch[F.MASKED_LM_POSITIONS].numpy()[row, slot]] = samples[row, slot]
  np.testing.assert_array_equal(corrupted, expected)
  losses = model.compute_losses(outputs, batch)
  assert losses["loss"].numpy() == pytest.approx(
      losses["gen_loss"].numpy() + losses["mlm_loss"].numpy(), rel=1e-6)
  if objective == "replace_mlm":  # the targets are the originals at the masked slots
    np.testing.assert_array_equal(outputs["mlm_targets"], batch[F.MASKED_LM_IDS])
  else:  # every real token, the originals
    np.testing.assert_array_equal(outputs["mlm_targets"], batch[F.INPUT_IDS])
    np.testing.assert_array_equal(outputs["mlm_weights"], batch[F.INPUT_MASK])


def test_gdes_gradients_generator_loss_reaches_table_discriminator_loss_only_delta():
  model = ElectraPretrainer(_config(embedding_sharing="gdes"))
  embeddings = model.discriminator.encoder.embeddings
  assert isinstance(embeddings, GDESEmbeddings)
  table, delta = model.generator.embeddings.word_embeddings, embeddings.word_embeddings_delta
  assert not np.any(delta.numpy())  # zero-initialised
  batch = {k: tf.constant(v) for k, v in _batch().items()}
  with tf.GradientTape(persistent=True) as tape:
    losses = model.compute_losses(model(batch, training=False), batch)
  gen_grads = tape.gradient(losses["gen_loss"], [table, delta])
  disc_grads = tape.gradient(losses["disc_loss"], [table, delta])
  assert gen_grads[0] is not None and np.any(tf.convert_to_tensor(gen_grads[0]).numpy())
  assert gen_grads[1] is None
  assert disc_grads[0] is None
  assert np.any(tf.convert_to_tensor(disc_grads[1]).numpy())
  # Position embeddings stay shared as under tying: both losses reach them.
  position = model.generator.embeddings.position_embeddings
  assert tape.gradient(losses["disc_loss"], position) is not None


def test_gdes_export_folds_the_delta():
  model = ElectraPretrainer(_config(embedding_sharing="gdes"))
  delta = model.discriminator.encoder.embeddings.word_embeddings_delta
  delta.assign(tf.random.normal(delta.shape, seed=1))
  batch = {k: tf.constant(v) for k, v in _batch().items()}
  inputs = {k: batch[k] for k in (F.INPUT_IDS, F.INPUT_MASK, F.SEGMENT_IDS)}
  standalone = networks.standalone_discriminator(model.discriminator)
  assert not isinstance(standalone.encoder.embeddings, GDESEmbeddings)
  np.testing.assert_allclose(
      standalone.encoder.embeddings.word_embeddings.numpy(),
      model.generator.embeddings.word_embeddings.numpy() + delta.numpy(), rtol=1e-6)
  np.testing.assert_allclose(standalone(inputs).numpy(), model.discriminator(inputs).numpy(),
                             atol=1e-5)


def test_sharing_modes_share_what_they_say():
  tied = ElectraPretrainer(_config())
  assert tied.generator.embeddings is tied.discriminator.encoder.embeddings
  none = ElectraPretrainer(_config(embedding_sharing="none"))
  gen_vars = {v.ref() for v in none.generator.trainable_variables}
  assert not gen_vars & {v.ref() for v in none.discriminator.trainable_variables}
  everything = ElectraPretrainer(_config(generator_fraction=1.0, embedding_sharing="all"))
  assert everything.generator.encoder is everything.discriminator.encoder
  with pytest.raises(ConfigError, match="generator_fraction=1.0"):
    _config(embedding_sharing="all")


def test_two_stage_freezes_generator_and_starts_discriminator_from_it():
  from electra_tf.training.optimizer import create_optimizer

  config = _config(generator_fraction=1.0, embedding_sharing="none", two_stage_steps=2,
                   steps_per_execution=1)
  model = ElectraPretrainer(config)
  model.compile(optimizer=create_optimizer("adamw", 1e-2))
  data = tf.data.Dataset.from_tensors(_batch()).repeat()
  disc_before = [v.numpy() for v in model.discriminator.trainable_variables]
  model.fit(data, steps_per_epoch=2, verbose=0)
  # Stage one trained the generator alone.
  for before, var in zip(disc_before, model.discriminator.trainable_variables):
    np.testing.assert_array_equal(before, var.numpy())
  model.enter_stage(STAGE_DISCRIMINATOR, 2)
  for gen, disc in zip(model.generator.encoder.weights, model.discriminator.encoder.weights):
    np.testing.assert_array_equal(gen.numpy(), disc.numpy())
  gen_before = [v.numpy() for v in model.generator.trainable_variables]
  model.fit(data, steps_per_epoch=2, verbose=0)
  for before, var in zip(gen_before, model.generator.trainable_variables):
    np.testing.assert_array_equal(before, var.numpy())
  assert any(np.any(a != b.numpy()) for a, b in
             zip(disc_before, model.discriminator.trainable_variables))


def test_flops_by_objective():
  electra = _config()
  L, P, B = 8, 2, 2
  gen = flops.encoder_forward_flops(electra.generator, L) + flops.generator_head_flops(
      electra.generator, P)
  disc = flops.encoder_forward_flops(ENCODER, L)
  assert flops.train_step_flops(electra) == 3 * B * (
      gen + disc + flops.discriminator_head_flops(ENCODER, L))
  assert flops.train_step_flops(_config(objective="electra_15")) == flops.train_step_flops(electra)
  assert flops.train_step_flops(_config(objective="replace_mlm")) == 3 * B * (
      gen + disc + flops.generator_head_flops(ENCODER, P))
  assert flops.train_step_flops(_config(objective="all_tokens_mlm")) == 3 * B * (
      gen + disc + flops.generator_head_flops(ENCODER, L) + 2 * L * ENCODER.hidden_size)
  two = _config(generator_fraction=1.0, embedding_sharing="none", two_stage_steps=4)
  g = flops.encoder_forward_flops(ENCODER, L) + flops.generator_head_flops(ENCODER, P)
  d = disc + flops.discriminator_head_flops(ENCODER, L)
  # Stage one trains the generator (3x); stage two runs it forward only (1x).
  assert flops.run_flops(two) == 4 * 3 * B * g + 6 * B * (g + 3 * d)
