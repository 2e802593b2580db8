"""Gradient accumulation: k micro-batches give the update of one step on the k-times batch."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from testing_utils import make_batch

from electra_tf import features as F
from electra_tf.model import accumulation
from electra_tf.model.pretrainer import STAGE_DISCRIMINATOR, STAGE_GENERATOR, ElectraPretrainer
from electra_tf.training.optimizer import WarmupLinearDecay, create_optimizer

STEPS = 4


def _tensors(batch):
  return {k: tf.constant(v) for k, v in batch.items()}


def _with_dropout(config):
  return config.replace(**{"model.dropout_rate": 0.1, "model.attention_dropout_rate": 0.1})


def test_split_gives_consecutive_rows():
  features = {"x": tf.reshape(tf.range(24), [6, 4])}
  parts = accumulation.split(features, 3)["x"].numpy()
  assert parts.shape == (3, 2, 4)
  np.testing.assert_array_equal(parts[1], features["x"].numpy()[2:4])


def test_a_micro_batch_draws_what_its_rows_of_the_whole_batch_draw(micro_config):
  """Samples and (fused) dropout masks of micro-batch j are those of rows j*b.. of the batch."""
  config = _with_dropout(micro_config.replace(batch_size=8))
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


_INITIAL = {}


def _initial_weights(config):
  """The same starting point for every run of one model size."""
  if config.model.hidden_size not in _INITIAL:
    tf_keras.utils.set_random_seed(0)
    _INITIAL[config.model.hidden_size] = ElectraPretrainer(config).get_weights()
  return _INITIAL[config.model.hidden_size]


def _fit(config, batches, strategy, optimizer, jit_compile=False, steps=STEPS,
         loss_scale=None):
  """Weights and logged metrics after `steps` updates, one batch of `batches` each.

  `loss_scale`: the initial scale of float16 dynamic loss scaling.
  """
  with strategy.scope():
    model = ElectraPretrainer(config)
    model.set_weights(_initial_weights(config))
    opt = create_optimizer(optimizer, WarmupLinearDecay(1e-2, 20, 2))
    if loss_scale:
      opt = tf_keras.mixed_precision.LossScaleOptimizer(opt, initial_scale=loss_scale)
    model.compile(optimizer=opt, steps_per_execution=2, jit_compile=jit_compile)
  stacked = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}

  def per_replica(context):  # as the pipeline: replica r reads its rows of each batch
    size = context.get_per_replica_batch_size(config.batch_size)
    return tf.data.Dataset.from_tensor_slices(stacked).batch(size, drop_remainder=True).repeat()

  dataset = strategy.distribute_datasets_from_function(per_replica)
  # Created outside the step, as run_pretraining does (it reads the step to resume from):
  # created inside a multi-step function under MirroredStrategy, a replica reads it as [0].
  assert int(model.optimizer.iterations.numpy()) == 0
  history = model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=0).history
  assert int(model.optimizer.iterations.numpy()) == steps  # updates, not micro-batches
  return model, history


def _one_device():
  return tf.distribute.OneDeviceStrategy("/cpu:0")


def _two_replicas():
  return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"],
                                        cross_device_ops=tf.distribute.ReductionToOneDevice())


def _assert_same_update(reference, candidate, rtol=1e-5, atol=1e-5):
  (ref_model, ref_history), (model, history) = reference, candidate
  for name in ("loss", "gen_loss", "gen_accuracy", "grad_norm", "disc_loss", "disc_auc"):
    np.testing.assert_allclose(history[name], ref_history[name], rtol=rtol, err_msg=name)
  ref_weights = {v.name: v.numpy() for v in ref_model.trainable_weights}
  for var in model.trainable_weights:
    np.testing.assert_allclose(var.numpy(), ref_weights[var.name], rtol=rtol, atol=atol,
                               err_msg=var.name)


def _batches(config):
  return [make_batch(config, seed=s) for s in range(STEPS)]


_REFERENCES = {}


def _reference(config, optimizer):
  """The run on one device without accumulation (kept: several tests compare with it)."""
  key = (config, optimizer)
  if key not in _REFERENCES:
    _REFERENCES[key] = _fit(config, _batches(config), _one_device(), optimizer)
  return _REFERENCES[key]


@pytest.mark.parametrize("optimizer,k", [("adamw", 4), ("lamb", 2)])
def test_one_device_with_dropout_matches_the_whole_batch(micro_config, optimizer, k):
  """Fused dropout masks count elements per example: micro-batches draw the batch's masks."""
  config = _with_dropout(micro_config.replace(batch_size=8))
  reference = _reference(config, optimizer)
  candidate = _fit(config.replace(gradient_accumulation_steps=k), _batches(config),
                   _one_device(), optimizer)
  _assert_same_update(reference, candidate)
  # The weights moved: the comparison is not between two untouched models.
  assert not np.allclose(reference[0].trainable_weights[0].numpy(),
                         _initial_weights(config)[0])


@pytest.mark.parametrize("optimizer", ["adamw", "lamb"])
def test_two_replicas_accumulating_match_one_device_on_the_whole_batch(micro_config, optimizer):
  config = micro_config.replace(batch_size=8)
  reference = _reference(config, optimizer)
  candidate = _fit(config.replace(gradient_accumulation_steps=2), _batches(config),
                   _two_replicas(), optimizer)
  _assert_same_update(reference, candidate)


def test_xla_compiled_step_accumulates_like_the_whole_batch(micro_config):
  """The TPU code path: the whole step under XLA (Philox dropout, here off)."""
  config = micro_config.replace(batch_size=8)
  reference = _fit(config, _batches(config), _one_device(), "adamw", jit_compile=True)
  candidate = _fit(config.replace(gradient_accumulation_steps=2), _batches(config),
                   _one_device(), "adamw", jit_compile=True)
  _assert_same_update(reference, candidate)


def test_float16_loss_scaling_accumulates_like_the_whole_batch(micro_config):
  """Each micro-batch's loss is scaled, the summed gradients unscaled once; an overflow in
  any micro-batch skips the update. float16 sums a weight's gradient over each micro-batch's
  rows (fewer than the batch's), so from the default scale (2**15) the two overflow at
  different steps; from one where neither does they take the same steps."""
  config = micro_config.replace(batch_size=8, precision="mixed_float16")
  tf_keras.mixed_precision.set_global_policy("mixed_float16")
  try:
    runs = [_fit(config.replace(gradient_accumulation_steps=k), _batches(config),
                 _one_device(), "adamw", loss_scale=2**8) for k in (1, 2)]
    overflowing = _fit(config.replace(gradient_accumulation_steps=2), _batches(config),
                       _one_device(), "adamw", loss_scale=2**40, steps=2)
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")
  for model, _ in runs:
    assert float(model.optimizer.loss_scale) == 2**8  # no step skipped
  # float16 activations round differently in smaller matmuls: float16-sized tolerances.
  _assert_same_update(*runs, rtol=2e-3, atol=2e-4)
  model, _ = overflowing
  assert float(model.optimizer.loss_scale) == 2**38  # both updates skipped
  for var, start in zip(model.trainable_weights, _initial_weights(config)):
    np.testing.assert_array_equal(var.numpy(), start, err_msg=var.name)
