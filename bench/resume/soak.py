r"""Soak test of preemption safety: kill pretrain.py at random points, resume, compare weights.

Runs one deterministic tiny pretraining run to the end undisturbed, then the same run
interrupted `--kills` times at random points (SIGKILL while a checkpoint is being written,
SIGKILL between checkpoints, SIGTERM), restarted after each, and run to the end. Prints a
table of the interruptions and whether the final weights and optimizer state equal the
undisturbed run's (allclose, CPU float32). Exit code 0 when they do.

  .venv/bin/python bench/resume/soak.py                      # 10 kills, one device
  .venv/bin/python bench/resume/soak.py --cpu_devices=2      # the same on two CPU replicas
  .venv/bin/python bench/resume/soak.py --kills=20 --seed=7
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
# pretrain.py with a SIGKILL during one save: the tests' fault-injection launcher.
KILL_DURING_SAVE = os.path.join(ROOT, "tests", "training", "kill_during_save.py")


def build_data(out: str) -> str:
  from electra_tf.data import builtin, pretraining_data, vocab

  data = os.path.join(out, "data")
  corpus = builtin.builtin_corpus(os.path.join(out, "cache"), max_articles=4)
  pretraining_data.build_pretraining_data(corpus, vocab.builtin_vocab_path(), data,
                                          max_seq_length=64, num_workers=1, min_shards=3,
                                          show_progress=False)
  return data


def pretrain(args: list[str], kill_during_save: str | None = None, stop_at: int | None = None,
             sig: int | None = None, delay: float = 0.0) -> tuple[int, str]:
  """Runs pretrain.py; with `stop_at`, sends `sig` `delay` s after it logs that step; with
  kill_during_save="STEP:SECONDS", it is SIGKILLed SECONDS into the save of STEP."""
  script = [KILL_DURING_SAVE, kill_during_save] if kill_during_save else [
      os.path.join(ROOT, "pretrain.py")]
  proc = subprocess.Popen([sys.executable, *script, "--model_size=tiny", *args],
                          cwd=ROOT, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
  lines, sent = [], False
  for line in proc.stdout:
    lines.append(line)
    if (stop_at is not None and not sent and line.startswith("step ")
        and int(line.split()[1].split("/")[0]) >= stop_at):
      time.sleep(delay)
      proc.send_signal(sig)
      sent = True
  proc.wait()
  return proc.returncode, "".join(lines)


def resumed_step(output: str) -> int:
  for line in output.splitlines():
    if line.startswith("resumed from"):
      return int(line.rsplit(" ", 1)[1])
  return 0


def newest_step(ckpt_dir: str) -> int:
  from electra_tf.training import resume

  found = resume.numbered(ckpt_dir)
  return found[0][0] if found else 0


def state(prefix: str) -> dict[str, np.ndarray]:
  import tensorflow as tf

  reader = tf.train.load_checkpoint(prefix)
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_dtype_map()
          if n.startswith(("model/", "optimizer/"))}


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--kills", type=int, default=10)
  parser.add_argument("--steps", type=int, default=60)
  parser.add_argument("--checkpoint_steps", type=int, default=6)
  parser.add_argument("--cpu_devices", type=int, default=0)
  parser.add_argument("--seed", type=int, default=None, help="draws the kill points")
  parser.add_argument("--work_dir", default=None)
  args = parser.parse_args()
  seed = args.seed if args.seed is not None else time.time_ns() % 100_000
  rng = random.Random(seed)
  work = args.work_dir or tempfile.mkdtemp(prefix="electra_soak_")
  data = build_data(work)
  common = [f"--train_data={data}", "--deterministic", f"--num_train_steps={args.steps}",
            "--batch_size=8", f"--checkpoint_steps={args.checkpoint_steps}",
            "--steps_per_execution=2", "--log_steps=2", "--keep_checkpoints=3",
            "--learning_rate=1e-3", "--warmup_steps=4"]
  if args.cpu_devices:
    common += ["--strategy=mirrored", f"--cpu_devices={args.cpu_devices}"]
  print(f"soak: {args.kills} interruptions of a {args.steps}-step deterministic run, "
        f"kill-point seed {seed}, work dir {work}", flush=True)

  began = time.time()
  rc, out = pretrain([f"--model_dir={work}/reference", *common])
  if rc != 0:
    print(out[-3000:])
    return 1
  reference_s = time.time() - began

  run = [f"--model_dir={work}/interrupted", *common]
  kinds = ["SIGKILL during a save", "SIGKILL between saves", "SIGTERM"]
  rows, began = [], time.time()
  ckpt_dir = os.path.join(work, "interrupted", "checkpoints")
  for i in range(args.kills):
    kind = kinds[i % 3] if i < 3 else rng.choice(kinds)
    # The next run resumes from the newest checkpoint; interrupt it a few steps later.
    start = newest_step(ckpt_dir)
    if start >= args.steps - 2:
      break
    target = rng.randrange(start + 2, min(start + 3 * args.checkpoint_steps, args.steps), 2)
    if kind == "SIGKILL during a save":
      save = min((start // args.checkpoint_steps + 1) * args.checkpoint_steps, args.steps)
      delay = rng.uniform(0.0, 0.1)  # a tiny-model save takes ~0.1 s here
      rc, out = pretrain(run, kill_during_save=f"{save}:{delay:.3f}")
      where = f"{delay * 1000:.0f} ms into the save of step {save}"
    else:
      sig = signal.SIGKILL if kind == "SIGKILL between saves" else signal.SIGTERM
      delay = rng.uniform(0.0, 0.3)
      rc, out = pretrain(run, stop_at=target, sig=sig, delay=delay)
      where = f"{delay * 1000:.0f} ms after step {target} was logged"
    rows.append((i + 1, kind, where, resumed_step(out), rc, newest_step(ckpt_dir)))
    if rc == 0:
      break  # the run finished before the interruption came
  rc, out = pretrain(run)
  total_s = time.time() - began
  if rc != 0:
    print(out[-3000:])
    return 1
  rows.append((len(rows) + 1, "none (run to the end)", "", resumed_step(out), rc,
               newest_step(ckpt_dir)))

  print("\n| run | interruption | when | resumed from step | exit code | newest checkpoint after |")
  print("|---|---|---|---|---|---|")
  for row in rows:
    print("| " + " | ".join(str(x) for x in row) + " |")
  expected = state(f"{work}/reference/checkpoints/ckpt-{args.steps}")
  actual = state(f"{work}/interrupted/checkpoints/ckpt-{args.steps}")
  same_keys = expected.keys() == actual.keys()
  diff = max(float(np.max(np.abs(expected[k].astype(np.float64) - actual[k])))
             if expected[k].size else 0.0 for k in expected) if same_keys else float("inf")
  equal = same_keys and all(np.allclose(actual[k], v, rtol=1e-6, atol=1e-7)
                            for k, v in expected.items())
  print(f"\nfinal state vs the undisturbed run: {len(expected)} tensors, max abs diff "
        f"{diff:.3g}: {'EQUAL' if equal else 'DIFFERENT'}")
  print(f"undisturbed run {reference_s:.0f} s; interrupted runs and restarts {total_s:.0f} s")
  print(json.dumps({"kills": len(rows) - 1, "seed": seed, "steps": args.steps,
                    "cpu_devices": args.cpu_devices, "max_abs_diff": diff, "equal": equal}))
  return 0 if equal else 1


if __name__ == "__main__":
  sys.exit(main())
