"""The joint RTD step: NumPy reference loss, replica invariance, XLA, precisions, optimizers."""

import numpy as np
import pytest
import tensorflow as tf
from testing_utils import make_batch, xla_compiled_functions

from electra_tf import features as F
from electra_tf.model import rtd
from electra_tf.model.pretrainer import ElectraPretrainer
from electra_tf.training.optimizer import WarmupLinearDecay, create_optimizer


def _numpy_total_loss(batch, out, config):
  gen = out["gen_logits"].numpy().astype(np.float64)
  log_probs = gen - np.log(np.exp(gen - gen.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
      - gen.max(-1, keepdims=True)
  w = batch[F.MASKED_LM_WEIGHTS]
  ce = -np.take_along_axis(log_probs, batch[F.MASKED_LM_IDS][..., None], -1)[..., 0]
  gen_loss = (ce * w).sum() / (w.sum() + 1e-6)
  corrupted = batch[F.INPUT_IDS].copy()
  samples = out["samples"].numpy()
  for b, p in zip(*np.nonzero(w)):
    corrupted[b, batch[F.MASKED_LM_POSITIONS][b, p]] = samples[b, p]
  labels = (corrupted != batch[F.INPUT_IDS]).astype(np.float64)
  mask = batch[F.INPUT_MASK].astype(np.float64)
  z = out["disc_logits"].numpy().astype(np.float64)
  bce = np.maximum(z, 0) - z * labels + np.log1p(np.exp(-np.abs(z)))
  disc_loss = (bce * mask).sum() / (mask.sum() + 1e-6)
  return gen_loss + config.disc_weight * disc_loss, corrupted, labels


def test_total_loss_matches_numpy_reference(micro_config, micro_batch):
  model = ElectraPretrainer(micro_config)
  features = {k: tf.constant(v) for k, v in micro_batch.items()}
  out = model.forward(features, tf.constant(5), training=False)
  losses = model.compute_losses(out, features)
  expected, corrupted, labels = _numpy_total_loss(micro_batch, out, micro_config)
  np.testing.assert_allclose(losses["loss"].numpy(), expected, rtol=1e-5)
  np.testing.assert_array_equal(out["corrupted_ids"].numpy(), corrupted)
  np.testing.assert_array_equal(out["labels"].numpy(), labels)
  # The samples are the inverse-CDF draws of softmax(gen_logits) at the step's uniforms.
  u = rtd.position_uniforms(micro_config.seed, 5, tf.range(micro_config.batch_size),
                            micro_config.max_predictions_per_seq).numpy()
  probs = tf.nn.softmax(out["gen_logits"]).numpy()
  cdf = np.cumsum(probs, -1)
  expected_samples = (cdf < u[..., None] * cdf[..., -1:]).sum(-1)
  np.testing.assert_array_equal(out["samples"].numpy(), expected_samples)


def _first_step(strategy, config, batch, weights):
  with strategy.scope():
    model = ElectraPretrainer(config)
    model.set_weights(weights)
    model.compile(optimizer=create_optimizer("adamw", 1e-3))
  dataset = strategy.experimental_distribute_dataset(
      tf.data.Dataset.from_tensors({k: tf.constant(v) for k, v in batch.items()}))

  @tf.function
  def step(features):
    _, losses, grads = model.compute_gradients(features, tf.constant(0, tf.int64))
    return {k: tf.distribute.get_replica_context().all_reduce("sum", v)
            for k, v in losses.items()}, grads

  losses, grads = strategy.run(step, args=(next(iter(dataset)),))
  losses = {k: strategy.experimental_local_results(v)[0].numpy() for k, v in losses.items()}
  grads = [strategy.experimental_local_results(g)[0].numpy() for g in grads]
  return losses, grads


def test_one_and_two_replicas_give_the_same_first_step(micro_config):
  batch = make_batch(micro_config, seed=11)
  weights = ElectraPretrainer(micro_config).get_weights()
  one_losses, one_grads = _first_step(tf.distribute.OneDeviceStrategy("/cpu:0"), micro_config,
                                      batch, weights)
  two = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"],
                                       cross_device_ops=tf.distribute.ReductionToOneDevice())
  two_losses, two_grads = _first_step(two, micro_config, batch, weights)
  for key in ("loss", "gen_loss", "disc_loss"):
    np.testing.assert_allclose(two_losses[key], one_losses[key], rtol=1e-5)
  assert len(one_grads) == len(two_grads)
  for a, b in zip(one_grads, two_grads):
    np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)


def test_training_forward_uses_fused_gelu_and_inference_does_not(micro_config, micro_batch):
  model = ElectraPretrainer(micro_config)
  features = {k: tf.constant(v) for k, v in micro_batch.items()}
  step = tf.constant(3, tf.int64)

  def grads(model):
    return model.compute_gradients(features, step)[2]

  # GELU's forward and backward kernels.
  assert len(xla_compiled_functions(lambda: grads(model))) >= 2
  assert not xla_compiled_functions(lambda: model.forward(features, step, training=False))
  model.fused_kernels = False
  assert not xla_compiled_functions(lambda: grads(model))
  # The same first step either way (float32; the kernels round like the plain ops).
  plain = ElectraPretrainer(micro_config, fused_kernels=False)
  plain.set_weights(model.get_weights())
  model.fused_kernels = True
  for m in (model, plain):
    m.compile(optimizer=create_optimizer("adamw", 1e-3))
  fused_out, fused_losses, fused_grads = model.compute_gradients(features, step)
  plain_out, plain_losses, plain_grads = plain.compute_gradients(features, step)
  np.testing.assert_array_equal(fused_out["samples"], plain_out["samples"])
  np.testing.assert_allclose(fused_losses["loss"], plain_losses["loss"], rtol=1e-6)
  for a, b in zip(fused_grads, plain_grads):
    np.testing.assert_allclose(tf.convert_to_tensor(a), tf.convert_to_tensor(b),
                               rtol=1e-5, atol=1e-7)


def test_training_step_with_dropout_uses_the_fused_dropout(micro_config, micro_batch):
  config = micro_config.replace(**{"model.dropout_rate": 0.1,
                                   "model.attention_dropout_rate": 0.1})
  model = ElectraPretrainer(config)
  features = {k: tf.constant(v) for k, v in micro_batch.items()}

  def kernels(training):
    def fn():
      return model.forward(features, tf.constant(3, tf.int64), training=training)
    return {name.rsplit("_", 1)[0] for name in xla_compiled_functions(fn)}

  assert {"__inference__dropout_kernel", "__inference__gelu_forward"} <= kernels(True)
  assert not kernels(False)


def _fit(config, batch, steps=4, jit_compile=False, optimizer="adamw", model=None):
  model = model or ElectraPretrainer(config)
  model.compile(optimizer=create_optimizer(optimizer, WarmupLinearDecay(1e-2, 20, 2),
                                           precision=config.precision),
                jit_compile=jit_compile, steps_per_execution=2)
  dataset = tf.data.Dataset.from_tensors({k: tf.constant(v) for k, v in batch.items()}).repeat()
  history = model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=0)
  return model, history.history


def test_train_step_compiles_under_xla(micro_config, micro_batch):
  model, history = _fit(micro_config, micro_batch, jit_compile=True)
  assert model.train_function is not None and int(model.optimizer.iterations) == 4
  assert np.isfinite(history["loss"][0])


@pytest.mark.parametrize("precision,optimizer", [("mixed_float16", "adamw"),
                                                 ("mixed_bfloat16", "lamb")])
def test_precisions_and_optimizers_train(micro_config, micro_batch, precision, optimizer):
  import tf_keras

  config = micro_config.replace(precision=precision, optimizer=optimizer)
  tf_keras.mixed_precision.set_global_policy(precision)
  try:
    model, history = _fit(config, micro_batch, steps=6, optimizer=optimizer)
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")
  assert np.isfinite(history["loss"][0])
  assert int(model.optimizer.iterations) == 6


def test_training_reduces_the_loss_on_a_fixed_batch(micro_config, micro_batch):
  # The same model before and after: its weights (seeded) are the only starting point, not
  # whatever the tests before this one left in the global random state.
  import tf_keras

  tf_keras.utils.set_random_seed(0)
  config = micro_config.replace(disc_weight=50.0)
  model = ElectraPretrainer(config)
  features = {k: tf.constant(v) for k, v in micro_batch.items()}
  start = float(model.compute_losses(model.forward(features, tf.constant(0)), features)["loss"])
  model, history = _fit(config, micro_batch, steps=40, model=model)
  end = float(model.compute_losses(model.forward(features, tf.constant(0)), features)["loss"])
  assert end < 0.7 * start


def test_mlm_objective_trains_the_bert_baseline(micro_config, micro_batch):
  config = micro_config.replace(objective="mlm")
  model, history = _fit(config, micro_batch, steps=4)
  assert model.discriminator is None
  # The baseline's generator has the discriminator's size (not generator_fraction of it).
  assert model.generator.config == config.model
  assert set(history) == {"loss", "gen_loss", "gen_accuracy", "grad_norm", "nonfinite_steps"}
  np.testing.assert_allclose(history["loss"][0], history["gen_loss"][0], rtol=1e-6)


@pytest.mark.parametrize("replicas", [1, 2])
def test_a_non_finite_step_leaves_the_weights_alone(micro_config, micro_batch, replicas):
  """An overflowing weight makes the loss non-finite: no update, but the step still counts."""
  strategy = (tf.distribute.MirroredStrategy(
      ["/cpu:0", "/cpu:1"], cross_device_ops=tf.distribute.ReductionToOneDevice())
      if replicas == 2 else tf.distribute.OneDeviceStrategy("/cpu:0"))
  with strategy.scope():
    model = ElectraPretrainer(micro_config)
    model.compile(optimizer=create_optimizer("adamw", 1e-2))
  dataset = tf.data.Dataset.from_tensors(micro_batch).repeat()
  model.fit(dataset, steps_per_epoch=1, verbose=0)  # builds the model and the slots
  kernel = model.discriminator.trainable_variables[-2]
  kernel.assign(tf.fill(kernel.shape, 3e38))  # float32 max is 3.4e38: logits overflow
  before = [v.numpy().copy() for v in model.trainable_variables]
  history = model.fit(dataset, steps_per_epoch=1, verbose=0).history
  assert int(model.optimizer.iterations.numpy()) == 2
  assert history["nonfinite_steps"][-1] == 1.0
  for old, var in zip(before, model.trainable_variables):
    np.testing.assert_array_equal(var.numpy(), old, err_msg=var.name)
  kernel.assign(before[-2] * 0 + 0.01)  # finite again: the next step updates
  model.fit(dataset, steps_per_epoch=1, verbose=0)
  assert not np.array_equal(model.trainable_variables[0].numpy(), before[0])
