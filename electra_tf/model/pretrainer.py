"""ElectraPretrainer: generator + discriminator trained jointly with replaced-token detection."""

from __future__ import annotations

import tensorflow as tf
import tf_keras

from electra_tf import features as F
from electra_tf.config import PretrainConfig
from electra_tf.model import accumulation, dropout, fused, rtd, train_loop
from electra_tf.model.networks import build_networks
from electra_tf.model.pretrain_metrics import PretrainMetrics
from electra_tf.model.replicas import apply_if_finite, scale_loss, summed_gradients
from electra_tf.model.replicas import global_sum as _global_sum

_EPS = 1e-6
STAGE_JOINT, STAGE_GENERATOR, STAGE_DISCRIMINATOR = "joint", "generator", "discriminator"


def _every_token(features) -> tf.Tensor:
  return tf.cast(features[F.INPUT_MASK], tf.float32)  # [B, L]


def _masked_tokens(features) -> tf.Tensor:
  return rtd.position_mask(features[F.MASKED_LM_POSITIONS], features[F.MASKED_LM_WEIGHTS],
                           tf.shape(features[F.INPUT_IDS])[1])  # [B, L]


def _detect(network, inputs, features, training, masked_only: bool) -> dict[str, tf.Tensor]:
  """Replaced-token detection over every real token, or over the masked positions only."""
  labels = rtd.replaced_labels(features[F.INPUT_IDS], inputs[F.INPUT_IDS],
                               features[F.INPUT_MASK])
  weights = _masked_tokens(features) if masked_only else _every_token(features)
  return {"labels": labels, "disc_weights": weights,
          "disc_logits": network(inputs, training=training)}


def _replace_mlm(network, inputs, features, training) -> dict[str, tf.Tensor]:
  """Masked-LM at the masked positions of the sample-corrupted input."""
  logits = network({**inputs, F.MASKED_LM_POSITIONS: features[F.MASKED_LM_POSITIONS]},
                   training=training)  # [B, P, V]
  targets, weights = features[F.MASKED_LM_IDS], features[F.MASKED_LM_WEIGHTS]
  return {"mlm_loss_terms": rtd.mlm_loss_terms(logits, targets, weights),
          "mlm_predictions": tf.argmax(logits, -1, output_type=tf.int32),
          "mlm_targets": targets, "mlm_weights": weights}


def _all_tokens_mlm(network, inputs, features, training) -> dict[str, tf.Tensor]:
  """Every token's identity, with the copy mechanism, from the sample-corrupted input."""
  logits, copy_logits = network(inputs, training=training)  # [B, L, V], [B, L]
  targets, read = features[F.INPUT_IDS], inputs[F.INPUT_IDS]
  weights = _every_token(features)
  return {"mlm_loss_terms": rtd.copy_mlm_loss_terms(logits, copy_logits, targets, read, weights),
          "mlm_predictions": rtd.copy_mlm_predictions(logits, copy_logits, read),
          "mlm_targets": targets, "mlm_weights": weights}


_SECOND_PASS = {
    "electra": lambda *args: _detect(*args, masked_only=False),
    "electra_15": lambda *args: _detect(*args, masked_only=True),
    "replace_mlm": _replace_mlm,
    "all_tokens_mlm": _all_tokens_mlm,
}
# The second network's loss: its name and its weights (the generator's are masked_lm_weights).
_SECOND_LOSS = {
    "electra": ("disc_loss", _every_token),
    "electra_15": ("disc_loss", _masked_tokens),
    "replace_mlm": ("mlm_loss", lambda features: features[F.MASKED_LM_WEIGHTS]),
    "all_tokens_mlm": ("mlm_loss", _every_token),
}


class ElectraPretrainer(train_loop.TracedOnce, tf_keras.Model):
  """Joint ELECTRA pretraining, its ablations, or the plain MLM baseline (custom `train_step`).

  The objective and the weight sharing come from the config (see
  `config.OBJECTIVES`, `config.EMBEDDING_SHARING`): the generator always learns masked-LM
  on the [MASK]ed input; the second network (`discriminator`, the one fine-tuned) detects
  replaced tokens over every token ("electra") or the masked ones ("electra_15"), or
  predicts the original tokens of the corrupted input at the masked positions
  ("replace_mlm") or everywhere, with a copy mechanism ("all_tokens_mlm").

  Args:
    config: the run's PretrainConfig.
    generator, discriminator: prebuilt networks sharing as the config says (built from
      config when omitted); discriminator is None for objective "mlm".
    fused_kernels: trace GELU and dropout in the training forward pass as XLA-fused
      kernels (see `electra_tf.model.fused`) when the step is not compiled with XLA as a
      whole and XLA is available. GELU keeps its arithmetic; dropout draws its masks from
      another generator.

  Call args:
    features: a batch with the keys of `features.PRETRAIN_KEYS`.

  Example:
    >>> model = ElectraPretrainer(presets.get("tiny"))
    >>> model.compile(optimizer=create_optimizer("adamw", 5e-4))
    >>> model.fit(dataset, steps_per_epoch=100)
  """

  def __init__(self, config: PretrainConfig, generator=None, discriminator=None,
               fused_kernels: bool = True, **kwargs):
    kwargs.setdefault("name", "electra_pretrainer")
    super().__init__(**kwargs)
    if isinstance(config, dict):
      config = PretrainConfig.from_dict(config)
    self.config = config
    self.fused_kernels = fused_kernels
    if generator is None:
      generator, discriminator = build_networks(config)
    self.generator = generator
    self.discriminator = discriminator
    self.pretrain_metrics = PretrainMetrics(config.objective)
    # Two-stage training (config.two_stage_steps): which networks the next trace trains.
    self.stage = STAGE_GENERATOR if config.two_stage_steps else STAGE_JOINT

  def call(self, features, training=None):
    return self.forward(features, step=tf.constant(0, tf.int64), training=training)

  def forward(self, features, step, training=None, micro_batch=(0, 1)) -> dict[str, tf.Tensor]:
    """Generator on the masked input, then sampling, corruption and the second network.

    Dropout masks and generator samples depend only on (config.seed, step, example or
    layer, replica), so a run resumed from a checkpoint draws what the uninterrupted run
    would have drawn. `micro_batch` (j, k): `features` are rows j*B..(j+1)*B-1 of this
    replica's batch of k*B (gradient accumulation); the samples are drawn for those rows,
    and dropout masks as `dropout.step_seed` says.
    """
    with dropout.step_seed(self.config.seed, step, micro_batch[0]), fused.enabled(
        self._fuse(training)):
      return self._forward(features, step, training, micro_batch)

  def _fuse(self, training) -> bool:
    """Whether this trace of the forward pass uses `fused`'s XLA kernels (see __init__)."""
    if training is not True or not self.fused_kernels or self.jit_compile:
      return False  # a whole-step XLA compile fuses the elementwise ops itself
    if isinstance(tf.distribute.get_strategy(), tf.distribute.TPUStrategy):
      return False
    return fused.available()

  def _forward(self, features, step, training, micro_batch) -> dict[str, tf.Tensor]:
    gen_inputs = {F.INPUT_IDS: features[F.MASKED_INPUT_IDS], F.INPUT_MASK: features[F.INPUT_MASK],
                  F.SEGMENT_IDS: features[F.SEGMENT_IDS],
                  F.MASKED_LM_POSITIONS: features[F.MASKED_LM_POSITIONS]}
    outputs = {"gen_logits": self.generator(gen_inputs, training=training)}  # [B, P, V]
    if self.discriminator is None or self.stage == STAGE_GENERATOR:
      return outputs
    cfg = self.config
    # Draws depend only on (seed, step, global example index): reproducible on resume and
    # identical for any number of replicas.
    replica = tf.distribute.get_replica_context().replica_id_in_sync_group
    local_batch = tf.shape(features[F.INPUT_IDS])[0]
    index, count = micro_batch
    block = tf.cast(replica, tf.int32) * count + index if count > 1 else replica
    rows = tf.cast(block, tf.int32) * local_batch + tf.range(local_batch)
    uniforms = rtd.position_uniforms(cfg.seed, step, rows, cfg.max_predictions_per_seq)
    disallow = features[F.MASKED_LM_IDS] if cfg.disallow_correct else None
    samples = tf.stop_gradient(rtd.sample_from_logits(
        outputs["gen_logits"], uniforms, cfg.temperature, disallow))
    corrupted = rtd.scatter_update(features[F.INPUT_IDS], samples,
                                   features[F.MASKED_LM_POSITIONS], features[F.MASKED_LM_WEIGHTS])
    outputs.update(samples=samples, corrupted_ids=corrupted)
    inputs = {F.INPUT_IDS: corrupted, F.INPUT_MASK: features[F.INPUT_MASK],
              F.SEGMENT_IDS: features[F.SEGMENT_IDS]}
    second = _SECOND_PASS[cfg.objective]
    outputs.update(second(self.discriminator, inputs, features, training))
    return outputs

  def compute_losses(self, outputs, features, denominators=None) -> dict[str, tf.Tensor]:
    """This replica's share of the global-batch losses (pure apart from the all-reduce).

    Each loss is (this replica's numerator) / (denominator summed over all replicas),
    so summing the replicas' losses, and so their gradients, gives exactly the loss
    and gradient of the whole global batch on one device. The total weighs the generator
    by gen_weight, the detector by disc_weight and a second masked-LM by 1 (an MLM
    loss, as the generator's); a two-stage run counts only the network it trains.
    `denominators` (global `loss_denominators` of a larger batch) replace this batch's.
    """
    def share(name, terms):
      num, den = terms
      den = _global_sum(den) if denominators is None else denominators[name]
      return num / (den + _EPS)

    losses = {"gen_loss": share("gen_loss", rtd.mlm_loss_terms(
        outputs["gen_logits"], features[F.MASKED_LM_IDS], features[F.MASKED_LM_WEIGHTS]))}
    total = self.config.gen_weight * losses["gen_loss"]
    if "disc_logits" in outputs:
      losses["disc_loss"] = share("disc_loss", rtd.rtd_loss_terms(
          outputs["disc_logits"], outputs["labels"], outputs["disc_weights"]))
      total += self.config.disc_weight * losses["disc_loss"]
    elif "mlm_loss_terms" in outputs:
      losses["mlm_loss"] = share("mlm_loss", outputs["mlm_loss_terms"])
      total += losses["mlm_loss"]
    if self.stage == STAGE_DISCRIMINATOR:
      total = self.config.disc_weight * losses["disc_loss"]
    losses["loss"] = total
    return losses

  def loss_denominators(self, features) -> dict[str, tf.Tensor]:
    """This replica's sums of the weights of each loss of `compute_losses` but the total,
    known from `features` before any forward pass."""
    sums = {"gen_loss": tf.reduce_sum(features[F.MASKED_LM_WEIGHTS])}
    if self.discriminator is not None and self.stage != STAGE_GENERATOR:
      name, weights = _SECOND_LOSS[self.config.objective]
      sums[name] = tf.reduce_sum(weights(features))
    return sums

  def trained_variables(self) -> list[tf.Variable]:
    """The variables this stage updates (all of them outside two-stage training)."""
    if self.stage == STAGE_GENERATOR:
      return self.generator.trainable_variables
    if self.stage == STAGE_DISCRIMINATOR:
      return self.discriminator.trainable_variables
    return self.trainable_variables

  def stage_segments(self, start: int) -> list[tuple[str, int]]:
    """[(stage, last step)] still to run from step `start`, in order."""
    total, boundary = self.config.num_train_steps, self.config.two_stage_steps
    if not boundary:
      return [(STAGE_JOINT, total)]
    segments = [(STAGE_DISCRIMINATOR, total)]
    if start < boundary:
      segments.insert(0, (STAGE_GENERATOR, boundary))
    return segments

  def enter_stage(self, stage: str, step: int) -> None:
    """Switches what the train step trains and makes its optimizer slots; entering the
    discriminator stage at its first step copies the generator's encoder into the
    discriminator's (equal sizes). Call before training, outside any other strategy's
    scope."""
    if stage == STAGE_DISCRIMINATOR and step == self.config.two_stage_steps:
      for target, value in zip(self.discriminator.encoder.weights, self.generator.encoder.weights,
                               strict=True):
        target.assign(value)
    if stage != self.stage:  # compile made the first stage's slots
      self.stage = stage
      self.train_function = None  # retrace: the step's variables and losses change
      with self.distribute_strategy.scope():  # before the step traces (train_loop.py)
        train_loop.create_slots(self.optimizer, self.trained_variables())

  def compute_gradients(self, features, step):
    """(outputs, losses, gradients of this stage's variables), summed over replicas, unscaled."""
    with tf.GradientTape() as tape:
      outputs = self.forward(features, step, training=True)
      losses = self.compute_losses(outputs, features)
      loss = scale_loss(self.optimizer, losses["loss"])
    return outputs, losses, summed_gradients(self.optimizer, tape, loss,
                                             self.trained_variables())

  def train_step(self, features):
    step = self.optimizer.iterations
    if self.config.gradient_accumulation_steps == 1:
      outputs, losses, grads = self.compute_gradients(features, step)
      summed = {k: _global_sum(v) for k, v in losses.items()}
    else:  # the micro-batches add their predictions to the metrics as they run
      outputs, (summed, grads) = None, accumulation.accumulated_gradients(self, features, step)
    grads, norm = tf.clip_by_global_norm(grads, self.config.clip_norm)
    finite = apply_if_finite(self.optimizer, grads, self.trained_variables(), summed["loss"],
                             norm)
    # Every replica adds its share: the metric sums over replicas when read.
    replicas = tf.distribute.get_replica_context().num_replicas_in_sync
    self.pretrain_metrics.nonfinite_steps.update_state(
        (1.0 - tf.cast(finite, tf.float32)) / replicas)
    self.pretrain_metrics.update(outputs, features, summed, norm)
    return {m.name: m.result() for m in self.metrics}

  def test_step(self, features):
    # Draws of step 0 every time: an evaluation repeated on the same weights repeats exactly.
    outputs = self.forward(features, tf.constant(0, tf.int64), training=False)
    losses = self.compute_losses(outputs, features)
    self.pretrain_metrics.update(outputs, features,
                                 {k: _global_sum(v) for k, v in losses.items()})
    return {m.name: m.result() for m in self.metrics}

  def get_config(self):
    return {"config": self.config.to_dict(), "fused_kernels": self.fused_kernels,
            "name": self.name}
