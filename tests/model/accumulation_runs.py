"""Runs of the gradient-accumulation tests: fit a tiny pretrainer from fixed weights on fixed
batches under a strategy, and compare two runs' logged metrics and weights."""

import numpy as np
import tensorflow as tf
import tf_keras
from testing_utils import make_batch

from electra_tf.model.pretrainer import ElectraPretrainer
from electra_tf.training.optimizer import WarmupLinearDecay, create_optimizer

STEPS = 4


def with_dropout(config):
  return config.replace(**{"model.dropout_rate": 0.1, "model.attention_dropout_rate": 0.1})


_INITIAL = {}


def initial_weights(config):
  """The same starting point for every run of one model size."""
  if config.model.hidden_size not in _INITIAL:
    tf_keras.utils.set_random_seed(0)
    _INITIAL[config.model.hidden_size] = ElectraPretrainer(config).get_weights()
  return _INITIAL[config.model.hidden_size]


def fit(config, data, strategy, optimizer, jit_compile=False, steps=STEPS, loss_scale=None):
  """(model, logged metrics) after `steps` updates, one batch of `data` (numpy dicts) each.

  `loss_scale`: the initial scale of float16 dynamic loss scaling. The step runs eagerly
  unless `jit_compile`: the same math without tracing a new model's train function (about
  half a minute each here); tests/training/test_fault_tolerance_replicas.py runs the traced
  step through the pretrain command.
  """
  with strategy.scope():
    model = ElectraPretrainer(config)
    model.set_weights(initial_weights(config))
    opt = create_optimizer(optimizer, WarmupLinearDecay(1e-2, 20, 2))
    if loss_scale:
      opt = tf_keras.mixed_precision.LossScaleOptimizer(opt, initial_scale=loss_scale)
    model.compile(optimizer=opt, steps_per_execution=2, jit_compile=jit_compile,
                  run_eagerly=not jit_compile)
  stacked = {k: np.concatenate([b[k] for b in data]) for k in data[0]}

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


def one_device():
  return tf.distribute.OneDeviceStrategy("/cpu:0")


def two_replicas():
  return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"],
                                        cross_device_ops=tf.distribute.ReductionToOneDevice())


def assert_same_update(reference, candidate, rtol=1e-5, atol=1e-5):
  (ref_model, ref_history), (model, history) = reference, candidate
  for name in ("loss", "gen_loss", "gen_accuracy", "grad_norm", "disc_loss", "disc_auc"):
    np.testing.assert_allclose(history[name], ref_history[name], rtol=rtol, err_msg=name)
  ref_weights = {v.name: v.numpy() for v in ref_model.trainable_weights}
  for var in model.trainable_weights:
    np.testing.assert_allclose(var.numpy(), ref_weights[var.name], rtol=rtol, atol=atol,
                               err_msg=var.name)


def batches(config):
  return [make_batch(config, seed=s) for s in range(STEPS)]


_REFERENCES = {}


def reference(config, optimizer):
  """The run on one device without accumulation (kept: several tests compare with it)."""
  key = (config, optimizer)
  if key not in _REFERENCES:
    _REFERENCES[key] = fit(config, batches(config), one_device(), optimizer)
  return _REFERENCES[key]
