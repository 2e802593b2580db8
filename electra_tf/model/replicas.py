"""Replica arithmetic shared by the train steps (pretraining and fine-tuning)."""

from __future__ import annotations

import tensorflow as tf
import tf_keras


def global_sum(value):
  """Sum over replicas (identity without a strategy); works on tensors and lists of them."""
  return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, value)


def _loss_scaled(optimizer) -> bool:
  return isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer)


def scale_loss(optimizer, loss: tf.Tensor) -> tf.Tensor:
  """The loss to differentiate: scaled up when float16 dynamic loss scaling is on."""
  return optimizer.get_scaled_loss(loss) if _loss_scaled(optimizer) else loss


def summed_gradients(optimizer, tape: tf.GradientTape, scaled_loss: tf.Tensor,
                     variables) -> list[tf.Tensor]:
  """Gradients of `scaled_loss`, summed over replicas and unscaled.

  Each replica's loss is its share of one global-batch loss, so the replica gradients sum
  to the global gradient; summing before clipping makes the clip see the global norm.
  """
  grads = [tf.convert_to_tensor(g) for g in tape.gradient(scaled_loss, variables)]
  grads = global_sum(grads)
  if _loss_scaled(optimizer):
    grads = optimizer.get_unscaled_gradients(grads)
  return grads
