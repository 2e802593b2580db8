"""Keras' train function with the train step traced once, and optimizer slots made up front.

Two things make tf_keras trace a model's train step more often than once per run:
- Its loop over steps_per_execution steps, `for _ in tf.range(n): outputs = step(iterator)`,
  leaves `outputs` undefined before the loop, so autograph traces the whole step an extra
  time to learn what the loop carries.
- Optimizer slots created by the first update are variables created inside a tf.function,
  which then traces everything again without creating them.
`make_train_function` starts the loop from zeros shaped like the metrics' results, and
`create_slots` makes the slots before training (`TracedOnce` does both for a model). Neither
changes what a step computes.
"""

from __future__ import annotations

import tensorflow as tf
from tf_keras.src.engine import training as keras_training


def create_slots(optimizer, variables) -> None:
  """Creates `optimizer`'s slots for `variables` now (call under the model's strategy scope).

  A checkpoint restored earlier fills them as they are created, as it would in the step.
  """
  if hasattr(optimizer, "_create_all_weights"):  # legacy optimizers and LossScaleOptimizer
    optimizer._create_all_weights(variables)  # noqa: SLF001
  else:  # tf_keras.optimizers.Adam and the other current optimizers
    optimizer.build(variables)


def make_train_function(model):
  """model.train_function for steps_per_execution > 1, tracing model.train_step once; None
  where tf_keras' own applies (one step per execution, eager runs, a cluster coordinator).

  The model's train_step must return {metric.name: metric.result()} for model.metrics, each
  a scalar (any other structure fails while tracing, naming the mismatch).
  """
  steps = model._steps_per_execution  # noqa: SLF001
  if (model.run_eagerly or model._cluster_coordinator  # noqa: SLF001
      or model.autotune_steps_per_execution or steps is None or int(steps.numpy()) == 1):
    return None

  def run_step(data):
    outputs = model.train_step(data)
    with tf.control_dependencies(keras_training._minimum_control_deps(outputs)):  # noqa: SLF001
      model._train_counter.assign_add(1)  # noqa: SLF001
    return outputs

  if model.jit_compile:
    run_step = tf.function(run_step, jit_compile=True, reduce_retracing=True)

  def step(iterator):
    outputs = model.distribute_strategy.run(run_step, args=(next(iterator),))
    return keras_training.reduce_per_replica(outputs, model.distribute_strategy,
                                             reduction=model.distribute_reduction_method)

  def train_function(iterator):
    # Scalars of each metric's dtype: reading the metrics here would all-reduce them.
    outputs = {m.name: tf.zeros([], m.dtype) for m in model.metrics}
    for _ in tf.range(steps):
      outputs = step(iterator)
    return outputs

  model.train_tf_function = tf.function(train_function, reduce_retracing=True)
  return model.train_tf_function


class TracedOnce:
  """Mixin for a tf_keras.Model whose train_step returns its metrics' results: the train
  function of `make_train_function` wherever it applies, and `compile` makes the optimizer's
  slots for the variables that exist by then (`trained_variables()` where the model defines
  it, else its trainable variables)."""

  def compile(self, *args, **kwargs):
    super().compile(*args, **kwargs)
    trained = getattr(self, "trained_variables", lambda: self.trainable_variables)()
    with self.distribute_strategy.scope():
      create_slots(self.optimizer, trained)

  def make_train_function(self, force=False):
    if self.train_function is None or force:
      self.train_function = make_train_function(self)
    return self.train_function or super().make_train_function(force)
