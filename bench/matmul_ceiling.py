r"""The MFU a pretraining step could reach if everything but its matrix products were free.

  python bench/matmul_ceiling.py                          # small, batch 32, float32
  python bench/matmul_ceiling.py --precision=bfloat16

Lists every matrix product of one ELECTRA train step at the preset's real shapes (the
projections, feed-forward layers and attention products of both encoders, the generator head
at the masked positions, the discriminator head), times each as a lone `tf.matmul` in the
forward direction and in the two gradient directions (dX = dY W^T, dW = X^T dY), and adds
them up with their counts. Their FLOPs over their summed time, divided by the peak that
`bench/pretrain_step.py` measures (a 2048^3 matmul, same dtype), is the ceiling of MFU on
this machine: the train step also runs everything else, so its MFU stays below it. The
FLOP total is checked against `electra_tf/model/flops.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from profile_step import median_seconds  # noqa: E402


def products(config, batch_size: int) -> list[tuple[str, int, int, int, int, int]]:
  """(name, count, batch, m, k, n) of each forward product [batch, m, k] x [k, n]."""
  L, P = config.max_seq_length, config.max_predictions_per_seq
  tokens = batch_size * L
  rows = []
  for who, enc in (("generator", config.generator), ("discriminator", config.model)):
    H, F, E, heads, layers = (enc.hidden_size, enc.intermediate_size, enc.embedding_size,
                              enc.num_heads, enc.num_layers)
    if E != H:
      rows.append((f"{who} embeddings_project", 1, 1, tokens, E, H))
    rows.append((f"{who} query/key/value/output", 4 * layers, 1, tokens, H, H))
    rows.append((f"{who} intermediate", layers, 1, tokens, H, F))
    rows.append((f"{who} output", layers, 1, tokens, F, H))
    rows.append((f"{who} attention scores", layers, batch_size * heads, L, H // heads, L))
    rows.append((f"{who} attention context", layers, batch_size * heads, L, L, H // heads))
  g = config.generator
  rows.append(("generator head dense", 1, 1, batch_size * P, g.hidden_size, g.embedding_size))
  rows.append(("generator head logits", 1, 1, batch_size * P, g.embedding_size, g.vocab_size))
  H = config.model.hidden_size
  rows.append(("discriminator head dense", 1, 1, tokens, H, H))
  rows.append(("discriminator head logit", 1, 1, tokens, H, 1))
  return rows


def time_product(batch: int, m: int, k: int, n: int, dtype, reps: int, chain: int = 8,
                 jit_compile: bool = False) -> float:
  """Median seconds of the forward product and its two gradient products, run together.

  `jit_compile`: each chain is one XLA-compiled function (XLA's own dot emitter).

  Each timed call runs `chain` copies of a product one after the other (control
  dependencies, distinct inputs so none is folded away), so that the per-call overhead of
  Python is spread as thin as the graph executor spreads it inside a train step.
  """
  import tensorflow as tf

  def tensors(*shape):
    shape = shape if batch == 1 else (batch, *shape)
    return [tf.cast(tf.random.normal(shape), dtype) for _ in range(chain)]

  xs, ws, dys = tensors(m, k), tensors(k, n), tensors(m, n)

  def chained(product):
    def run():
      outs = []
      for i in range(chain):
        with tf.control_dependencies(outs[-1:]):
          outs.append(product(i))
      return outs  # all returned: products used only as control inputs would be pruned
    return tf.function(run, jit_compile=jit_compile)

  calls = [chained(lambda i: tf.matmul(xs[i], ws[i])),
           chained(lambda i: tf.matmul(dys[i], ws[i], transpose_b=True)),
           chained(lambda i: tf.matmul(xs[i], dys[i], transpose_a=True))]
  return sum(median_seconds(call, reps) for call in calls) / chain


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--preset", default="small")
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--precision", choices=["float32", "bfloat16"], default="float32")
  parser.add_argument("--reps", type=int, default=15)
  args = parser.parse_args()

  import tensorflow as tf
  from pretrain_step import measure_peak

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
