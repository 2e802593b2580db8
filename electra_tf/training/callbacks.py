"""Keras callbacks: progress lines with tokens/s and ETA, TensorBoard scalars, checkpoints."""

from __future__ import annotations

import sys
import time

import tensorflow as tf
import tf_keras


def _format_duration(seconds: float) -> str:
  seconds = int(max(0, seconds))
  hours, rest = divmod(seconds, 3600)
  minutes, secs = divmod(rest, 60)
  return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


# Printed in this order when present; the rest follow alphabetically.
_ORDER = ("loss", "gen_loss", "gen_accuracy", "sampled_accuracy", "disc_loss", "disc_accuracy",
          "disc_precision", "disc_recall", "disc_auc", "replaced_fraction", "grad_norm")


class ProgressLogger(tf_keras.callbacks.Callback):
  """Every `log_steps` steps: one line (step, metrics, lr, tokens/s, ETA) and TensorBoard scalars.

  Metrics are averaged over the logging window and then reset, so each line describes
  the last `log_steps` steps, not the run so far. Metrics are read outside the replica
  context, so they are aggregated over all replicas.

  Args:
    total_steps: the run's final step.
    log_steps: steps between lines.
    tokens_per_step: global batch x sequence length.
    summary_dir: TensorBoard directory (None: no summaries).
    examples_per_epoch: examples in the training data, to show passes over the data.
    batch_size: global batch size (for passes over the data).
    stream: where lines go.
  """

  def __init__(self, total_steps: int, log_steps: int, tokens_per_step: int,
               summary_dir: str | None = None, examples_per_epoch: int | None = None,
               batch_size: int | None = None, stream=None):
    super().__init__()
    self.total_steps = total_steps
    self.log_steps = log_steps
    self.tokens_per_step = tokens_per_step
    self.examples_per_epoch = examples_per_epoch
    self.batch_size = batch_size
    self.stream = stream or sys.stdout
    self.writer = tf.summary.create_file_writer(summary_dir) if summary_dir else None
    self.history: list[dict[str, float]] = []

  def on_train_begin(self, logs=None):
    self._begin = time.time()
    self._window_start = None  # set after the first execution, which includes compilation
    self._last_logged = int(self.model.optimizer.iterations.numpy())

  def _learning_rate(self, step: int) -> float:
    opt = self.model.optimizer
    opt = getattr(opt, "inner_optimizer", opt)
    lr = opt.learning_rate if hasattr(opt, "learning_rate") else opt.lr
    if isinstance(lr, tf_keras.optimizers.schedules.LearningRateSchedule):
      return float(lr(step))
    return float(tf_keras.backend.get_value(lr))

  def on_train_batch_end(self, batch, logs=None):
    step = int(self.model.optimizer.iterations.numpy())
    now = time.time()
    if self._window_start is None:
      print(f"first execution (tracing and compilation included) took {now - self._begin:.1f}s",
            file=self.stream, flush=True)
      self._window_start = (step, now)
      self._log(step, now)  # where the metrics start, before the first full window
      return
    if step // self.log_steps == self._last_logged // self.log_steps and step < self.total_steps:
      return  # lines fall on multiples of log_steps
    self._log(step, now)

  def _log(self, step: int, now: float):
    values = {m.name: float(m.result()) for m in self.model.metrics}
    values["learning_rate"] = self._learning_rate(step)
    start_step, start_time = self._window_start
    if step > start_step and now > start_time:
      rate = (step - start_step) / (now - start_time)
      values["tokens_per_s"] = rate * self.tokens_per_step
      eta = (self.total_steps - step) / rate
    else:
      eta = None
    names = [n for n in _ORDER if n in values] + sorted(
        n for n in values if n not in _ORDER and n not in ("learning_rate", "tokens_per_s"))
    parts = [f"step {step}/{self.total_steps}"] + [f"{n} {values[n]:.4f}" for n in names]
    parts.append(f"lr {values['learning_rate']:.2e}")
    if "tokens_per_s" in values:
      parts.append(f"{values['tokens_per_s']:,.0f} tok/s")
    if self.examples_per_epoch and self.batch_size:
      parts.append(f"data pass {step * self.batch_size / self.examples_per_epoch:.2f}")
    if eta is not None:
      parts.append(f"ETA {_format_duration(eta)}")
    print(" | ".join(parts), file=self.stream, flush=True)
    if self.writer is not None:
      with self.writer.as_default(step=step):
        for name, value in values.items():
          tf.summary.scalar(name, value)
      self.writer.flush()
    self.history.append({"step": step, **values})
    self._last_logged = step
    self._window_start = (step, now)
    for metric in self.model.metrics:
      metric.reset_state()


class CheckpointSaver(tf_keras.callbacks.Callback):
  """Saves through a tf.train.CheckpointManager every `every` steps and at the end.

  Args:
    manager: the CheckpointManager (its checkpoint tracks model and optimizer).
    every: steps between saves.
    on_save: optional callable(step) run after each save (e.g. cleanup on non-chief workers).
  """

  def __init__(self, manager: tf.train.CheckpointManager, every: int, on_save=None):
    super().__init__()
    self.manager = manager
    self.every = every
    self.on_save = on_save
    self._last_saved = None

  def _save(self, step: int):
    self.manager.save(checkpoint_number=step)
    self._last_saved = step
    if self.on_save is not None:
      self.on_save(step)

  def on_train_begin(self, logs=None):
    self._last_saved = int(self.model.optimizer.iterations.numpy())

  def on_train_batch_end(self, batch, logs=None):
    step = int(self.model.optimizer.iterations.numpy())
    if step // self.every > self._last_saved // self.every:
      self._save(step)

  def on_train_end(self, logs=None):
    step = int(self.model.optimizer.iterations.numpy())
    if step != self._last_saved:
      self._save(step)
