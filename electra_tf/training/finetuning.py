"""The fine-tuning run: restore the discriminator's encoder, train a task head, keep the best."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from typing import Any, Protocol

import numpy as np
import tensorflow as tf
import tf_keras

from electra_tf import atomic, fileio
from electra_tf.checkpoints import converter
from electra_tf.config import EncoderConfig, FinetuneConfig
from electra_tf.errors import UserError
from electra_tf.filenames import (
  BEST_SUBDIR,
  CHECKPOINT_SUBDIR,
  CKPT_NAME,
  EVAL_LOGS,
  FINETUNE_RECORD,
  RESULTS_NAME,
  TRAIN_LOGS,
)
from electra_tf.model.finetune_models import FinetuneModel, build_finetune_model
from electra_tf.training.callbacks import ProgressLogger
from electra_tf.training.finetuned import save_finetuned
from electra_tf.training.optimizer import WarmupLinearDecay, create_optimizer


class Task(Protocol):
  """What the runner needs from a task (see electra_tf/tasks/)."""

  name: str
  main_metric: str

  def build_model(self, encoder_config: EncoderConfig) -> FinetuneModel: ...
  def train_dataset(self) -> tuple[tf.data.Dataset, int]: ...
  def eval_dataset(self) -> tf.data.Dataset: ...
  def evaluate(self, outputs: dict[str, np.ndarray]) -> tuple[dict[str, float], dict[str, str]]: ...
  def metadata(self) -> dict[str, Any]: ...


@dataclasses.dataclass
class FinetuneResult:
  model: FinetuneModel
  history: list[dict[str, Any]]
  best: dict[str, Any] | None
  total_steps: int


def layerwise_multipliers(num_layers: int, decay: float, authors: bool = False
                          ) -> list[tuple[str, float]]:
  """(variable-name regex, LR factor) for layer-wise decay; unmatched variables (heads) get 1.

  Layer i of N (0-based) gets decay ** (N - i) and the embeddings (with their projection)
  decay ** (N + 1). `authors` adds one more factor of decay to every encoder variable, as
  google-research/electra does (its top layer trains at decay ** 2 of the head's LR).
  """
  if decay == 1.0:
    return []
  extra = 1 if authors else 0
  rules = [(rf"/encoder/layer_{i}/", decay ** (num_layers - i + extra))
           for i in range(num_layers)]
  rules.append((r"/encoder/embeddings", decay ** (num_layers + 1 + extra)))
  return rules


def make_optimizer(config: FinetuneConfig, total_steps: int, num_layers: int):
  """AdamW (no bias correction, no decay on LayerNorm/bias), 10% warmup, linear decay to 0."""
  schedule = WarmupLinearDecay(config.learning_rate, total_steps,
                               int(config.warmup_fraction * total_steps))
  return create_optimizer(
      "adamw", schedule, weight_decay=config.weight_decay, precision=config.precision,
      bias_correction=config.adam_bias_correction,
      lr_multipliers=layerwise_multipliers(num_layers, config.layerwise_lr_decay,
                                           config.authors_layer_decay))


def _check_run_config(output_dir: str, record: dict[str, Any]) -> None:
  """Refuses to resume a run in `output_dir` made with another task, model or config."""
  path = fileio.join(output_dir, FINETUNE_RECORD)
  if not fileio.exists(path):
    return
  saved = json.loads(fileio.read_text(path))
  # Through the config classes, a field added since the run began reads as its default.
  for key, cls in (("encoder", EncoderConfig), ("finetune", FinetuneConfig)):
    if isinstance(saved.get(key), dict):
      try:
        saved[key] = cls.from_dict(saved[key]).to_dict()
      except (ValueError, TypeError):
        pass  # compared as written: the message below names the fields that differ
  keys = ("task", "encoder", "finetune")
  diffs = [k for k in keys if saved.get(k) != record.get(k)]
  if diffs:
    detail = []
    for k in diffs:
      if isinstance(saved.get(k), dict) and isinstance(record.get(k), dict):
        detail += [f"{k}.{f}: {saved[k].get(f)!r} -> {record[k].get(f)!r}"
                   for f in sorted(set(saved[k]) | set(record[k]))
                   if saved[k].get(f) != record[k].get(f)]
      else:
        detail.append(f"{k}: {saved.get(k)!r} -> {record.get(k)!r}")
    raise UserError(f"{output_dir} holds a fine-tuning run with other settings "
                    f"({'; '.join(detail[:4])}); use a new --output_dir")


class _Evaluator(tf_keras.callbacks.Callback):
  """After each epoch: predict the eval set, score it, keep the best checkpoint and outputs."""

  def __init__(self, task: Task, eval_dataset, output_dir: str, record: dict, vocab,
               manager: tf.train.CheckpointManager | None, stream):
    super().__init__()
    self.task, self.eval_dataset, self.output_dir = task, eval_dataset, output_dir
    self.record, self.vocab, self.manager, self.stream = record, vocab, manager, stream
    self.writer = tf.summary.create_file_writer(fileio.join(output_dir, EVAL_LOGS))
    self.history: list[dict[str, Any]] = []
    self.best: dict[str, Any] | None = None
    results = fileio.join(output_dir, RESULTS_NAME)
    if fileio.exists(results):  # a resumed run remembers its best so far
      saved = json.loads(fileio.read_text(results))
      self.history, self.best = saved.get("epochs", []), saved.get("best")

  def on_epoch_end(self, epoch, logs=None):
    step = int(self.model.optimizer.iterations.numpy())
    if self.manager is not None:
      self.manager.save(checkpoint_number=step)
    if self.eval_dataset is None:
      return
    start = time.time()
    outputs = self.model.predict(self.eval_dataset, verbose=0)
    metrics, artifacts = self.task.evaluate(outputs)
    entry = {"epoch": epoch + 1, "step": step, **metrics}
    self.history.append(entry)
    shown = " | ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
                       for k, v in metrics.items())
    print(f"eval epoch {epoch + 1} step {step} | {shown} | {time.time() - start:.0f}s",
          file=self.stream, flush=True)
    with self.writer.as_default(step=step):
      for name, value in metrics.items():
        if isinstance(value, (int, float)):
          tf.summary.scalar(name, value)
    self.writer.flush()
    main = self.task.main_metric
    if self.best is None or metrics[main] > self.best[main]:
      self.best = entry
      self._save_best(artifacts)
    atomic.atomic_write_text(
        fileio.join(self.output_dir, RESULTS_NAME),
        json.dumps({"best": self.best, "main_metric": main, "epochs": self.history}, indent=2))

  def _save_best(self, artifacts: dict[str, str]) -> None:
    save_finetuned(self.model, {**self.record, "eval": self.best}, self.vocab,
                   fileio.join(self.output_dir, BEST_SUBDIR), artifacts)
    for name, text in artifacts.items():  # the best epoch's predictions, at the top level too
      atomic.atomic_write_text(fileio.join(self.output_dir, name), text)


def _restore_init(model: FinetuneModel, init_checkpoint: str | None, source, stream) -> None:
  if not init_checkpoint:
    print("no --init_checkpoint: the encoder starts from random weights", file=stream)
    return
  report = converter.restore_into(source or init_checkpoint, discriminator=model.encoder)
  print(f"restored the encoder from {init_checkpoint}: {report.summary()}", file=stream)


def run_finetuning(task: Task, config: FinetuneConfig, encoder_config: EncoderConfig,
                   output_dir: str, strategy, *, init_checkpoint: str | None = None,
                   init_source=None, vocab=None, stream=None) -> FinetuneResult:
  """Fine-tunes `task` from `init_checkpoint` and evaluates after every epoch.

  Writes to `output_dir`: finetune.json (settings), checkpoints/ (the latest epoch, for
  resuming), best/ (the best epoch by the task's main metric, with its predictions),
  eval_results.json, the best epoch's prediction files, and TensorBoard logs in train/ and
  eval/. A rerun with the same settings resumes after the last finished epoch.
  """
  stream = stream or sys.stdout
  fileio.makedirs(output_dir)
  record = {"task": task.name, "encoder": encoder_config.to_dict(),
            "finetune": config.to_dict(), "init_checkpoint": init_checkpoint,
            **task.metadata()}
  _check_run_config(output_dir, record)
  atomic.atomic_write_text(fileio.join(output_dir, FINETUNE_RECORD), json.dumps(record, indent=2))

  train_data, num_examples = task.train_dataset()
  if num_examples == 0:
    raise UserError("the training set is empty after preprocessing; check --train_file")
  batch = config.batch_size
  epochs = max(1, math.ceil(config.num_train_epochs))
  total_steps = max(1, round(config.num_train_epochs * num_examples / batch))
  steps_per_epoch = max(1, total_steps // epochs)
  total_steps = steps_per_epoch * epochs
  train_ds = (train_data.shuffle(min(num_examples, 100_000), seed=config.seed)
              .repeat().batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE))
  eval_ds = task.eval_dataset()
  if eval_ds is not None:
    eval_ds = eval_ds.batch(config.eval_batch_size).prefetch(tf.data.AUTOTUNE)
  options = tf.data.Options()
  options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
  train_ds = train_ds.with_options(options)

  with strategy.scope():
    model = build_finetune_model(task.build_model(encoder_config))
    _restore_init(model, init_checkpoint, init_source, stream)
    model.compile(optimizer=make_optimizer(config, total_steps, encoder_config.num_layers))
    ckpt = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
    manager = tf.train.CheckpointManager(ckpt, fileio.join(output_dir, CHECKPOINT_SUBDIR), 1,
                                         checkpoint_name=CKPT_NAME)
    if manager.latest_checkpoint:
      ckpt.restore(manager.latest_checkpoint).expect_partial()
      print(f"resuming from {manager.latest_checkpoint}", file=stream)
  initial_epoch = int(model.optimizer.iterations.numpy()) // steps_per_epoch
  if initial_epoch >= epochs:
    print(f"{output_dir} already finished {epochs} epochs; nothing to do", file=stream)
  print(f"fine-tuning {task.name}: {num_examples:,} training examples, batch {batch}, "
        f"{epochs} epoch(s) of {steps_per_epoch} steps, {strategy.num_replicas_in_sync} "
        f"replica(s)", file=stream, flush=True)
  evaluator = _Evaluator(task, eval_ds, output_dir, record, vocab, manager, stream)
  progress = ProgressLogger(total_steps, config.log_steps,
                            batch * config.max_seq_length,
                            summary_dir=fileio.join(output_dir, TRAIN_LOGS),
                            examples_per_epoch=num_examples, batch_size=batch, stream=stream)
  if initial_epoch < epochs:
    model.fit(train_ds, epochs=epochs, initial_epoch=initial_epoch,
              steps_per_epoch=steps_per_epoch, callbacks=[progress, evaluator], verbose=0)
  return FinetuneResult(model, evaluator.history, evaluator.best, total_steps)
