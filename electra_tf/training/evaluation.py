"""Held-out evaluation of a pretraining run: the same batches, masks and draws every time."""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import tensorflow as tf
import tf_keras

from electra_tf import fileio, filenames
from electra_tf.config import PretrainConfig
from electra_tf.data import pipeline, records
from electra_tf.errors import UserError
from electra_tf.training import resume

# Fixed, so every evaluation of every run reads the same examples with the same masks.
EVAL_SEED = 20_200_323
# Printed in this order; other metrics follow.
_SHOWN = ("gen_loss", "gen_accuracy", "disc_loss", "disc_accuracy", "disc_auc", "mlm_loss",
          "mlm_accuracy")


def eval_dataset(config: PretrainConfig, files: list[str], vocab, strategy,
                 max_batches: int | None):
  """The first `max_batches` global batches of `files`, in order, masked with EVAL_SEED.

  Deterministic and not repeated: iterating it again yields the same batches and masks.
  """
  return pipeline.distributed_dataset(
      strategy, files, global_batch_size=config.batch_size,
      max_seq_length=config.max_seq_length,
      max_predictions_per_seq=config.max_predictions_per_seq, mask_prob=config.mask_prob,
      vocab=vocab, mask_token_rate=config.mask_token_rate,
      random_token_rate=config.random_token_rate, shuffle=False, seed=EVAL_SEED, repeat=False,
      deterministic=True, max_batches=max_batches)


def frequency_baseline(files: list[str], vocab, max_seq_length: int,
                       max_records: int = 20_000) -> float:
  """Accuracy of always predicting the most frequent maskable token at masked positions.

  Masked positions are drawn uniformly from the maskable tokens (real tokens other than
  [CLS], [SEP] and [MASK]), so this is the most frequent one's share of them, counted
  over the first `max_records` records of `files`.
  """
  parse = pipeline.parse_fn(max_seq_length)
  records = tf.data.TFRecordDataset(files).take(max_records).map(parse).batch(1024)
  counts = np.zeros(vocab.size, np.int64)
  unmaskable = np.array(sorted(vocab.unmaskable_ids))
  for batch in records.as_numpy_iterator():
    ids = batch["input_ids"][batch["input_mask"] > 0]
    counts += np.bincount(ids, minlength=vocab.size)[:vocab.size]
  counts[unmaskable] = 0
  total = counts.sum()
  return float(counts.max() / total) if total else 0.0


def format_line(step: int, logs: dict[str, float], baseline: float | None) -> str:
  parts = [f"eval step {step}"]
  for key in (*_SHOWN, *sorted(set(logs) - set(_SHOWN))):
    if key in logs and key not in ("loss", "grad_norm", "nonfinite_steps"):
      parts.append(f"{key} {logs[key]:.4f}")
      if key == "gen_accuracy" and baseline is not None:
        parts[-1] += f" (frequency baseline {baseline:.4f})"
  return " | ".join(parts)


def held_out_summary(history: list[dict], start_step: int, end_step: int | None,
                     baseline: float | None, began_at: int | None = None,
                     detector_from: int = 0) -> list[str]:
  """The last held-out evaluation, its generator accuracy against the frequency baseline,
  and how the discriminator's AUC moved over the second half of the run (or phase) from
  `start_step` to `end_step`: from the first evaluation at or after the half-way step to
  the last.

  That line is left out when it would not mean what it says: when this process began
  training (`began_at`, default `start_step`) at or after the half-way step, so the
  half-way evaluation belongs to an earlier process; and when the discriminator first
  trains at `detector_from` (a two-stage run's generator stage, 0 otherwise) at or after
  the half-way step, so the comparison would start from an untrained detector.
  """
  if not history:
    return []
  last = history[-1]
  figures = []
  for key in ("gen_accuracy", "disc_auc", "mlm_accuracy"):
    if key in last:
      figures.append(f"{key} {last[key]:.3f}")
      if key == "gen_accuracy" and baseline:
        figures[-1] += f" ({last[key] / baseline:.1f}x the frequency baseline {baseline:.3f})"
  lines = [f"held-out at step {int(last['step'])}: {', '.join(figures)}"]
  if not end_step or "disc_auc" not in last:
    return lines
  half_way = (start_step + end_step) / 2
  began_at = start_step if began_at is None else began_at
  if began_at >= half_way or detector_from >= half_way:
    return lines
  second_half = [e for e in history if e["step"] >= half_way]
  if len(second_half) > 1:
    first = second_half[0]
    lines.append(f"held-out disc_auc over the second half: {first['disc_auc']:.3f} at step "
                 f"{int(first['step'])}, {last['disc_auc']:.3f} at step {int(last['step'])} "
                 f"({last['disc_auc'] - first['disc_auc']:+.3f})")
  return lines


class HeldOutEvaluator(tf_keras.callbacks.Callback):
  """Evaluates on held-out data every `every` steps and at the end of training.

  Lines go to `stream`, scalars to TensorBoard in model_dir/eval (beside train/). Run it
  after the progress logger: an evaluation resets the model's metrics, so it should follow
  a logged window.

  Args:
    dataset: from `eval_dataset`.
    steps: its number of batches.
    every: steps between evaluations (0: only at the end).
    summary_dir: TensorBoard directory, or None.
    baseline: the frequency baseline printed beside the generator's accuracy.
    stream: where lines go (None: nowhere).
  """

  def __init__(self, dataset, steps: int, every: int, summary_dir: str | None,
               baseline: float | None, stream=None):
    super().__init__()
    self.dataset = dataset
    self.steps = steps
    self.every = every
    self.baseline = baseline
    self.stream = stream
    self.writer = tf.summary.create_file_writer(summary_dir) if summary_dir else None
    self.history: list[dict[str, float]] = []
    self._last = 0
    self.began_at: int | None = None  # the step this process began training at

  def on_train_begin(self, logs=None):
    self._last = int(self.model.optimizer.iterations.numpy())
    if self.began_at is None:  # a two-stage run fits once per stage
      self.began_at = self._last

  def on_train_batch_end(self, batch, logs=None):
    step = int(self.model.optimizer.iterations.numpy())
    if self.every and step // self.every > self._last // self.every:
      self.evaluate(step)

  def on_train_end(self, logs=None):
    step = int(self.model.optimizer.iterations.numpy())
    if step != self._last:
      self.evaluate(step)

  def summary(self, start_step: int, end_step: int) -> list[str]:
    """held_out_summary of this evaluator's evaluations, for a run (or phase) from
    start_step to end_step, knowing where this process began and where a two-stage run's
    discriminator starts training."""
    detector_from = getattr(getattr(self.model, "config", None), "two_stage_steps", 0)
    return held_out_summary(self.history, start_step, end_step, self.baseline,
                            began_at=self.began_at, detector_from=detector_from or 0)

  def evaluate(self, step: int) -> dict[str, float]:
    self._last = step
    results = {k: float(v) for k, v in
               self.model.evaluate(self.dataset, steps=self.steps, verbose=0,
                                                   return_dict=True).items()}
    self.history.append({"step": step, **results})
    if self.stream is not None:
      print(format_line(step, results, self.baseline), file=self.stream, flush=True)
    if self.writer is not None:
      with self.writer.as_default(step=step):
        for key, value in results.items():
          tf.summary.scalar(key, value)
        if self.baseline is not None:
          tf.summary.scalar("frequency_baseline", self.baseline)
      self.writer.flush()
    return results


@dataclasses.dataclass
class HeldOut:
  """Held-out pretraining data and how often to evaluate on it.

  Attributes:
    files: TFRecord shards built with the training vocab and sequence length.
    vocab: that vocab.
    every: steps between evaluations (0: only at the end of training).
    max_batches: global batches per evaluation (None: the whole set).
  """

  files: list[str]
  vocab: object
  every: int = 0
  max_batches: int | None = 50

  def dataset(self, config: PretrainConfig, strategy):
    return eval_dataset(config, self.files, self.vocab, strategy, self.max_batches)

  def num_batches(self, config: PretrainConfig) -> int:
    """Global batches per evaluation: max_batches, or fewer if the data holds fewer."""
    available = sum(records.record_counts(self.files)) // config.batch_size
    if not available:
      raise UserError(f"the held-out data ({len(self.files)} file(s)) has fewer than one "
                      f"batch of {config.batch_size} examples; give more held-out text")
    return min(available, self.max_batches or available)

  def baseline(self, config: PretrainConfig) -> float:
    return frequency_baseline(self.files, self.vocab, config.max_seq_length)

  def callback(self, config: PretrainConfig, strategy, model_dir: str,
               stream) -> HeldOutEvaluator:
    """The evaluator of a run (every worker evaluates; `stream` None on non-chiefs)."""
    baseline = self.baseline(config)
    if stream is not None:
      print(f"held-out data: {len(self.files)} file(s); most frequent token's share of the "
            f"maskable tokens (the frequency baseline of gen_accuracy): {baseline:.4f}",
            file=stream, flush=True)
    return HeldOutEvaluator(self.dataset(config, strategy), self.num_batches(config), self.every,
                            fileio.join(model_dir, filenames.EVAL_LOGS) if stream else None,
                            baseline, stream)


def evaluate_saved_run(model, model_dir: str, held_out: HeldOut, strategy,
                       stream=None) -> dict:
  """Evaluates model_dir's newest checkpoint once (no training); `model` from build_model."""
  checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
  ckpt_dir = fileio.join(model_dir, filenames.CHECKPOINT_SUBDIR)
  if not resume.restore_newest_valid(checkpoint, ckpt_dir, stream):
    raise UserError(f"{model_dir} has no checkpoint to evaluate; train first, or point "
                    "--model_dir at a run")
  config = model.config
  evaluator = HeldOutEvaluator(held_out.dataset(config, strategy),
                               held_out.num_batches(config), 0, None,
                               held_out.baseline(config), stream or sys.stdout)
  evaluator.set_model(model)
  return evaluator.evaluate(int(model.optimizer.iterations.numpy()))
