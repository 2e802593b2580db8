"""The pretraining run: build under a strategy, resume, fit with callbacks, export."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import sys

import tensorflow as tf
import tf_keras

from electra_tf import filenames
from electra_tf.checkpoints import converter, native
from electra_tf.config import PretrainConfig
from electra_tf.data import pipeline
from electra_tf.errors import RuntimeFailure, UserError
from electra_tf.model.pretrainer import ElectraPretrainer
from electra_tf.training import artifacts, callbacks, resume
from electra_tf.training.optimizer import WarmupLinearDecay, create_optimizer


class Preempted(Exception):
  """The run stopped on SIGTERM/SIGINT after saving; the entry point exits 128 + signal."""

  def __init__(self, signal_name: str):
    super().__init__(signal_name)
    self.signal_name = signal_name
    self.exit_code = 128 + int(getattr(signal, signal_name))


@dataclasses.dataclass
class RunResult:
  """The trained model and the metric lines logged during this run."""

  model: ElectraPretrainer
  history: list[dict]
  start_step: int


@dataclasses.dataclass
class TrainData:
  """Where the examples are and what they were built with."""

  files: list[str]
  vocab: object  # electra_tf.data.vocab.Vocab
  examples: int | None = None
  tokens: int | None = None


def _worker_role(strategy) -> tuple[bool, int]:
  """(is_chief, task_id) under multi-worker strategies; (True, 0) otherwise."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or not getattr(resolver, "task_type", None):
    return True, 0
  task_type, task_id = resolver.task_type, resolver.task_id or 0
  has_chief = "chief" in resolver.cluster_spec().as_dict()
  is_chief = task_type == "chief" or (not has_chief and task_type == "worker" and task_id == 0)
  return is_chief, task_id


def _collective_error(exc: Exception) -> str:
  """The informative line of a failed collective (TF puts 'Graph execution error:' first)."""
  text = getattr(exc, "message", None) or str(exc)
  for line in (ln.strip() for ln in text.splitlines()):
    if line and not line.startswith(("Graph execution error", "Detected at node", "File ",
                                      "[[", "{{")):
      return line[:240]
  return type(exc).__name__


def _is_multi_worker(strategy) -> bool:
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or not getattr(resolver, "task_type", None):
    return False
  return sum(len(tasks) for tasks in resolver.cluster_spec().as_dict().values()) > 1


def keep_replica_copies_equal() -> None:
  """Stops Grappler rewriting each replica's optimizer update with different rounding.

  Under MirroredStrategy every replica applies the (identical, all-reduced) gradients to
  its own copy of the weights. With Grappler's constant folding and arithmetic
  optimisation on, the copies on two CPU devices drifted apart by an ulp within 4 steps
  (gradients and Adam moments stayed equal, the step applied to the weights did not),
  and a checkpoint keeps only the first copy, so a resumed run went on from other weights
  than the run it continued. Either pass off keeps the copies bit-equal; both are turned
  off (the tiny two-replica run showed no change in tokens/s). Must run before the train
  function is first called.
  """
  tf.config.optimizer.set_experimental_options(
      {"constant_folding": False, "arithmetic_optimization": False})


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
  """Per-replica masked batches, each input pipeline reading its own share of the files.

  Deterministic runs continue the stream exactly where `start_step` left it. Other runs
  read in parallel without an order guarantee; a resume reshuffles with a seed moved by
  `start_step`, so it does not replay the examples the run began with.
  """
  deterministic = config.deterministic
  return pipeline.distributed_dataset(
      strategy, data.files, global_batch_size=config.batch_size,
      max_seq_length=config.max_seq_length,
      max_predictions_per_seq=config.max_predictions_per_seq, mask_prob=config.mask_prob,
      vocab=data.vocab, mask_token_rate=config.mask_token_rate,
      random_token_rate=config.random_token_rate, shuffle=True,
      seed=config.seed if deterministic else config.seed + 1_000_003 * start_step,
      repeat=repeat, deterministic=deterministic,
      start_step=start_step if deterministic else 0)


def preflight(config: PretrainConfig, model_dir: str, strategy, vocab) -> list[str]:
  """Every check that needs no data or model: call it before building data (cheap, repeatable).

  Returns:
    Notes worth printing (schedule changes on resume, warmup longer than the run).
  """
  if os.path.exists(model_dir) and not os.path.isdir(model_dir):
    raise UserError(f"--model_dir {model_dir} is a file; give a directory")
  if config.batch_size % strategy.num_replicas_in_sync:
    raise UserError(f"--batch_size {config.batch_size} is not divisible by the "
                    f"{strategy.num_replicas_in_sync} replicas")
  if vocab.size != config.model.vocab_size:
    raise UserError(f"the vocab has {vocab.size} tokens but the model expects "
                    f"{config.model.vocab_size}; set model.vocab_size or use the matching vocab")
  latest = resume.newest(os.path.join(model_dir, filenames.CHECKPOINT_SUBDIR))
  notes = artifacts.save_or_check_run_config(model_dir, config, {"vocab_md5": vocab.md5},
                                             write=False, enforce=bool(latest))
  if config.warmup_steps > config.num_train_steps:
    notes.append(f"note: warmup_steps {config.warmup_steps} > num_train_steps "
                 f"{config.num_train_steps}: the learning rate never reaches its peak")
  return notes


def run_pretraining(config: PretrainConfig, data: TrainData, model_dir: str, strategy,
                    jit_compile: bool = False, stream=None, init_source=None,
                    fused_kernels: bool = True) -> RunResult:
  """Train (or resume) to config.num_train_steps.

  `init_source` (from electra_tf.checkpoints.converter.read_source) seeds the networks' weights
  when model_dir has no checkpoint yet; a resume always prefers model_dir's own.
  """
  stream = stream or sys.stdout
  notes = preflight(config, model_dir, strategy, data.vocab)
  if jit_compile and strategy.num_replicas_in_sync > 1 and not tf.config.list_logical_devices(
      "GPU") and not tf.config.list_logical_devices("TPU"):
    raise UserError("--jit_compile cannot compile across logical CPU devices; "
                    "use one device (--cpu_devices=0) or drop --jit_compile")
  is_chief, task_id = _worker_role(strategy)
  # Seeds Python, NumPy, TF and Keras' initializers: the initial weights follow the seed.
  tf_keras.utils.set_random_seed(config.seed)
  if config.deterministic:
    tf.config.experimental.enable_op_determinism()
    if strategy.num_replicas_in_sync > 1:
      keep_replica_copies_equal()
  run_ckpt_dir = os.path.join(model_dir, filenames.CHECKPOINT_SUBDIR)
  latest = resume.newest(run_ckpt_dir)
  data_info = {"vocab_md5": data.vocab.md5, "vocab_size": data.vocab.size,
               "examples": data.examples, "tokens": data.tokens}
  # Only a checkpoint makes the saved settings binding; a run that failed before its
  # first save may be retried with corrected settings.
  artifacts.save_or_check_run_config(model_dir, config, data_info, write=is_chief,
                                     enforce=bool(latest))
  for note in notes:
    print(note, file=stream)

  model = build_model(config, strategy, jit_compile, fused_kernels)
  checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
  ckpt_dir = run_ckpt_dir
  if not is_chief:  # every worker saves (the save is collective); only the chief's is kept
    ckpt_dir = os.path.join(model_dir, ".worker_tmp", f"worker_{task_id}")
  manager = tf.train.CheckpointManager(checkpoint, ckpt_dir, max_to_keep=config.keep_checkpoints,
                                       checkpoint_name=filenames.CKPT_NAME)
  if is_chief:
    for path in resume.remove_partial_saves(run_ckpt_dir):
      print(f"removed {path}, left by an interrupted save", file=stream)
  restored = resume.restore_newest_valid(checkpoint, run_ckpt_dir, stream)
  if restored:
    print(f"resumed from {restored} at step {int(model.optimizer.iterations.numpy())}",
          file=stream)
  elif init_source is not None:
    report = converter.restore_into(init_source, model.generator, model.discriminator,
                                  partial=True)
    print(report.summary(), file=stream)
  start = int(model.optimizer.iterations.numpy())
  remaining = config.num_train_steps - start
  if remaining <= 0:
    print(f"{model_dir} is already at step {start} of {config.num_train_steps}; nothing to do "
          "(raise --num_train_steps to train longer, or use a new --model_dir)", file=stream)
    return RunResult(model, [], start)

  def cleanup(step):
    if not is_chief:
      shutil.rmtree(ckpt_dir, ignore_errors=True)

  progress = callbacks.ProgressLogger(
      config.num_train_steps, config.log_steps, config.tokens_per_step,
      summary_dir=os.path.join(model_dir, filenames.TRAIN_LOGS) if is_chief else None,
      examples_per_epoch=data.examples, batch_size=config.batch_size,
      stream=stream if is_chief else open(os.devnull, "w"))
  saver = callbacks.CheckpointSaver(manager, config.checkpoint_steps, on_save=cleanup)
  guard = callbacks.NonFiniteGuard(config.on_nonfinite, manager, stream=stream)
  preemption = callbacks.PreemptionSaver(strategy if _is_multi_worker(strategy) else None)
  dataset = make_dataset(config, data, strategy, start_step=start)
  print(f"training steps {start}..{config.num_train_steps} on {strategy.num_replicas_in_sync} "
        f"replica(s), global batch {config.batch_size} x {config.max_seq_length} tokens"
        + (", deterministic" if config.deterministic else ""), file=stream, flush=True)
  try:
    with preemption.catching_signals():
      # The guard runs first: a diverged step must stop the run before anything saves it.
      model.fit(dataset, epochs=1, steps_per_epoch=remaining, verbose=0,
                callbacks=[guard, progress, preemption, saver])
  except tf.errors.DataLossError as exc:
    raise pipeline.explain_data_error(exc) from exc
  except tf.errors.InvalidArgumentError as exc:
    explained = pipeline.recognised_data_error(exc)
    if explained is None:
      raise  # not the data's fault: keep the traceback
    raise explained from exc
  except (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.CancelledError,
          tf.errors.DeadlineExceededError) as exc:
    if not _is_multi_worker(strategy):
      raise
    kept = resume.newest(run_ckpt_dir) or "no checkpoint yet"
    raise RuntimeFailure(
        f"lost contact with another worker ({_collective_error(exc)}); restart every "
        f"worker with the same command to resume from the newest checkpoint ({kept})"
    ) from exc
  if preemption.signal_name or preemption.peer_signalled:
    step = int(model.optimizer.iterations.numpy())
    cause = preemption.signal_name or "a signal to another worker"
    print(f"stopped by {cause} at step {step} with its checkpoint saved in "
          f"{run_ckpt_dir}; rerun the same command to resume", file=stream, flush=True)
    raise Preempted(preemption.signal_name or "SIGTERM")
  # The MLM baseline has no discriminator: its encoder is what fine-tuning starts from.
  encoder_model = model.discriminator or model.generator
  out = os.path.join(model_dir, filenames.DISCRIMINATOR_SUBDIR)
  if is_chief:
    native.save_discriminator(encoder_model, data.vocab.path, out)
    print(f"wrote the discriminator for fine-tuning to {out}", file=stream)
  else:
    tmp = os.path.join(model_dir, ".worker_tmp", f"disc_{task_id}")
    native.save_discriminator(encoder_model, None, tmp)
    shutil.rmtree(tmp, ignore_errors=True)
  return RunResult(model, progress.history, start)
