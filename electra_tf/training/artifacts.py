"""The resolved config a pretraining run records in model_dir, and the resume check on it."""

from __future__ import annotations

import json

import tensorflow as tf

from electra_tf import atomic, fileio
from electra_tf.config import PHASE_FIELDS, PretrainConfig, resume_conflicts
from electra_tf.errors import UserError
from electra_tf.filenames import CONFIG_NAME

# Allowed to change on resume, but they reshape the learning-rate schedule: say so.
SCHEDULE_FIELDS = ("num_train_steps", "learning_rate", "warmup_steps")


def read_run_config(model_dir: str) -> tuple[dict, PretrainConfig] | None:
  """(config.json's content, its "pretrain" config) of model_dir, or None if it has none.

  Raises:
    UserError: the file exists but does not read as a run's config.
  """
  path = fileio.join(model_dir, CONFIG_NAME)
  if not fileio.exists(path):
    return None
  try:
    saved = json.loads(fileio.read_text(path))
    return saved, PretrainConfig.from_dict(saved["pretrain"])
  except (OSError, ValueError, KeyError, TypeError, tf.errors.OpError) as exc:
    raise UserError(f"{path} is unreadable ({exc}); restore it or use a new --model_dir") from exc


def save_or_check_run_config(model_dir: str, config: PretrainConfig, data_info: dict,
                             write: bool = True, enforce: bool = True,
                             may_change: tuple[str, ...] = (),
                             phases: list[dict] | None = None) -> list[str]:
  """Record the resolved config in model_dir, or refuse a resume that conflicts with it.

  With `enforce` False (no checkpoint yet) a saved config is simply replaced.
  `may_change` names resume-critical fields allowed to differ (a new phase); `phases` is
  the run's phase record (training/phases.py), written beside the config.

  Returns:
    Notes on allowed changes that alter the run (e.g. a longer schedule), for printing.
  """
  notes = []
  path = fileio.join(model_dir, CONFIG_NAME)
  found = read_run_config(model_dir) if enforce else None
  if found:
    saved, saved_config = found
    conflicts = [k for k in resume_conflicts(saved_config, config) if k not in may_change]
    old, new = saved_config.to_dict(), config.to_dict()
    old_md5 = saved.get("data", {}).get("vocab_md5")
    if old_md5 and old_md5 != data_info.get("vocab_md5"):
      conflicts.append("vocab")
    old_spec = saved.get("data", {}).get("tokenizer")
    if old_spec and old_spec != data_info.get("tokenizer"):
      conflicts.append(f"tokenizer: saved {old_spec} vs now {data_info.get('tokenizer')}")
    if conflicts:
      details = "; ".join(f"{k}: saved {old[k]!r} vs now {new[k]!r}" if k in old else k
                          for k in conflicts)
      hint = (" (or, to continue it at another max_seq_length or batch size, add --new_phase)"
              if set(conflicts) <= set(PHASE_FIELDS) and not may_change else "")
      raise UserError(f"{model_dir} holds a run with other settings ({details}); resume with the "
                      f"same settings{hint} or use a new --model_dir")
    for key in SCHEDULE_FIELDS:
      if old[key] != new[key]:
        notes.append(f"note: {key} {old[key]} -> {new[key]} on resume: the learning-rate "
                     "schedule is recomputed from the new value")
    key = "gradient_accumulation_steps"
    if old.get(key, 1) != new[key]:
      notes.append(f"note: {key} {old.get(key, 1)} -> {new[key]} on resume: the same updates "
                   "from other micro-batches, equal up to float rounding (and, with Philox "
                   "dropout, other dropout masks), so not bit-identical to continuing as before")
  if write:
    record = {"pretrain": config.to_dict(), "data": data_info}
    atomic.atomic_write_text(path, json.dumps({**record, **({"phases": phases} if phases else {})},
                                              indent=2, sort_keys=True))
  return notes
