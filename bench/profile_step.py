r"""Where a pretraining step's time goes: phases timed apart, and time by op type.

  python bench/profile_step.py                                 # small, float32, no XLA
  python bench/profile_step.py --preset=small --precision=bfloat16 --xla

Phases, each its own compiled function on the same synthetic batch (bench/pretrain_step.py's),
timed as the median of `--reps` calls after warm-up; each row also shows its share of the
full step and the model FLOPs per second it reaches:
  generator forward   the generator network and its MLM head (masked positions only)
  forward             generator, sampling, corruption, discriminator
  forward + losses    plus both losses
  gradients           plus the backward pass
  update              plus clipping and the AdamW update (no metrics)
  train step          the train_step fit runs (plus the training metrics)

Then it traces `--trace_steps` full steps with the TF profiler and sums the host time of each
op type (MatMul, _FusedMatMul, Softmax, ...). Op times on different threads overlap, so the
shares are of summed op time, not of wall time. Under XLA the ops are fused into clusters
and the breakdown shows the clusters instead. Last, the matmul-like ops (einsums and matmuls)
are summed by their place in the model, forward and backward apart, with layer numbers
folded ("bwd discriminator/encoder/layer_*/intermediate").
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import re
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))


def median_seconds(fn, reps: int) -> float:
  fn()
  fn()
  times = []
  for _ in range(reps):
    start = time.perf_counter()
    out = fn()
    _block(out)
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def _block(out):
  import tensorflow as tf

  for t in tf.nest.flatten(out):
    if hasattr(t, "numpy"):
      t.numpy()
      return


def matmul_site(scope: str) -> str:
  """A matmul op's place in the model with layer numbers folded: "disc .../_query_dense"."""
  backward = "gradient" in scope
  scope = re.sub(r"^.*?(generator|discriminator)/", r"\1/", scope)
  scope = re.sub(r"/(blocks/\d+|layer_\d+)/", "/layer_*/", scope)
  scope = re.sub(r"/(einsum|Einsum|MatMul|BiasAdd|Tensordot)[^/]*(/.*)?$", "", scope)
  scope = re.sub(r"_grad$|gradients?/", "", scope)
  return ("bwd " if backward else "fwd ") + scope


def op_breakdown(trace_dir: str, top: int, group=None) -> list[tuple[str, float, int]]:
  """(op type, seconds, count) summed over the host plane's TF op events, biggest first.

  With `group` (a function of the op's scope), only matmul-like ops are counted, keyed by
  group(scope) instead of the op type.
  """
  from tensorflow.tsl.profiler.protobuf import xplane_pb2

  paths = glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True)
  totals: dict[str, float] = collections.defaultdict(float)
  counts: dict[str, int] = collections.defaultdict(int)
  for path in paths:
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
      space.ParseFromString(f.read())
    for plane in space.planes:
      if not plane.name.startswith("/host:CPU"):
        continue
      names = {k: m.name for k, m in plane.event_metadata.items()}
      for line in plane.lines:
        if "TraceMe" in line.name or "python" in line.name.lower():
          continue
        for event in line.events:
          name = names.get(event.metadata_id, "")
          # TF ops are "scope/name:Type"; skip runtime spans such as ExecutorState::Process,
          # which enclose the ops they run.
          if ":" not in name or "::" in name:
            continue
          scope, op_type = name.rsplit(":", 1)
          if group is not None:
            if "Einsum" not in op_type and "MatMul" not in op_type:
              continue
            op_type = group(scope)
          totals[op_type] += event.duration_ps / 1e12
          counts[op_type] += 1
  ranked = sorted(totals.items(), key=lambda kv: -kv[1])[:top]
  return [(k, v, counts[k]) for k, v in ranked]


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--preset", default="small")
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--precision", choices=["float32", "bfloat16"], default="float32")
  parser.add_argument("--xla", action="store_true")
  parser.add_argument("--reps", type=int, default=7)
  parser.add_argument("--trace_steps", type=int, default=3)
  parser.add_argument("--top", type=int, default=15)
  args = parser.parse_args()

  import tensorflow as tf
  from pretrain_step import synthetic_batch

  from electra_tf import presets
  from electra_tf.model import flops
  from electra_tf.training import pretraining, strategy

  config = presets.get(args.preset).replace(
      batch_size=args.batch_size, steps_per_execution=1,
      precision="mixed_bfloat16" if args.precision == "bfloat16" else "float32")
  strategy.set_precision(config.precision)
  model = pretraining.build_model(config, tf.distribute.get_strategy(), jit_compile=args.xla)
  batch = {k: tf.constant(v) for k, v in synthetic_batch(config).items()}
  model.fit(tf.data.Dataset.from_tensors(batch).repeat(), steps_per_epoch=1, verbose=0)
  step = tf.constant(1, tf.int64)
  gen_inputs = {"input_ids": batch["masked_input_ids"], "input_mask": batch["input_mask"],
                "segment_ids": batch["segment_ids"],
                "masked_lm_positions": batch["masked_lm_positions"]}

  def compiled(fn):
    return tf.function(fn, jit_compile=args.xla)

  def update():
    _, _, grads = model.compute_gradients(batch, step)
    grads, norm = tf.clip_by_global_norm(grads, config.clip_norm)
    model.optimizer.apply_gradients(zip(grads, model.trainable_variables),
                                    experimental_aggregate_gradients=False)
    return norm

  phases = [
      ("generator forward", compiled(lambda: model.generator(gen_inputs, training=True))),
      ("forward", compiled(lambda: model.forward(batch, step, training=True)["disc_logits"])),
      ("forward + losses", compiled(
          lambda: model.compute_losses(model.forward(batch, step, training=True), batch))),
      ("gradients", compiled(lambda: model.compute_gradients(batch, step)[2])),
      ("update", compiled(update)),
      ("train step", compiled(lambda: model.train_step(batch))),
  ]
  model_flops = flops.train_step_flops(config)
  tokens = config.batch_size * config.max_seq_length
  rows = []
  for name, fn in phases:
    rows.append((name, median_seconds(fn, args.reps)))
  full = rows[-1][1]
  print(f"\n{args.preset}, batch {config.batch_size} x seq {config.max_seq_length}, "
        f"{args.precision}, xla={args.xla}: {tokens / full:,.0f} tokens/s, "
        f"{model_flops / full / 1e9:.1f} model GFLOP/s")
  print(f"{'phase':20} {'ms':>9} {'of step':>8}")
  for name, seconds in rows:
    print(f"{name:20} {seconds * 1e3:9.1f} {seconds / full:8.1%}")

  trace_dir = tempfile.mkdtemp(prefix="profile_step_")
  train = phases[-1][1]
  tf.profiler.experimental.start(trace_dir)
  for _ in range(args.trace_steps):
    _block(train())
  tf.profiler.experimental.stop()
  ops = op_breakdown(trace_dir, args.top)
  total = sum(s for _, s, _ in op_breakdown(trace_dir, 10_000)) or 1.0
  print(f"\nop time by type over {args.trace_steps} traced steps (summed over threads)")
  print(f"{'op type':32} {'ms/step':>9} {'share':>7} {'calls/step':>10}")
  for name, seconds, count in ops:
    print(f"{name:32} {seconds / args.trace_steps * 1e3:9.1f} {seconds / total:7.1%} "
          f"{count / args.trace_steps:10.0f}")
  sites = op_breakdown(trace_dir, args.top, group=matmul_site)
  print("\nmatmul time by place in the model, layers folded (share of all op time)")
  print(f"{'place':64} {'ms/step':>9} {'share':>7}")
  for name, seconds, _ in sites:
    print(f"{name[:64]:64} {seconds / args.trace_steps * 1e3:9.1f} {seconds / total:7.1%}")
  print(json.dumps({"preset": args.preset, "precision": args.precision, "xla": args.xla,
                    "batch_size": config.batch_size, "tokens_per_s": round(tokens / full, 1),
                    "phases_ms": {n: round(s * 1e3, 1) for n, s in rows},
                    "ops_ms_per_step": {n: round(s / args.trace_steps * 1e3, 2)
                                        for n, s, _ in ops}}))


if __name__ == "__main__":
  main()
