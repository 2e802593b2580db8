"""Pretraining in phases: one run continued at another sequence length or batch size.

Two-phase pretraining (BERT's and NVIDIA's recipe: most steps at 128 tokens, the rest at
512) is one run in one model_dir. A phase ends at `--phase_end_step`; the next one is the
same command with `--new_phase` and its own max_seq_length, batch size and data. It
restores the run's newest checkpoint (weights, optimizer slots, step) and carries on under
the one learning-rate schedule over num_train_steps, so warmup is not repeated.

model_dir/config.json keeps the phases as a list of {start_step, end_step, max_seq_length,
max_predictions_per_seq, batch_size}, the current phase last; its "pretrain" entry is the
current phase's config, which a resume is checked against. With --deterministic, a phase's
input stream is a function of (seed, steps since the phase began), so a run killed in any
phase and restarted ends as an uninterrupted one.
"""

from __future__ import annotations

import dataclasses

from electra_tf import fileio
from electra_tf.config import PHASE_FIELDS, PretrainConfig
from electra_tf.data import manifest as manifest_lib
from electra_tf.data.vocab import copy_vocab
from electra_tf.errors import UserError
from electra_tf.training import artifacts

_DOCS = "docs/pretraining.md, section 7"


class PhaseOver(UserError):
  """The command is that of a phase the run has left: nothing to do (not a failure)."""


@dataclasses.dataclass(frozen=True)
class PhaseRequest:
  """What a command asks of the run's phases.

  Attributes:
    new_phase: the run may continue in a new phase, whose PHASE_FIELDS differ from those
      of model_dir's current phase (when they are equal, this is an ordinary resume).
    end_step: stop at this step, its checkpoint saved, while the learning-rate schedule
      still runs over num_train_steps: the end of a phase. None: run to num_train_steps.
  """

  new_phase: bool = False
  end_step: int | None = None

  @property
  def may_change(self) -> tuple[str, ...]:
    """The resume-critical fields allowed to differ from model_dir's saved config."""
    return PHASE_FIELDS if self.new_phase else ()

  def last_step(self, config: PretrainConfig) -> int:
    return config.num_train_steps if self.end_step is None else self.end_step

  def check(self, config: PretrainConfig, model_dir: str, has_checkpoint: bool) -> None:
    """Raises a UserError for a request that cannot be met (cheap: before any data), and
    PhaseOver when `config` has the settings of a phase the run has left (so that a job
    script that runs every phase's command can simply be run again)."""
    if self.end_step is not None and not 0 < self.end_step <= config.num_train_steps:
      raise UserError(f"--phase_end_step {self.end_step} must be in 1..num_train_steps "
                      f"({config.num_train_steps}), which stays the schedule's length")
    if self.new_phase and not has_checkpoint:
      raise UserError(f"--new_phase continues a run, but {model_dir} has no checkpoint; train "
                      "the first phase there first, or drop --new_phase to start a run")
    found = None if self.new_phase or not has_checkpoint else artifacts.read_run_config(model_dir)
    history = found[0].get("phases") or [] if found else []
    if len(history) < 2 or _same(history[-1], config):
      return
    for index, entry in enumerate(history[:-1], 1):
      if _same(entry, config):
        raise PhaseOver(f"phase {index} of {model_dir} is over: the run is in phase "
                        f"{len(history)}, begun at step {history[-1]['start_step']}; nothing "
                        "to do here (that phase's command resumes it)")


# No new phase, no early end: a run started or resumed as usual.
DEFAULT_REQUEST = PhaseRequest()


def _entry(config: PretrainConfig, start_step: int) -> dict:
  return {"start_step": start_step, **{k: getattr(config, k) for k in PHASE_FIELDS}}


def _same(entry: dict, config: PretrainConfig) -> bool:
  return all(entry[k] == getattr(config, k) for k in PHASE_FIELDS)


def record(model_dir: str, config: PretrainConfig, data, step: int, request: PhaseRequest,
           write: bool, stream) -> int:
  """Records the run's config and phases in config.json; returns the step the current phase
  began at. A new run (step 0) starts a new record: settings bind only once checkpointed.

  Args:
    model_dir: the run.
    config: this command's config (preflight has checked it against the saved one).
    data: the run's TrainData, whose vocab and counts config.json records.
    step: the step the run restored (0: a new run).
    request: the command's phase flags.
    write: write config.json (the chief).
    stream: where the phase line goes.

  Raises:
    UserError: a new phase before the current one reached its --phase_end_step, or a
      restored checkpoint older than the current phase.
  """
  found = artifacts.read_run_config(model_dir) if step else None
  if found:
    saved, saved_config = found
    phases = [dict(p) for p in saved.get("phases") or [_entry(saved_config, 0)]]
  else:
    phases = [_entry(config, 0)]
  current = phases[-1]
  if step < current["start_step"]:
    raise UserError(
        f"the newest readable checkpoint of {model_dir} is at step {step}, before phase "
        f"{len(phases)} began (step {current['start_step']}); restore that phase's checkpoints "
        "or use a new --model_dir")
  changes = [f"{k} {current[k]} -> {getattr(config, k)}" for k in PHASE_FIELDS
             if current[k] != getattr(config, k)]
  if changes:  # preflight let them through: --new_phase was given
    planned = current.get("end_step")
    if planned is not None and step < planned:
      raise UserError(
          f"phase {len(phases)} of {model_dir} ends at step {planned} (--phase_end_step) but "
          f"its newest checkpoint is at step {step}: finish it with its own command first, or "
          f"end it here by rerunning that command with --phase_end_step={step}")
    current = _entry(config, step)
    phases.append(current)
    print(f"phase {len(phases)} of the run begins at step {step} with the optimizer state and "
          f"schedule of the run: {', '.join(changes)}", file=stream, flush=True)
  elif len(phases) > 1:
    print(f"phase {len(phases)} of the run, begun at step {current['start_step']}",
          file=stream, flush=True)
  current["end_step"] = request.end_step
  if write:
    data_info = {"vocab_md5": data.vocab.md5, "vocab_size": data.vocab.size,
                 "tokenizer": data.vocab.spec.to_dict(),
                 "examples": data.examples, "tokens": data.tokens}
    # The vocab and its settings beside the checkpoints: a run is read back as it tokenized.
    copy_vocab(data.vocab, model_dir)
    artifacts.save_or_check_run_config(model_dir, config, data_info, enforce=False,
                                       phases=phases)
  return current["start_step"]


def nothing_to_do(model_dir: str, step: int, config: PretrainConfig,
                  request: PhaseRequest) -> str:
  """The line for a run already at its last step."""
  if request.last_step(config) < config.num_train_steps:
    return (f"{model_dir} is already at step {step}, where this phase ends (--phase_end_step "
            f"{request.end_step} of {config.num_train_steps}); nothing to do. {next_phase()}")
  return (f"{model_dir} is already at step {step} of {config.num_train_steps}; nothing to do "
          "(raise --num_train_steps to train longer, or use a new --model_dir)")


def say_if_ended(end_step: int, config: PretrainConfig, stream) -> None:
  """After training: how to go on, when this command ended a phase."""
  if end_step < config.num_train_steps:
    print(f"phase ended at step {end_step}. {next_phase()}", file=stream, flush=True)


def next_phase() -> str:
  return ("Continue the run with the same --model_dir and --num_train_steps, --new_phase, and "
          f"the next phase's --max_seq_length, --batch_size and data ({_DOCS}).")


def clip(segments: list[tuple[str, int]], end_step: int) -> list[tuple[str, int]]:
  """The (stage, last step) segments of a run, cut at `end_step` (the end of a phase)."""
  clipped = []
  for stage, last in segments:
    clipped.append((stage, min(last, end_step)))
    if last >= end_step:
      break
  return clipped


def text_data_dir(model_dir: str, subdir: str, max_seq_length: int) -> str:
  """Where data built from text for `max_seq_length` goes: model_dir/<subdir>, or
  <subdir>_<max_seq_length> when that holds data of another length (an earlier phase's),
  so that each phase keeps its own."""
  base = fileio.join(model_dir, subdir)
  try:
    manifest = manifest_lib.read_manifest(base, required=False) \
        if manifest_lib.is_data_dir(base) else None
  except UserError:
    manifest = None  # damaged: rebuilt in place
  if manifest is None or manifest.max_seq_length == max_seq_length:
    return base
  return f"{base}_{max_seq_length}"
