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
  return summed_and_unscaled(optimizer, grads)


def summed_and_unscaled(optimizer, grads: list[tf.Tensor]) -> list[tf.Tensor]:
  """This replica's gradients of a scaled loss share, summed over replicas and unscaled."""
  grads = global_sum(grads)
  if _loss_scaled(optimizer):
    grads = optimizer.get_unscaled_gradients(grads)
  return grads


def apply_if_finite(optimizer, grads: list[tf.Tensor], variables, loss: tf.Tensor,
                    grad_norm: tf.Tensor) -> tf.Tensor:
  """Applies summed `grads` unless the loss or the gradient norm is non-finite; True if applied.

  A skipped step still advances optimizer.iterations (the schedule and the step seeds),
  as dynamic loss scaling does. Under float16 the LossScaleOptimizer already skips
  steps whose (scaled) gradients overflow, so only a non-finite loss counts here.
  """
  if _loss_scaled(optimizer):
    optimizer.apply_gradients(zip(grads, variables), experimental_aggregate_gradients=False)
    return tf.math.is_finite(loss)
  finite = tf.logical_and(tf.math.is_finite(loss), tf.math.is_finite(grad_norm))

  def apply_or_skip(strategy, grads, finite):
    # Decided once in cross-replica context (the gradients are already summed, so every
    # replica agrees), then applied back in replica context, as LossScaleOptimizer does.
    finite = strategy.experimental_local_results(finite)[0]

    def apply():
      strategy.extended.call_for_each_replica(
          lambda g: optimizer.apply_gradients(
              zip(g, variables), experimental_aggregate_gradients=False),
          args=(grads,))
      return tf.constant(True)

    def skip():
      optimizer.iterations.assign_add(1, read_value=False)
      return tf.constant(False)

    return tf.cond(finite, apply, skip)

  tf.distribute.get_replica_context().merge_call(apply_or_skip, args=(list(grads), finite))
  return finite
