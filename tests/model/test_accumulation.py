"""Gradient accumulation: k micro-batches give the update of one step on the k-times batch."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from accumulation_runs import (
  assert_same_update,
  batches,
  fit,
  initial_weights,
  one_device,
  reference,
  with_dropout,
)
from testing_utils import make_batch

from electra_tf import features as F
from electra_tf.model import accumulation
from electra_tf.model.pretrainer import STAGE_DISCRIMINATOR, STAGE_GENERATOR, ElectraPretrainer
from electra_tf.training.optimizer import create_optimizer


def _tensors(batch):
  return {k: tf.constant(v) for k, v in batch.items()}


def test_split_gives_consecutive_rows():
  features = {"x": tf.reshape(tf.range(24), [6, 4])}
  parts = accumulation.split(features, 3)["x"].numpy()
  assert parts.shape == (3, 2, 4)
  np.testing.assert_array_equal(parts[1], features["x"].numpy()[2:4])


def test_a_micro_batch_draws_what_its_rows_of_the_whole_batch_draw(micro_config):
  """Samples and (fused) dropout masks of micro-batch j are those of rows j*b.. of the batch."""
  config = with_dropout(micro_config.replace(batch_size=8))
  model = ElectraPretrainer(config)
  whole = _tensors(make_batch(config, seed=3))
  step = tf.constant(7, tf.int64)
  expected = model.forward(whole, step, training=True)
  for index in range(4):
    part = {k: v[2 * index:2 * index + 2] for k, v in whole.items()}
    got = model.forward(part, step, training=True, micro_batch=(tf.constant(index), 4))
    rows = slice(2 * index, 2 * index + 2)
    np.testing.assert_array_equal(got["samples"], expected["samples"][rows])
    # Equal logits need equal dropout masks in both networks.
    np.testing.assert_allclose(got["disc_logits"], expected["disc_logits"][rows], rtol=1e-5,
                               atol=1e-6)
  # Without the micro-batch index the second micro-batch would draw the first rows' samples.
  second = {k: v[2:4] for k, v in whole.items()}
  plain = model.forward(second, step, training=False)
  placed = model.forward(second, step, training=False, micro_batch=(tf.constant(1), 4))
  assert not np.array_equal(plain["samples"], placed["samples"])


def _accumulated_and_whole(config, features, stage=None):
  model = ElectraPretrainer(config)
  model.compile(optimizer=create_optimizer("adamw", 1e-3))
  if stage:
    model.stage = stage
  step = tf.constant(2, tf.int64)
  _, losses, whole = model.compute_gradients(features, step)
  summed, accumulated = accumulation.accumulated_gradients(model, features, step)
  return losses, whole, summed, accumulated


@pytest.mark.parametrize("objective,stage", [
    ("electra", None), ("electra_15", None), ("replace_mlm", None), ("all_tokens_mlm", None),
    ("mlm", None), ("electra", STAGE_GENERATOR), ("electra", STAGE_DISCRIMINATOR)])
def test_losses_are_normalised_over_the_whole_batch(micro_config, objective, stage):
  """Rows with unequal lengths and masked counts: per-micro-batch means would differ."""
  changes = {"objective": objective, "batch_size": 8}
  if stage:
    changes.update(generator_fraction=1.0, embedding_sharing="none", two_stage_steps=5)
  config = micro_config.replace(**changes, gradient_accumulation_steps=4)
  features = _tensors(make_batch(config, seed=5))
  weights = features[F.MASKED_LM_WEIGHTS].numpy().reshape(4, 2, -1).sum((1, 2))
  assert len(set(weights)) > 1  # the micro-batches hold different numbers of masked tokens
  losses, whole, summed, accumulated = _accumulated_and_whole(config, features, stage)
  assert set(summed) == set(losses)
  for name, value in losses.items():
    np.testing.assert_allclose(summed[name], value, rtol=1e-5, err_msg=name)
  assert len(accumulated) == len(whole)
  for a, w in zip(accumulated, whole):
    np.testing.assert_allclose(a, w, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("optimizer,k", [("adamw", 4), ("lamb", 2)])
def test_one_device_with_dropout_matches_the_whole_batch(micro_config, optimizer, k):
  """Fused dropout masks count elements per example: micro-batches draw the batch's masks."""
  config = with_dropout(micro_config.replace(batch_size=8))
  expected = reference(config, optimizer)
  candidate = fit(config.replace(gradient_accumulation_steps=k), batches(config),
                  one_device(), optimizer)
  assert_same_update(expected, candidate)
  # The weights moved: the comparison is not between two untouched models.
  assert not np.allclose(expected[0].trainable_weights[0].numpy(),
                         initial_weights(config)[0])


def test_xla_compiled_step_accumulates_like_the_whole_batch(micro_config):
  """The TPU code path: the whole step under XLA (Philox dropout, here off)."""
  config = micro_config.replace(batch_size=8)
  expected = reference(config, "adamw")  # not compiled: one XLA compile is enough here
  candidate = fit(config.replace(gradient_accumulation_steps=2), batches(config),
                  one_device(), "adamw", jit_compile=True)
  assert_same_update(expected, candidate)


def test_float16_loss_scaling_accumulates_like_the_whole_batch(micro_config):
  """Each micro-batch's loss is scaled, the summed gradients unscaled once; an overflow in
  any micro-batch skips the update. float16 sums a weight's gradient over each micro-batch's
  rows (fewer than the batch's), so from the default scale (2**15) the two can overflow at
  different steps; from one where neither does they take the same steps."""
  config = micro_config.replace(batch_size=8, precision="mixed_float16")
  tf_keras.mixed_precision.set_global_policy("mixed_float16")
  try:
    runs = [fit(config.replace(gradient_accumulation_steps=k), batches(config),
                one_device(), "adamw", loss_scale=2**8) for k in (1, 2)]
    overflowing = fit(config.replace(gradient_accumulation_steps=2), batches(config),
                      one_device(), "adamw", loss_scale=2**40, steps=2)
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")
  for model, _ in runs:
    assert float(model.optimizer.loss_scale) == 2**8  # no step skipped
  # float16 activations round differently in smaller matmuls: float16-sized tolerances.
  assert_same_update(*runs, rtol=2e-3, atol=2e-4)
  model, _ = overflowing
  assert float(model.optimizer.loss_scale) == 2**38  # both updates skipped
  for var, start in zip(model.trainable_weights, initial_weights(config)):
    np.testing.assert_array_equal(var.numpy(), start, err_msg=var.name)
