"""Finding and restoring the newest readable checkpoint of a run.

A run's checkpoints are `ckpt-<step>.index` + `ckpt-<step>.data-*` in model_dir/checkpoints.
They are found by listing those files, not through the `checkpoint` state file, so a kill
between writing a checkpoint and updating that file, or a lost state file, loses nothing.
Every tensor of a candidate is read (which checks its CRC) before it is restored; a
truncated or corrupt newest checkpoint gives a warning and the previous one is used.
"""

from __future__ import annotations

import re
import sys

import tensorflow as tf

from electra_tf import fileio
from electra_tf.errors import UserError
from electra_tf.filenames import CKPT_NAME

# tf.train.CheckpointManager names its saves <checkpoint_name>-<step>; ours use CKPT_NAME.
_NUMBERED = re.compile(rf"^{CKPT_NAME}-(\d+)\.index$")


def numbered(ckpt_dir: str) -> list[tuple[int, str]]:
  """(step, prefix) of every checkpoint in `ckpt_dir` with an index file, newest first."""
  if not fileio.isdir(ckpt_dir):
    return []
  found = []
  for name in fileio.listdir(ckpt_dir):
    match = _NUMBERED.match(name)
    if match:
      found.append((int(match.group(1)), fileio.join(ckpt_dir, name[:-len(".index")])))
  return sorted(found, reverse=True)


def newest(ckpt_dir: str) -> str | None:
  """The prefix of the highest-numbered checkpoint (readable or not), or None."""
  found = numbered(ckpt_dir)
  return found[0][1] if found else None


def problem(prefix: str) -> str | None:
  """Why the checkpoint at `prefix` cannot be restored, or None if every tensor reads back."""
  try:
    # Not tf.train.load_checkpoint: it asks isdir(prefix) first, which ram:// answers True.
    reader = tf.compat.v1.train.NewCheckpointReader(prefix)
    for name in reader.get_variable_to_dtype_map():
      reader.get_tensor(name)
  except (tf.errors.OpError, ValueError, OSError) as exc:
    text = getattr(exc, "message", None) or str(exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__
  return None


def restore_newest_valid(checkpoint: tf.train.Checkpoint, ckpt_dir: str,
                         stream=None) -> str | None:
  """Restores the newest checkpoint of `ckpt_dir` that reads back whole; its prefix or None.

  Raises:
    UserError: there are checkpoints but none is readable (training from scratch would
      silently overwrite them).
  """
  stream = stream or sys.stderr
  candidates = numbered(ckpt_dir)
  problems = []
  for _, prefix in candidates:
    reason = problem(prefix)
    if reason is None:
      if problems:
        print(f"warning: resuming from {fileio.basename(prefix)}, the newest readable "
              "checkpoint", file=stream, flush=True)
      checkpoint.restore(prefix).expect_partial()
      return prefix
    problems.append(f"{fileio.basename(prefix)}: {reason}")
    print(f"warning: checkpoint {prefix} is unreadable ({reason}); trying the previous one",
          file=stream, flush=True)
  if problems:
    raise UserError(f"no readable checkpoint in {ckpt_dir} ({'; '.join(problems)}); restore "
                    "the files or move the directory away to start over")
  return None


def remove_partial_saves(ckpt_dir: str) -> list[str]:
  """Deletes what an interrupted save left (TF's `*_temp` directories); returns their paths."""
  removed = []
  if not fileio.isdir(ckpt_dir):
    return removed
  for name in fileio.listdir(ckpt_dir):
    if name.startswith(f"{CKPT_NAME}-") and name.endswith("_temp"):
      path = fileio.join(ckpt_dir, name)
      fileio.rmtree(path)
      removed.append(path)
  return removed
