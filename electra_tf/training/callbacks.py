"""Keras callbacks: progress lines with tokens/s and ETA, TensorBoard scalars, checkpoints."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator

import tensorflow as tf
import tf_keras

from electra_tf import fileio
from electra_tf.errors import RuntimeFailure, tf_error_line
from electra_tf.filenames import CKPT_NAME


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
    first_step: the step the data began to be read at (a later phase's first step).
  """

  def __init__(self, total_steps: int, log_steps: int, tokens_per_step: int,
               summary_dir: str | None = None, examples_per_epoch: int | None = None,
               batch_size: int | None = None, stream=None, first_step: int = 0):
    super().__init__()
    self.first_step = first_step
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
    # Skipped steps are worth a column only when there were some.
    names = [n for n in names if n != "nonfinite_steps" or values[n]]
    parts = [f"step {step}/{self.total_steps}"] + [f"{n} {values[n]:.4f}" for n in names]
    parts.append(f"lr {values['learning_rate']:.2e}")
    if "tokens_per_s" in values:
      parts.append(f"{values['tokens_per_s']:,.0f} tok/s")
    if self.examples_per_epoch and self.batch_size:
      passes = (step - self.first_step) * self.batch_size / self.examples_per_epoch
      parts.append(f"data pass {passes:.2f}")
    if eta is not None:
      parts.append(f"ETA {_format_duration(eta)}")
    print(" | ".join(parts), file=self.stream, flush=True)
    if self.writer is not None:
      try:
        with self.writer.as_default(step=step):
          for name, value in values.items():
            tf.summary.scalar(name, value)
        self.writer.flush()
      except (tf.errors.OpError, OSError) as exc:  # e.g. a full disk: training matters more
        print(f"warning: TensorBoard summaries stopped ({tf_error_line(exc)})", file=self.stream)
        self.writer = None
    self.history.append({"step": step, **values})
    self._last_logged = step
    self._window_start = (step, now)
    for metric in self.model.metrics:
      metric.reset_state()


class CheckpointSaver(tf_keras.callbacks.Callback):
  """Saves through a tf.train.CheckpointManager every `every` steps and at the end.

  A save that fails (disk full, directory gone) removes what it wrote and raises a
  RuntimeFailure naming the checkpoint that is still intact.

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
    try:
      self.manager.save(checkpoint_number=step)
    except (tf.errors.OpError, OSError) as exc:
      prefix = fileio.join(self.manager.directory, f"{CKPT_NAME}-{step}")
      for path in fileio.glob(prefix + ".*") + fileio.glob(prefix + "_temp*"):
        with contextlib.suppress(tf.errors.OpError, OSError):
          if fileio.isdir(path):
            fileio.rmtree(path)
          else:
            fileio.remove(path)
      kept = self.manager.latest_checkpoint
      raise RuntimeFailure(
          f"could not write checkpoint {prefix} ({tf_error_line(exc)}); "
          + (f"{kept} is intact" if kept else "no earlier checkpoint exists")
          + "; free space or fix the directory, then rerun the same command to resume"
      ) from None
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


class NonFiniteGuard(tf_keras.callbacks.Callback):
  """Stops the run when a step had a non-finite loss or gradient (policy "stop").

  The train step has already dropped that step's update (ElectraPretrainer.train_step);
  raising here, before the checkpoint callback runs, keeps the last good checkpoint the
  newest. With policy "skip" it only reports skipped steps.
  """

  def __init__(self, policy: str, manager: tf.train.CheckpointManager, stream=None):
    super().__init__()
    self.policy = policy
    self.manager = manager
    self.stream = stream or sys.stdout
    self._reported = 0.0
    self._since = 0

  def on_train_begin(self, logs=None):
    self._since = int(self.model.optimizer.iterations.numpy())

  def on_train_batch_end(self, batch, logs=None):
    step = int(self.model.optimizer.iterations.numpy())
    skipped = float((logs or {}).get("nonfinite_steps", 0.0))
    if skipped and self.policy == "stop":
      kept = self.manager.latest_checkpoint or "none was saved yet"
      raise RuntimeFailure(
          f"training diverged: a non-finite loss or gradient in steps {self._since + 1}.."
          f"{step} (its update was not applied); stopped with the last checkpoint kept "
          f"({kept}); lower --learning_rate, check the data, or pass --on_nonfinite=skip")
    if skipped != self._reported:  # more skips, or a new logging window (reset to 0)
      if skipped > self._reported:
        print(f"warning: skipped the update of {skipped:.0f} step(s) with a non-finite loss or "
              f"gradient so far in this logging window (step {step})", file=self.stream)
      self._reported = skipped
    self._since = step


class PreemptionSaver(tf_keras.callbacks.Callback):
  """On SIGTERM or SIGINT, ends training after the current step so the checkpoint saves.

  The signal only sets a flag; at the next batch end training stops, and the
  CheckpointSaver's end-of-training save writes the step reached. A second signal acts
  as it would without this callback (the default handler).

  Args:
    strategy: a multi-worker strategy, or None. With several workers a signal reaches one
      of them, but they must stop at the same step for the (collective) save: at every
      batch end the workers sum their flags with one small all-reduce, and all stop when
      any was signalled.
  """

  def __init__(self, strategy=None):
    super().__init__()
    self.signal_name: str | None = None
    self.peer_signalled = False  # stopped because another worker was signalled
    self._agree = None
    if strategy is not None:

      @tf.function
      def agree(flag):
        flags = strategy.run(lambda x: x, args=(flag,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, flags, axis=None)

      self._agree = agree

  @contextlib.contextmanager
  def catching_signals(self) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
      yield  # signal handlers can only be installed from the main thread
      return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

    def handle(signum, frame):
      self.signal_name = signal.Signals(signum).name
      for sig, handler in previous.items():
        signal.signal(sig, handler)

    for sig in previous:
      signal.signal(sig, handle)
    try:
      yield
    finally:
      for sig, handler in previous.items():
        signal.signal(sig, handler)

  def on_train_batch_end(self, batch, logs=None):
    stop = bool(self.signal_name)
    if self._agree is not None:
      stop = float(self._agree(tf.constant(1.0 if stop else 0.0))) > 0
      self.peer_signalled = stop and not self.signal_name
    if stop:
      self.model.stop_training = True


def batch_description(config) -> str:
  """'global batch B x L tokens[ in k micro-batches per replica][, deterministic]'."""
  micro = config.gradient_accumulation_steps
  return (f"global batch {config.batch_size} x {config.max_seq_length} tokens"
          + (f" in {micro} micro-batches per replica" if micro > 1 else "")
          + (", deterministic" if config.deterministic else ""))
