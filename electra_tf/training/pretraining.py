"""The pretraining run: check, build under a strategy, resume, fit with callbacks, export."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
from collections.abc import Iterator

import tensorflow as tf
import tf_keras

from electra_tf import fileio, filenames
from electra_tf.checkpoints import converter, native
from electra_tf.config import PretrainConfig
from electra_tf.data import pipeline, records
from electra_tf.errors import RuntimeFailure, UserError
from electra_tf.model import networks
from electra_tf.model.pretrainer import ElectraPretrainer
from electra_tf.training import artifacts, callbacks, evaluation, phases, resume, workers
from electra_tf.training.optimizer import WarmupLinearDecay, create_optimizer


class Preempted(Exception):
  """The run stopped on SIGTERM/SIGINT after saving; the entry point exits 128 + signal."""

  def __init__(self, signal_name: str):
    super().__init__(signal_name)
    self.signal_name = signal_name
    self.exit_code = 128 + int(getattr(signal, signal_name))


@dataclasses.dataclass
class RunResult:
  """The trained model, the metric lines logged during this run, and its held-out summary."""

  model: ElectraPretrainer
  history: list[dict]
  start_step: int
  eval_history: list[dict] = dataclasses.field(default_factory=list)
  eval_summary: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class TrainData:
  """Where the examples are and what they were built with (training or held-out data)."""

  files: list[str]
  vocab: object  # electra_tf.data.vocab.Vocab
  examples: int | None = None
  tokens: int | None = None


def build_model(config: PretrainConfig, strategy, jit_compile: bool = False,
                fused_kernels: bool = True):
  """The compiled ElectraPretrainer and its optimizer, created under `strategy`.

  `fused_kernels`: see ElectraPretrainer (XLA-fused GELU and dropout when the step is not
  compiled as a whole).
  """
  with strategy.scope():
    model = ElectraPretrainer(config, fused_kernels=fused_kernels)
    schedule = WarmupLinearDecay(config.learning_rate, config.num_train_steps,
                                 config.warmup_steps)
    optimizer = create_optimizer(
        config.optimizer, schedule, weight_decay=config.weight_decay, beta_1=config.beta_1,
        beta_2=config.beta_2, epsilon=config.epsilon,
        bias_correction=config.adam_bias_correction, precision=config.precision)
    model.compile(optimizer=optimizer, steps_per_execution=config.steps_per_execution,
                  jit_compile=jit_compile)
  return model


def make_dataset(config: PretrainConfig, data: TrainData, strategy, repeat: bool = True,
                 start_step: int = 0):
  """Per-replica masked batches, each input pipeline reading its own share of the data,
  from where `start_step` steps left the stream (pipeline.py, positioned.py).

  The records come in the seeded stream's order in both modes, so a resume goes on with the
  examples the run left alone would have read next; only deterministic runs also draw the
  same masks.
  """
  return pipeline.distributed_dataset(
      strategy, data.files, global_batch_size=config.batch_size,
      max_seq_length=config.max_seq_length,
      max_predictions_per_seq=config.max_predictions_per_seq, mask_prob=config.mask_prob,
      vocab=data.vocab, mask_token_rate=config.mask_token_rate,
      random_token_rate=config.random_token_rate, shuffle=True, seed=config.seed,
      repeat=repeat, deterministic=config.deterministic, start_step=start_step)


def preflight(config: PretrainConfig, model_dir: str, strategy, vocab,
              phase: phases.PhaseRequest = phases.DEFAULT_REQUEST) -> list[str]:
  """Every check that needs no data or model: call it before building data (cheap, repeatable).

  `phase` (the command's phase flags) may allow a new phase's settings (training/phases.py).

  Returns:
    Notes worth printing (schedule changes on resume, warmup longer than the run).
  """
  fileio.check_path(model_dir, "--model_dir")
  if fileio.exists(model_dir) and not fileio.isdir(model_dir):
    raise UserError(f"--model_dir {model_dir} is a file; give a directory")
  replicas, micro = strategy.num_replicas_in_sync, config.gradient_accumulation_steps
  if config.batch_size % replicas:
    raise UserError(f"--batch_size {config.batch_size} is not divisible by the "
                    f"{replicas} replicas")
  if config.batch_size % (replicas * micro):
    raise UserError(f"--batch_size {config.batch_size} does not split among {replicas} "
                    f"replica(s) x {micro} micro-batches (--gradient_accumulation_steps); "
                    f"use a multiple of {replicas * micro}")
  if vocab.size != config.model.vocab_size:
    raise UserError(f"the vocab has {vocab.size} tokens but the model expects "
                    f"{config.model.vocab_size}; set model.vocab_size or use the matching vocab")
  latest = resume.newest(fileio.join(model_dir, filenames.CHECKPOINT_SUBDIR))
  phase.check(config, model_dir, bool(latest))
  notes = artifacts.save_or_check_run_config(model_dir, config, {"vocab_md5": vocab.md5,
                                                                 "tokenizer": vocab.spec.to_dict()},
                                             write=False, enforce=bool(latest),
                                             may_change=phase.may_change)
  if config.warmup_steps > config.num_train_steps:
    notes.append(f"note: warmup_steps {config.warmup_steps} > num_train_steps "
                 f"{config.num_train_steps}: the learning rate never reaches its peak")
  return notes


@dataclasses.dataclass
class _Run:
  """Where this process of a run reads and writes, and its part in the cluster."""

  model_dir: str
  ckpt_dir: str  # model_dir/checkpoints: what a resume reads
  is_chief: bool
  task_id: int
  stream: object
  phase_start: int = 0  # the step this phase of the run began at: its data stream's origin
  end_step: int = 0  # where this command stops: num_train_steps, or the phase's end

  @property
  def save_dir(self) -> str:
    """Every worker saves (the save is collective); only the chief's copy is kept."""
    if self.is_chief:
      return self.ckpt_dir
    return fileio.join(self.model_dir, ".worker_tmp", f"worker_{self.task_id}")


def run_pretraining(config: PretrainConfig, data: TrainData, model_dir: str, strategy,
                    jit_compile: bool = False, stream=None, init_source=None,
                    fused_kernels: bool = True, held_out: evaluation.HeldOut | None = None,
                    phase: phases.PhaseRequest = phases.DEFAULT_REQUEST) -> RunResult:
  """Train (or resume) to config.num_train_steps, then export the encoder for fine-tuning.

  `init_source` (from electra_tf.checkpoints.converter.read_source) seeds the networks'
  weights when model_dir has no checkpoint yet; a resume always prefers model_dir's own.
  `held_out` evaluates held-out data during and after training (model_dir/eval).
  `phase` ends this phase early or begins a new one (training/phases.py).

  Raises:
    UserError: settings that conflict with each other, the data, or model_dir's run.
    Preempted: a signal stopped the run after saving.
    RuntimeFailure: a save failed, the run diverged, or a worker was lost.
  """
  run = _begin(config, data, model_dir, strategy, jit_compile, stream or sys.stdout, phase)
  replicas = strategy.num_replicas_in_sync
  with workers.replica_copies_kept_equal(config.deterministic and replicas > 1):
    model = build_model(config, strategy, jit_compile, fused_kernels)
    manager = _restore(model, config, run, init_source)
    start = int(model.optimizer.iterations.numpy())
    run.phase_start = phases.record(model_dir, config, data, start, phase, run.is_chief, run.stream)
    run.end_step = phase.last_step(config)
    if start >= run.end_step:
      print(phases.nothing_to_do(model_dir, start, config, phase), file=run.stream)
      return RunResult(model, [], start)
    evaluator = held_out and held_out.callback(config, strategy, run.model_dir,
                                               run.stream if run.is_chief else None)
    history = _fit(model, manager, config, data, strategy, run, start, evaluator)
    _export_encoder(model, data, run)
    phases.say_if_ended(run.end_step, config, run.stream)
  return RunResult(model, history, start, evaluator.history if evaluator else [],
                   evaluator.summary(run.phase_start, run.end_step) if evaluator else [])


def _begin(config: PretrainConfig, data: TrainData, model_dir: str, strategy, jit_compile: bool,
           stream, phase: phases.PhaseRequest) -> _Run:
  """Checks the settings and seeds (phases.record writes the config once the step is known)."""
  notes = preflight(config, model_dir, strategy, data.vocab, phase)
  if jit_compile and strategy.num_replicas_in_sync > 1 and not tf.config.list_logical_devices(
      "GPU") and not tf.config.list_logical_devices("TPU"):
    raise UserError("--jit_compile cannot compile across logical CPU devices; "
                    "use one device (--cpu_devices=0) or drop --jit_compile")
  is_chief, task_id = workers.worker_role(strategy)
  # Seeds Python, NumPy, TF and Keras' initializers: the initial weights follow the seed.
  tf_keras.utils.set_random_seed(config.seed)
  if config.deterministic:
    tf.config.experimental.enable_op_determinism()
  run = _Run(model_dir, fileio.join(model_dir, filenames.CHECKPOINT_SUBDIR), is_chief,
             task_id, stream)
  for note in notes:
    print(note, file=stream)
  return run


def _restore(model, config: PretrainConfig, run: _Run, init_source
             ) -> tf.train.CheckpointManager:
  """The run's checkpoint manager, after restoring its newest readable checkpoint (or the
  initial weights of `init_source` when there is none)."""
  checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
  manager = tf.train.CheckpointManager(checkpoint, run.save_dir,
                                       max_to_keep=config.keep_checkpoints,
                                       checkpoint_name=filenames.CKPT_NAME)
  if run.is_chief:
    for path in resume.remove_partial_saves(run.ckpt_dir):
      print(f"removed {path}, left by an interrupted save", file=run.stream)
  restored = resume.restore_newest_valid(checkpoint, run.ckpt_dir, run.stream)
  if restored:
    print(f"resumed from {restored} at step {int(model.optimizer.iterations.numpy())}",
          file=run.stream)
  elif init_source is not None:
    report = converter.restore_into(init_source, model.generator, model.discriminator,
                                    partial=True)
    print(report.summary(), file=run.stream)
  return manager


def _fit(model, manager, config: PretrainConfig, data: TrainData, strategy, run: _Run,
         start: int, evaluator=None) -> list[dict]:
  """Trains from `start` to the last step; returns the logged metric lines."""
  def cleanup(step):
    if not run.is_chief:
      with contextlib.suppress(tf.errors.OpError):  # a leftover copy must not stop training
        fileio.rmtree(run.save_dir)

  progress = callbacks.ProgressLogger(
      run.end_step, config.log_steps, config.tokens_per_step, first_step=run.phase_start,
      summary_dir=fileio.join(run.model_dir, filenames.TRAIN_LOGS) if run.is_chief else None,
      examples_per_epoch=data.examples, batch_size=config.batch_size,
      stream=run.stream if run.is_chief else open(os.devnull, "w"))  # the local null device
  saver = callbacks.CheckpointSaver(manager, config.checkpoint_steps, on_save=cleanup)
  guard = callbacks.NonFiniteGuard(config.on_nonfinite, manager, stream=run.stream)
  multi_worker = workers.is_multi_worker(strategy)
  preemption = callbacks.PreemptionSaver(strategy if multi_worker else None)
  print(f"training steps {start}..{run.end_step} on {strategy.num_replicas_in_sync} "
        f"replica(s), {callbacks.batch_description(config)}", file=run.stream, flush=True)
  with _explained_failures(run, multi_worker), preemption.catching_signals():
    for stage, last_step in phases.clip(model.stage_segments(start), run.end_step):
      step = int(model.optimizer.iterations.numpy())
      model.enter_stage(stage, step)  # one stage, unless two-stage
      dataset = make_dataset(config, data, strategy, start_step=step - run.phase_start)
      # The guard runs first: a diverged step must stop the run before anything saves it.
      model.fit(dataset, epochs=1, steps_per_epoch=last_step - step, verbose=0,
                callbacks=[guard, progress, preemption, saver, *filter(None, [evaluator])])
      if preemption.signal_name or preemption.peer_signalled:
        break
  if preemption.signal_name or preemption.peer_signalled:
    cause = preemption.signal_name or "a signal to another worker"
    print(f"stopped by {cause} at step {int(model.optimizer.iterations.numpy())} with its "
          f"checkpoint saved in {run.ckpt_dir}; rerun the same command to resume",
          file=run.stream, flush=True)
    raise Preempted(preemption.signal_name or "SIGTERM")
  return progress.history


@contextlib.contextmanager
def _explained_failures(run: _Run, multi_worker: bool) -> Iterator[None]:
  """Bad data and lost workers as one clear error; anything else keeps its traceback."""
  try:
    yield
  except tf.errors.DataLossError as exc:
    raise records.explain_data_error(exc) from exc
  except tf.errors.InvalidArgumentError as exc:
    explained = records.recognised_data_error(exc)
    if explained is None:
      raise  # not the data's fault: keep the traceback
    raise explained from exc
  except (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.CancelledError,
          tf.errors.DeadlineExceededError) as exc:
    if not multi_worker:
      raise
    kept = resume.newest(run.ckpt_dir) or "no checkpoint yet"
    raise RuntimeFailure(
        f"lost contact with another worker ({workers.collective_error(exc)}); restart every "
        f"worker with the same command to resume from the newest checkpoint ({kept})"
    ) from exc


def _export_encoder(model, data: TrainData, run: _Run) -> None:
  """Writes model_dir/discriminator, what fine-tuning starts from (the chief's; every worker
  takes part in the save)."""
  # The MLM baseline has no discriminator: its encoder is what fine-tuning starts from.
  encoder_model = networks.standalone_discriminator(model.discriminator or model.generator)
  if run.is_chief:
    out = fileio.join(run.model_dir, filenames.DISCRIMINATOR_SUBDIR)
    native.save_discriminator(encoder_model, data.vocab, out)
    print(f"wrote the discriminator for fine-tuning to {out}", file=run.stream)
  else:
    tmp = fileio.join(run.model_dir, ".worker_tmp", f"disc_{run.task_id}")
    native.save_discriminator(encoder_model, None, tmp)
    fileio.rmtree(tmp)
