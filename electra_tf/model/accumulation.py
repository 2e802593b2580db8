"""Gradient accumulation: one optimizer update from k micro-batches of each replica's batch."""

from __future__ import annotations

import tensorflow as tf

from electra_tf.model.replicas import global_sum, scale_loss, summed_and_unscaled


def split(features: dict[str, tf.Tensor], count: int) -> dict[str, tf.Tensor]:
  """Each feature [B, ...] as [count, B / count, ...]: micro-batch j is rows j*B/count.. ."""
  return {name: tf.reshape(value, tf.concat([[count, -1], tf.shape(value)[1:]], 0))
          for name, value in features.items()}


def accumulated_gradients(model, features: dict[str, tf.Tensor], step: tf.Tensor):
  """(losses, gradients) of one update of `model` (an ElectraPretrainer) from this replica's
  `features`, run as config.gradient_accumulation_steps micro-batches one after another.

  Every micro-batch divides its loss sums by the denominators of the whole batch of every
  replica (`loss_denominators`, all-reduced once, before the first micro-batch), so the
  micro-batches' losses and gradients add up to the loss and gradient of one step on the
  whole batch: the generator's loss stays a weighted mean over all masked positions, the
  detector's a mean over all real tokens. Micro-batch j samples and drops out as rows
  j*b..(j+1)*b-1 of the batch would (`ElectraPretrainer.forward`), and adds its predictions
  to the metrics. Gradients stay on the replica until the last micro-batch: one all-reduce
  per update, as without accumulation. Each micro-batch's loss is scaled for float16 by the
  LossScaleOptimizer's current scale, the sum unscaled once.

  Returns:
    {loss name: scalar} summed over replicas, and the trained variables' gradients summed
    over replicas and unscaled.
  """
  count = model.config.gradient_accumulation_steps
  variables = model.trained_variables()
  denominators = global_sum(model.loss_denominators(features))
  micro_batches = split(features, count)
  # The loop body is traced in a scope of its own ("while/"): the dropout sites, keyed by
  # their name scope, are traced in the caller's, as without accumulation.
  scope = tf.get_current_name_scope()

  def body(index, grads, losses):
    part = {name: tf.gather(value, index) for name, value in micro_batches.items()}
    with tf.name_scope(scope + "/" if scope else ""), tf.GradientTape() as tape:
      outputs = model.forward(part, step, training=True, micro_batch=(index, count))
      part_losses = model.compute_losses(outputs, part, denominators)
      scaled = scale_loss(model.optimizer, part_losses["loss"])
    part_grads = tape.gradient(scaled, variables)
    model.pretrain_metrics.update_predictions(outputs, part)
    return (index + 1, [a + tf.convert_to_tensor(g) for a, g in zip(grads, part_grads)],
            {name: losses[name] + part_losses[name] for name in losses})

  zeros = ([tf.zeros(v.shape, v.dtype) for v in variables],
           {name: tf.constant(0.0) for name in (*denominators, "loss")})
  # One micro-batch at a time: only its activations are alive, which is the point.
  _, grads, losses = tf.while_loop(lambda index, *_: index < count, body,
                                   (tf.constant(0), *zeros), parallel_iterations=1)
  return global_sum(losses), summed_and_unscaled(model.optimizer, grads)
