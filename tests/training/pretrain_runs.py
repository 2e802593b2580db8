"""Running pretrain.py as a subprocess and comparing checkpoints (fault-injection tests)."""

import os
import random
import signal
import subprocess
import time

import numpy as np
from testing_utils import ROOT, command_env, command_line, run_command


def run_to_end(args, kill_during_save: str | None = None, **kwargs):
  """pretrain.py to its end; with kill_during_save="STEP:SECONDS", SIGKILLed SECONDS after
  the save of STEP began (tests/training/kill_during_save.py)."""
  if kill_during_save:
    return run_command("pretrain_killed_during_save", kill_during_save, *args, timeout=400,
                       **kwargs)
  return run_command("pretrain", *args, timeout=400, **kwargs)


def run_until_step(args, step: int, sig: int, extra_delay: float):
  """Starts a run, sends `sig` `extra_delay` s after it logs step >= `step`; (rc, output)."""
  proc = subprocess.Popen(command_line("pretrain", *args), cwd=ROOT, env=command_env(), text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
  lines = []
  sent = False
  for line in proc.stdout:
    lines.append(line)
    if not sent and line.startswith("step ") and int(line.split()[1].split("/")[0]) >= step:
      time.sleep(extra_delay)
      proc.send_signal(sig)
      sent = True
  proc.wait(timeout=400)
  return proc.returncode, "".join(lines)


def checkpoint_values(prefix: str) -> dict[str, np.ndarray]:
  import tensorflow as tf

  reader = tf.train.load_checkpoint(prefix)
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_dtype_map()
          if name.startswith(("model/", "optimizer/"))}


def assert_same_state(expected_prefix: str, actual_prefix: str, context: str,
                      rtol: float = 1e-6, atol: float = 1e-7):
  expected, actual = checkpoint_values(expected_prefix), checkpoint_values(actual_prefix)
  assert expected.keys() == actual.keys(), context
  assert len(expected) > 100, context  # weights, Adam slots and the step counter
  for name, value in expected.items():
    np.testing.assert_allclose(actual[name], value, rtol=rtol, atol=atol,
                               err_msg=f"{name} ({context})")


# The signals below land by step 26 + 0.15 s; a tiny step takes about 30 ms here, so 14 steps
# are left to catch them. With 30 steps a SIGTERM sometimes arrived after the last one.
STEPS = 40


def common_args(model_dir, shards, *extra):
  return [f"--model_dir={model_dir}", f"--train_data={shards}", "--deterministic",
          f"--num_train_steps={STEPS}", "--batch_size=8", "--checkpoint_steps=6",
          "--steps_per_execution=2", "--log_steps=2", "--keep_checkpoints=3",
          "--learning_rate=1e-3", "--warmup_steps=4", *extra]


def kill_and_resume(tmp_path, shards, extra):
  """Runs to the end undisturbed, then again with random interruptions and restarts, and
  compares the final states (see test_fault_tolerance.py)."""
  seed = int(os.environ.get("FAULT_SEED", time.time_ns() % 100_000))
  rng = random.Random(seed)
  context = f"FAULT_SEED={seed}"

  reference = tmp_path / "reference"
  result = run_to_end(common_args(reference, shards, *extra))
  assert result.returncode == 0, result.stderr[-3000:]

  run = tmp_path / "killed"
  args = common_args(run, shards, *extra)
  # 1. SIGKILL while writing the step-12 checkpoint (a save takes ~0.1 s here).
  delay = rng.uniform(0.0, 0.1)
  result = run_to_end(args, kill_during_save=f"12:{delay:.3f}")
  assert result.returncode == -signal.SIGKILL, (context, result.stderr[-2000:])
  # 2. SIGKILL at a random step between checkpoints.
  rc, out = run_until_step(args, rng.randrange(14, 20, 2), signal.SIGKILL, rng.uniform(0, 0.3))
  assert rc == -signal.SIGKILL, (context, out[-2000:])
  assert "resumed from" in out, (context, out[-2000:])
  # 3. SIGTERM (preemption): saves the step it reached and exits 128 + 15.
  rc, out = run_until_step(args, rng.randrange(20, 28, 2), signal.SIGTERM, rng.uniform(0, 0.15))
  assert rc == 143, (context, out[-3000:])
  stopped = [line for line in out.splitlines() if line.startswith("stopped by SIGTERM")]
  assert stopped, (context, out[-2000:])
  step = int(stopped[0].split(" at step ")[1].split()[0])
  assert (run / "checkpoints" / f"ckpt-{step}.index").exists(), context
  # 4. Run to the end.
  result = run_to_end(args)
  assert result.returncode == 0, (context, result.stderr[-3000:])
  assert f"resumed from {run}/checkpoints/ckpt-{step} at step {step}" in result.stdout, (
      context, result.stdout[-2000:])
  # The resumed input stream sought its position through the data's record index.
  assert "no record index" not in result.stdout + result.stderr, context

  assert_same_state(str(reference / "checkpoints" / f"ckpt-{STEPS}"),
                    str(run / "checkpoints" / f"ckpt-{STEPS}"), context)
  leftovers = [p for p in os.listdir(run / "checkpoints") if p.endswith("_temp")]
  assert not leftovers, (context, leftovers)
