r"""Gradient accumulation: peak memory and tokens/s of one update batch at several k.

  python bench/speed/accumulation.py                        # small, batch 128, k = 1, 4, 8
  python bench/speed/accumulation.py --ks=1,2 --steps=5 --preset=tiny --batch_size=32

Each k trains in a fresh process (so peak memory is that setting's alone) on the synthetic
batch of bench/speed/pretrain_step.py: the same examples per update, run as k micro-batches of
batch_size / k. Memory: on a GPU, TensorFlow's peak allocation on GPU:0
(tf.config.experimental.get_memory_info); on CPU, the process's peak resident set size
(getrusage ru_maxrss), with the resident size before the first step beside it (imports,
weights, the batch): their difference is what tracing, compiling and running the steps
added (optimizer slots included). tokens/s is
per update (batch_size x max_seq_length tokens over the median step time), as
pretraining logs it. Prints one JSON line per k, then a table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _rss_mb() -> float:
  """The current resident set size in MiB (Linux /proc)."""
  with open("/proc/self/statm", encoding="ascii") as f:
    return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def measure(args) -> dict:
  """Trains `args.steps` updates at k = args.k in this process; the figures as a dict."""
  import tensorflow as tf
  from step_lib import build_ours, time_fit

  from electra_tf import presets

  config = presets.get(args.preset).replace(
      batch_size=args.batch_size, precision=args.precision,
      gradient_accumulation_steps=args.k)
  model, dataset = build_ours(config, args.xla, args.per_call)
  before_mb = _rss_mb()
  compile_s, times = time_fit(model, dataset, args.steps, args.per_call)
  step_s = statistics.median(times)
  result = {"preset": args.preset, "precision": args.precision, "xla": args.xla,
            "batch_size": args.batch_size, "k": args.k,
            "micro_batch": args.batch_size // args.k, "steps": len(times) * args.per_call,
            "step_s": round(step_s, 4),
            "tokens_per_s": round(config.tokens_per_step / step_s, 1),
            "compile_s": round(compile_s, 1)}
  if tf.config.list_logical_devices("GPU"):
    result["gpu_peak_mb"] = round(
        tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20, 1)
  else:
    # ru_maxrss is in KiB on Linux.
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    result["rss_before_steps_mb"] = round(before_mb, 1)
  return result


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--preset", default="small")
  parser.add_argument("--batch_size", type=int, default=128, help="examples per update")
  parser.add_argument("--ks", default="1,4,8", help="gradient_accumulation_steps to compare")
  parser.add_argument("--steps", type=int, default=10, help="timed updates per k")
  parser.add_argument("--per_call", type=int, default=1,
                      help="updates per fit call (steps_per_execution)")
  parser.add_argument("--precision", default="float32")
  parser.add_argument("--xla", action="store_true", help="compile the whole step with XLA")
  parser.add_argument("--k", type=int, help=argparse.SUPPRESS)  # set in the child process
  args = parser.parse_args()
  if args.k is not None:
    print(json.dumps(measure(args)), flush=True)
    return

  rows = []
  for k in (int(x) for x in args.ks.split(",")):
    if args.batch_size % k:
      sys.exit(f"--batch_size {args.batch_size} does not split into {k} micro-batches")
    command = [sys.executable, os.path.abspath(__file__), f"--k={k}",
               f"--preset={args.preset}", f"--batch_size={args.batch_size}",
               f"--steps={args.steps}", f"--per_call={args.per_call}",
               f"--precision={args.precision}", *(["--xla"] if args.xla else [])]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "3")}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
      sys.exit(f"k={k} failed:\n{done.stderr[-3000:]}")
    rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(json.dumps(rows[-1]), flush=True)

  memory = "gpu_peak_mb" if "gpu_peak_mb" in rows[0] else "peak_rss_mb"
  print(f"\n{args.preset}, batch {args.batch_size} per update, {args.precision}"
        + (", XLA" if args.xla else ""))
  print(f"{'k':>3} {'micro':>6} {'tokens/s':>10} {memory:>12} {'before steps':>13}")
  for row in rows:
    print(f"{row['k']:>3} {row['micro_batch']:>6} {row['tokens_per_s']:>10.0f} "
          f"{row[memory]:>12.0f} {row.get('rss_before_steps_mb', float('nan')):>13.0f}")


if __name__ == "__main__":
  main()
