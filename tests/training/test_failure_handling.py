"""pretrain.py under failures other than kills: unreadable checkpoints, a full disk, divergence.

Each ends with the run resumed from the newest good checkpoint or stopped with one error
line, every remaining checkpoint readable.
"""

import os
import shutil
import signal

import numpy as np
import pytest
from pretrain_runs import checkpoint_values, common_args, run_to_end


@pytest.fixture(scope="module")
def run_at_12(tmp_path_factory, shards):
  """A finished 12-step run with checkpoints at steps 6 and 12; each test damages a copy."""
  run = tmp_path_factory.mktemp("base") / "run"
  result = run_to_end(common_args(run, shards, "--num_train_steps=12"))
  assert result.returncode == 0, result.stderr[-3000:]
  return run


def test_unreadable_newest_checkpoint_falls_back_to_the_previous_one(tmp_path, shards,
                                                                     run_at_12):
  run = tmp_path / "run"
  shutil.copytree(run_at_12, run)
  data = run / "checkpoints" / "ckpt-12.data-00000-of-00001"
  with open(data, "r+b") as f:  # flip bytes in the middle: the CRC check must notice
    f.seek(os.path.getsize(data) // 2)
    f.write(b"\xff" * 64)
  result = run_to_end(common_args(run, shards, "--num_train_steps=14"))
  assert result.returncode == 0, result.stderr[-3000:]
  assert "ckpt-12 is unreadable" in result.stdout, result.stdout[-2000:]
  assert f"resumed from {run}/checkpoints/ckpt-6 at step 6" in result.stdout
  assert "step 14/14" in result.stdout

  # Every checkpoint unreadable: refuse to start over on top of them.
  for name in os.listdir(run / "checkpoints"):
    if name.endswith(".index"):
      (run / "checkpoints" / name).write_bytes(b"not an index")
  result = run_to_end(common_args(run, shards, "--num_train_steps=20"))
  assert result.returncode == 2, result.stderr[-2000:]
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith("error: no readable checkpoint in"), last
  assert "Traceback" not in result.stderr


def test_full_disk_during_a_save_keeps_the_previous_checkpoint(tmp_path, shards, run_at_12):
  import resource

  from electra_tf.training import resume

  run = tmp_path / "run"
  shutil.copytree(run_at_12, run)
  size = os.path.getsize(run / "checkpoints" / "ckpt-12.data-00000-of-00001")

  def limit_file_size():  # writes past `size // 2` bytes fail with EFBIG, as on a full disk
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size // 2, size // 2))

  proc = run_to_end(common_args(run, shards, "--num_train_steps=18"),
                    preexec_fn=limit_file_size)
  assert proc.returncode == 1, proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
  last = proc.stderr.strip().splitlines()[-1]
  assert last.startswith("error: could not write checkpoint"), last
  assert "ckpt-12 is intact" in last, last
  names = os.listdir(run / "checkpoints")
  assert not [n for n in names if n.startswith("ckpt-18")], names
  assert resume.problem(str(run / "checkpoints" / "ckpt-12")) is None
  assert resume.newest(str(run / "checkpoints")).endswith("ckpt-12")


def test_divergence_stops_with_the_last_good_checkpoint_or_skips(tmp_path, shards):
  # A learning rate of 1e25 blows the weights up within a few steps of the warmup.
  args = ["--learning_rate=1e25", "--warmup_steps=8", "--num_train_steps=16",
          "--checkpoint_steps=2"]
  run = tmp_path / "stop"
  result = run_to_end(common_args(run, shards, *args))
  assert result.returncode == 1, result.stderr[-3000:]
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith("error: training diverged: a non-finite loss or gradient"), last
  assert "--on_nonfinite=skip" in last
  from electra_tf.training import resume

  kept = resume.newest(str(run / "checkpoints"))
  assert kept is not None and kept in last, last
  for name, value in checkpoint_values(kept).items():
    assert np.all(np.isfinite(value)), name

  run = tmp_path / "skip"
  result = run_to_end(common_args(run, shards, *args, "--on_nonfinite=skip"))
  assert result.returncode == 0, result.stderr[-3000:]
  assert "warning: skipped the update" in result.stdout, result.stdout[-2000:]
  values = checkpoint_values(str(run / "checkpoints" / "ckpt-16"))
  assert int(values["optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE"]) == 16
  for name, value in values.items():
    assert np.all(np.isfinite(value)), name
