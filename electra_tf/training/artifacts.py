"""The resolved config a pretraining run records in model_dir, and the resume check on it."""

from __future__ import annotations

import json
import os

from electra_tf import atomic
from electra_tf.config import PretrainConfig, resume_conflicts
from electra_tf.errors import UserError
from electra_tf.filenames import CONFIG_NAME

# Allowed to change on resume, but they reshape the learning-rate schedule: say so.
SCHEDULE_FIELDS = ("num_train_steps", "learning_rate", "warmup_steps")


def save_or_check_run_config(model_dir: str, config: PretrainConfig, data_info: dict,
                             write: bool = True, enforce: bool = True) -> list[str]:
  """Record the resolved config in model_dir, or refuse a resume that conflicts with it.

  With `enforce` False (no checkpoint yet) a saved config is simply replaced.

  Returns:
    Notes on allowed changes that alter the run (e.g. a longer schedule), for printing.
  """
  notes = []
  path = os.path.join(model_dir, CONFIG_NAME)
  if enforce and os.path.exists(path):
    try:
      with open(path, encoding="utf-8") as f:
        saved = json.load(f)
      saved_config = PretrainConfig.from_dict(saved["pretrain"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
      raise UserError(f"{path} is unreadable ({exc}); restore it or use a new --model_dir") from exc
    conflicts = resume_conflicts(saved_config, config)
    old, new = saved_config.to_dict(), config.to_dict()
    old_md5 = saved.get("data", {}).get("vocab_md5")
    if old_md5 and old_md5 != data_info.get("vocab_md5"):
      conflicts.append("vocab")
    if conflicts:
      details = "; ".join(f"{k}: saved {old[k]!r} vs now {new[k]!r}" if k in old else k
                          for k in conflicts)
      raise UserError(f"{model_dir} holds a run with other settings ({details}); resume with the "
                      "same settings or use a new --model_dir")
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
    atomic.atomic_write_text(path, json.dumps({"pretrain": config.to_dict(), "data": data_info},
                                              indent=2, sort_keys=True))
  return notes
