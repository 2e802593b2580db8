"""ElectraPretrainer: generator + discriminator trained jointly with replaced-token detection."""

from __future__ import annotations

import tensorflow as tf
import tf_keras

from electra_tf import features as F
from electra_tf.config import PretrainConfig
from electra_tf.model import dropout, fused, rtd
from electra_tf.model.networks import build_networks
from electra_tf.model.replicas import global_sum as _global_sum
from electra_tf.model.replicas import scale_loss, summed_gradients

_EPS = 1e-6


class ElectraPretrainer(tf_keras.Model):
  """Joint ELECTRA pretraining (or the plain MLM baseline) with a custom `train_step`.

  Args:
    config: the run's PretrainConfig.
    generator, discriminator: prebuilt networks sharing embeddings (built from config when
      omitted); discriminator is None for objective "mlm".
    fused_kernels: trace GELU and dropout in the training forward pass as XLA-fused
      kernels (see `electra_tf.model.fused`) when the step is not compiled with XLA as a
      whole and XLA is available. GELU keeps its arithmetic; dropout draws its masks from
      another generator. About 7% off the small bfloat16 step on CPU.

  Call args:
    features: a batch with the keys of `features.PRETRAIN_KEYS`.

  Example:
    >>> model = ElectraPretrainer(configs.get("tiny"))
    >>> model.compile(optimizer=create_optimizer("adamw", 5e-4))
    >>> model.fit(dataset, steps_per_epoch=100)
  """

  def __init__(self, config: PretrainConfig, generator=None, discriminator=None,
               fused_kernels: bool = True, **kwargs):
    kwargs.setdefault("name", "electra_pretrainer")
    super().__init__(**kwargs)
    self.config = config
    self.fused_kernels = fused_kernels
    if generator is None:
      generator, discriminator = build_networks(config)
    self.generator = generator
    self.discriminator = discriminator
    mean = tf_keras.metrics.Mean
    self.loss_tracker = mean("loss")
    self.gen_loss_tracker = mean("gen_loss")
    self.gen_accuracy = mean("gen_accuracy")
    self.grad_norm = mean("grad_norm")
    # Steps whose update was dropped for a non-finite loss or gradient (see train_step).
    self.nonfinite_steps = tf_keras.metrics.Sum(name="nonfinite_steps")
    if discriminator is not None:
      self.disc_loss_tracker = mean("disc_loss")
      self.sampled_accuracy = mean("sampled_accuracy")
      self.disc_accuracy = mean("disc_accuracy")
      self.disc_precision = tf_keras.metrics.Precision(name="disc_precision")
      self.disc_recall = tf_keras.metrics.Recall(name="disc_recall")
      self.disc_auc = tf_keras.metrics.AUC(num_thresholds=200, name="disc_auc")
      self.replaced_fraction = mean("replaced_fraction")

  def call(self, features, training=None):
    return self.forward(features, step=tf.constant(0, tf.int64), training=training)

  def forward(self, features, step, training=None) -> dict[str, tf.Tensor]:
    """Generator on the masked input, then (ELECTRA) sampling, corruption and discriminator.

    Dropout masks and generator samples depend only on (config.seed, step, example or
    layer, replica), so a run resumed from a checkpoint draws what the uninterrupted run
    would have drawn.
    """
    with dropout.step_seed(self.config.seed, step), fused.enabled(self._fuse(training)):
      return self._forward(features, step, training)

  def _fuse(self, training) -> bool:
    """Whether this trace of the forward pass uses `fused`'s XLA kernels (see __init__)."""
    if training is not True or not self.fused_kernels or self.jit_compile:
      return False  # a whole-step XLA compile fuses the elementwise ops itself
    if isinstance(tf.distribute.get_strategy(), tf.distribute.TPUStrategy):
      return False
    return fused.available()

  def _forward(self, features, step, training=None) -> dict[str, tf.Tensor]:
    gen_inputs = {F.INPUT_IDS: features[F.MASKED_INPUT_IDS], F.INPUT_MASK: features[F.INPUT_MASK],
                  F.SEGMENT_IDS: features[F.SEGMENT_IDS],
                  F.MASKED_LM_POSITIONS: features[F.MASKED_LM_POSITIONS]}
    outputs = {"gen_logits": self.generator(gen_inputs, training=training)}  # [B, P, V]
    if self.discriminator is None:
      return outputs
    cfg = self.config
    # Draws depend only on (seed, step, global example index): reproducible on resume and
    # identical for any number of replicas.
    replica = tf.distribute.get_replica_context().replica_id_in_sync_group
    local_batch = tf.shape(features[F.INPUT_IDS])[0]
    rows = tf.cast(replica, tf.int32) * local_batch + tf.range(local_batch)
    uniforms = rtd.position_uniforms(cfg.seed, step, rows, cfg.max_predictions_per_seq)
    disallow = features[F.MASKED_LM_IDS] if cfg.disallow_correct else None
    samples = tf.stop_gradient(rtd.sample_from_logits(
        outputs["gen_logits"], uniforms, cfg.temperature, disallow))
    corrupted = rtd.scatter_update(features[F.INPUT_IDS], samples,
                                   features[F.MASKED_LM_POSITIONS], features[F.MASKED_LM_WEIGHTS])
    labels = rtd.replaced_labels(features[F.INPUT_IDS], corrupted, features[F.INPUT_MASK])
    disc_inputs = {F.INPUT_IDS: corrupted, F.INPUT_MASK: features[F.INPUT_MASK],
                   F.SEGMENT_IDS: features[F.SEGMENT_IDS]}
    outputs.update(samples=samples, corrupted_ids=corrupted, labels=labels,
                   disc_logits=self.discriminator(disc_inputs, training=training))
    return outputs

  def compute_losses(self, outputs, features) -> dict[str, tf.Tensor]:
    """This replica's share of the global-batch losses (pure apart from the all-reduce).

    Each loss is (this replica's numerator) / (denominator summed over all replicas),
    so summing the replicas' losses, and so their gradients, gives exactly the loss
    and gradient of the whole global batch on one device.
    """
    weights = features[F.MASKED_LM_WEIGHTS]
    num, den = rtd.mlm_loss_terms(outputs["gen_logits"], features[F.MASKED_LM_IDS], weights)
    losses = {"gen_loss": num / (_global_sum(den) + _EPS)}
    total = self.config.gen_weight * losses["gen_loss"]
    if self.discriminator is not None:
      num, den = rtd.rtd_loss_terms(outputs["disc_logits"], outputs["labels"],
                                    features[F.INPUT_MASK])
      losses["disc_loss"] = num / (_global_sum(den) + _EPS)
      total += self.config.disc_weight * losses["disc_loss"]
    losses["loss"] = total
    return losses

  def compute_gradients(self, features, step):
    """(outputs, losses, gradients), the gradients summed over replicas and unscaled."""
    with tf.GradientTape() as tape:
      outputs = self.forward(features, step, training=True)
      losses = self.compute_losses(outputs, features)
      loss = scale_loss(self.optimizer, losses["loss"])
    return outputs, losses, summed_gradients(self.optimizer, tape, loss,
                                             self.trainable_variables)

  def train_step(self, features):
    outputs, losses, grads = self.compute_gradients(features, self.optimizer.iterations)
    grads, norm = tf.clip_by_global_norm(grads, self.config.clip_norm)
    summed = {k: _global_sum(v) for k, v in losses.items()}
    finite = self._apply_if_finite(grads, summed["loss"], norm)
    # Every replica adds its share: the metric sums over replicas when read.
    replicas = tf.distribute.get_replica_context().num_replicas_in_sync
    self.nonfinite_steps.update_state((1.0 - tf.cast(finite, tf.float32)) / replicas)
    self._update_metrics(outputs, features, summed, norm)
    return {m.name: m.result() for m in self.metrics}

  def _apply_if_finite(self, grads, loss: tf.Tensor, grad_norm: tf.Tensor) -> tf.Tensor:
    """Applies the update unless the loss or the gradient norm is non-finite; True if applied.

    A skipped step still advances optimizer.iterations (the schedule and the step seeds),
    as dynamic loss scaling does. Under float16 the LossScaleOptimizer already skips
    steps whose (scaled) gradients overflow, so only a non-finite loss counts here.
    """
    if isinstance(self.optimizer, tf_keras.mixed_precision.LossScaleOptimizer):
      self.optimizer.apply_gradients(zip(grads, self.trainable_variables),
                                     experimental_aggregate_gradients=False)
      return tf.math.is_finite(loss)
    finite = tf.logical_and(tf.math.is_finite(loss), tf.math.is_finite(grad_norm))

    def apply_or_skip(strategy, grads, finite):
      # Decided once in cross-replica context (the gradients are already summed, so every
      # replica agrees), then applied back in replica context, as LossScaleOptimizer does.
      finite = strategy.experimental_local_results(finite)[0]

      def apply():
        strategy.extended.call_for_each_replica(
            lambda g: self.optimizer.apply_gradients(
                zip(g, self.trainable_variables), experimental_aggregate_gradients=False),
            args=(grads,))
        return tf.constant(True)

      def skip():
        self.optimizer.iterations.assign_add(1, read_value=False)
        return tf.constant(False)

      return tf.__internal__.smart_cond.smart_cond(finite, apply, skip)

    tf.distribute.get_replica_context().merge_call(apply_or_skip, args=(list(grads), finite))
    return finite

  def test_step(self, features):
    outputs = self.forward(features, self.optimizer.iterations, training=False)
    losses = self.compute_losses(outputs, features)
    self._update_metrics(outputs, features, {k: _global_sum(v) for k, v in losses.items()})
    return {m.name: m.result() for m in self.metrics}

  def _update_metrics(self, outputs, features, losses, grad_norm=None):
    weights = features[F.MASKED_LM_WEIGHTS]
    self.loss_tracker.update_state(losses["loss"])
    self.gen_loss_tracker.update_state(losses["gen_loss"])
    predicted = tf.argmax(outputs["gen_logits"], -1, output_type=tf.int32)
    self.gen_accuracy.update_state(
        tf.cast(predicted == features[F.MASKED_LM_IDS], tf.float32), weights)
    if grad_norm is not None:
      self.grad_norm.update_state(grad_norm)
    if self.discriminator is None:
      return
    mask = tf.cast(features[F.INPUT_MASK], tf.float32)
    labels = outputs["labels"]
    probs = tf.sigmoid(outputs["disc_logits"])
    self.disc_loss_tracker.update_state(losses["disc_loss"])
    self.sampled_accuracy.update_state(
        tf.cast(outputs["samples"] == features[F.MASKED_LM_IDS], tf.float32), weights)
    self.disc_accuracy.update_state(
        tf.cast(tf.cast(probs > 0.5, tf.int32) == labels, tf.float32), mask)
    for metric in (self.disc_precision, self.disc_recall, self.disc_auc):
      metric.update_state(labels, probs, sample_weight=mask)
    self.replaced_fraction.update_state(tf.cast(labels, tf.float32), mask)

  def get_config(self):
    return {"config": self.config.to_dict(), "name": self.name}
