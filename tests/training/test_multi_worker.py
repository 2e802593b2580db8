"""Two real worker processes on localhost under MultiWorkerMirroredStrategy."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest
from testing_utils import ROOT, command_env, command_line


def _free_ports(n):
  socks = [socket.socket() for _ in range(n)]
  for s in socks:
    s.bind(("127.0.0.1", 0))
  ports = [s.getsockname()[1] for s in socks]
  for s in socks:
    s.close()
  return ports


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  """3 articles of the built-in corpus as 2 shards of length-64 records."""
  from electra_tf.data import builtin, pretraining_data, vocab

  root = tmp_path_factory.mktemp("mw")
  corpus = builtin.builtin_corpus(str(root / "cache"), max_articles=3)
  out = str(root / "data")
  pretraining_data.build_pretraining_data(corpus, vocab.builtin_vocab_path(), out,
                                          max_seq_length=64, num_workers=1, min_shards=2,
                                          show_progress=False)
  return out


def test_two_workers_end_with_identical_weights(tmp_path, data_dir):
  """With gradient accumulation, which runs the plain step's all-reduce and update on the
  summed micro-batch gradients: the workers' weights must agree bit for bit."""
  accumulation = 2
  workers = [f"localhost:{p}" for p in _free_ports(2)]
  model_dir = tmp_path / "run"
  procs = []
  for index in range(2):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "TF_CONFIG": json.dumps(
        {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})}
    procs.append(subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "tests", "mw_worker.py"), data_dir,
         str(model_dir), str(tmp_path / f"w{index}.npz"), str(accumulation)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
  outputs = []
  try:
    for proc in procs:
      outputs.append(proc.communicate(timeout=400)[0])
  finally:
    for proc in procs:
      proc.kill()
  for proc, out in zip(procs, outputs):
    assert proc.returncode == 0, out[-3000:]
  assert "step 6/6" in outputs[0]  # the chief reports progress (updates, not micro-batches)
  assert f"in {accumulation} micro-batches per replica" in outputs[0]
  w0 = np.load(tmp_path / "w0.npz")
  w1 = np.load(tmp_path / "w1.npz")
  assert len(w0.files) == len(w1.files) > 10
  initial_differs = False
  for key in w0.files:
    np.testing.assert_array_equal(w0[key], w1[key])
    initial_differs |= bool(np.any(w0[key] != 0))
  assert initial_differs
  # Only the chief's checkpoints remain; the other worker's temporary saves are gone.
  assert (model_dir / "checkpoints" / "ckpt-6.index").exists()
  assert not any((model_dir / ".worker_tmp").glob("worker_*"))


def test_signalled_or_killed_worker_then_restart(tmp_path, data_dir):
  """SIGTERM to one of two localhost workers: both stop at the same step, save, exit 143.
  Restarted, they resume from that checkpoint; then SIGKILL to one: the survivor exits 1
  with one error line (it does not hang)."""
  import signal
  import time

  workers = [f"localhost:{p}" for p in _free_ports(2)]
  model_dir = tmp_path / "run"

  def start(index, tag):
    env = command_env(TF_CONFIG=json.dumps(
        {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}))
    return subprocess.Popen(
        command_line("pretrain", "--strategy=multi_worker_mirrored",
                     f"--train_data={data_dir}", f"--model_dir={model_dir}",
                     "--num_train_steps=30", "--checkpoint_steps=4", "--steps_per_execution=2",
                     "--log_steps=2", "--batch_size=8", "--deterministic"),
        cwd=ROOT, env=env, text=True,
        stdout=open(tmp_path / f"w{index}.{tag}.out", "w"), stderr=subprocess.PIPE)

  def interrupt(tag, wait_for, sig, victim=1):
    procs = [start(0, tag), start(1, tag)]
    try:
      deadline = time.time() + 300
      while not (model_dir / "checkpoints" / f"ckpt-{wait_for}.index").exists():
        assert time.time() < deadline and procs[0].poll() is None, procs[0].stderr.read()
        time.sleep(0.2)
      procs[victim].send_signal(sig)
      errs = [proc.communicate(timeout=180)[1] for proc in procs]
    finally:
      for proc in procs:
        proc.kill()
    return procs, errs

  procs, errs = interrupt("term", 4, signal.SIGTERM)
  assert [p.returncode for p in procs] == [143, 143], errs
  outs = [(tmp_path / f"w{i}.term.out").read_text() for i in range(2)]
  steps = [int(o.split("stopped by ")[1].split(" at step ")[1].split()[0]) for o in outs]
  assert steps[0] == steps[1] and steps[0] >= 4, outs
  assert "stopped by a signal to another worker" in outs[0], outs[0][-1000:]
  assert (model_dir / "checkpoints" / f"ckpt-{steps[0]}.index").exists()

  procs, errs = interrupt("kill", steps[0] + 4 - steps[0] % 4, signal.SIGKILL)
  assert procs[0].returncode == 1, errs[0][-3000:]
  assert "Traceback" not in errs[0], errs[0][-3000:]
  last = errs[0].strip().splitlines()[-1]
  assert last.startswith("error: lost contact with another worker"), last
  assert "restart every worker with the same command" in last
  assert f"resumed from {model_dir}/checkpoints/ckpt-{steps[0]}" in (
      tmp_path / "w0.kill.out").read_text()
