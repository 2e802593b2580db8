"""pretrain.py with one fault for the preemption tests and bench/resume/soak.py.

  python tests/training/kill_during_save.py STEP:SECONDS [pretrain.py flags ...]

SIGKILLs the process SECONDS after the save of step STEP began: during the save when
SECONDS is shorter than it (a save of the tiny model takes about 0.1 s), else during the
steps after it. Everything else is the real command.
"""

import os
import signal
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from electra_tf.commands import pretrain  # noqa: E402
from electra_tf.training import callbacks  # noqa: E402


def kill_during_save(step: int, seconds: float) -> None:
  """Patches the checkpoint saver so that its save of `step` starts the kill timer."""
  save = callbacks.CheckpointSaver._save

  def save_then_die(self, at: int):
    if at == step:
      timer = threading.Timer(seconds, os.kill, args=(os.getpid(), signal.SIGKILL))
      timer.daemon = True
      timer.start()
    return save(self, at)

  callbacks.CheckpointSaver._save = save_then_die


if __name__ == "__main__":
  at, delay = sys.argv.pop(1).split(":")
  kill_during_save(int(at), float(delay))
  pretrain.run()
