r"""The MFU a pretraining step could reach if everything but its matrix products were free.

  python bench/speed/matmul_ceiling.py                          # small, batch 32, float32
  python bench/speed/matmul_ceiling.py --precision=bfloat16

Lists every matrix product of one ELECTRA train step at the preset's real shapes (the
projections, feed-forward layers and attention products of both encoders, the generator head
at the masked positions, the discriminator head), times each as a lone `tf.matmul` in the
forward direction and in the two gradient directions (dX = dY W^T, dW = X^T dY), and adds
them up with their counts. Their FLOPs over their summed time, divided by the peak that
`bench/speed/pretrain_step.py` measures (a 2048^3 matmul, same dtype), is the ceiling of MFU on
this machine: the train step also runs everything else, so its MFU stays below it. The
FLOP total is checked against `electra_tf/model/flops.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from step_lib import products, time_product  # noqa: E402


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--preset", default="small")
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--precision", choices=["float32", "bfloat16"], default="float32")
  parser.add_argument("--reps", type=int, default=15)
  args = parser.parse_args()

  import tensorflow as tf
  from step_lib import measure_peak

  from electra_tf import presets
  from electra_tf.model import flops

  config = presets.get(args.preset).replace(batch_size=args.batch_size)
  dtype = tf.bfloat16 if args.precision == "bfloat16" else tf.float32
  peak = measure_peak(args.precision)
  total_flops, total_s = 0, 0.0
  print(f"{args.preset}, batch {args.batch_size} x seq {config.max_seq_length}, "
        f"{args.precision}; peak (2048^3 matmul) {peak / 1e9:,.0f} GFLOP/s")
  print(f"{'product (fwd + 2 grads)':34} {'count':>5} {'[b] m x k x n':>22} "
        f"{'ms each':>8} {'GFLOP/s':>8} {'of peak':>8}")
  for name, count, batch, m, k, n in products(config, args.batch_size):
    seconds = time_product(batch, m, k, n, dtype, args.reps)
    step_flops = 3 * 2 * batch * m * k * n
    total_flops += count * step_flops
    total_s += count * seconds
    rate = step_flops / seconds
    shape = (f"[{batch}] " if batch > 1 else "") + f"{m}x{k}x{n}"
    print(f"{name:34} {count:5d} {shape:>22} {seconds * 1e3:8.2f} {rate / 1e9:8.1f} "
          f"{rate / peak:8.1%}")
  expected = flops.train_step_flops(config)
  ceiling = total_flops / total_s / peak
  print(f"\nall products: {total_flops / 1e9:,.1f} GFLOP (flops.py: {expected / 1e9:,.1f}) in "
        f"{total_s * 1e3:,.0f} ms, {total_flops / total_s / 1e9:,.1f} GFLOP/s: "
        f"MFU ceiling {ceiling:.1%}")
  print(json.dumps({"preset": args.preset, "precision": args.precision,
                    "batch_size": args.batch_size, "peak_gflops": round(peak / 1e9, 1),
                    "matmul_ms": round(total_s * 1e3, 1),
                    "gflop": round(total_flops / 1e9, 2),
                    "flops_py_gflop": round(expected / 1e9, 2),
                    "mfu_ceiling": round(ceiling, 4)}))


if __name__ == "__main__":
  main()
