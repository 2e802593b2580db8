r"""Where a pretraining step's time goes: phases timed apart, and time by op type.

  python bench/speed/profile_step.py                                 # small, float32, no XLA
  python bench/speed/profile_step.py --preset=small --precision=bfloat16 --xla

Phases, each its own compiled function on the same synthetic batch (bench/speed/pretrain_step.py's),
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
shares are of summed op time, not of wall time (`--inter_op_threads=1` runs one op at a time,
so they add up; the XLA-compiled GELU and dropout kernels are not traced as ops). Under `--xla`
the whole step is XLA's code, which the profiler does not break down by op (the tables stay
near empty); its products timed alone are then XLA-compiled too. The matmul-like ops
(einsums and matmuls) are then summed by their place in the model, forward and backward apart,
with layer numbers folded ("bwd discriminator/encoder/layer_*/intermediate"), and every op by
its class (OP_CLASSES: matrix products, bias adds, optimizer, sampling, losses, attention
softmax, LayerNorm, dropout, activations, casts, gathers/scatters, transposes, everything else;
`--show_other=N` lists the biggest of the last). Last, the step beside its matrix products
timed alone at the same shapes (matmul_ceiling.py): the difference is the step's non-matmul
time.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from step_lib import median_seconds, products, synthetic_batch, time_product, wait_for  # noqa: E402,E501


def matmul_site(scope: str) -> str:
  """A matmul op's place in the model with layer numbers folded: "disc .../_query_dense"."""
  backward = "gradient" in scope
  scope = re.sub(r"^.*?(generator|discriminator)/", r"\1/", scope)
  scope = re.sub(r"/(blocks/\d+|layer_\d+)/", "/layer_*/", scope)
  scope = re.sub(r"/(einsum|Einsum|MatMul|BiasAdd|Tensordot)[^/]*(/.*)?$", "", scope)
  scope = re.sub(r"_grad$|gradients?/", "", scope)
  return ("bwd " if backward else "fwd ") + scope


# Op classes of the breakdown, in the order they are tested: the first match wins.
OP_CLASSES = ("matrix products", "bias adds", "optimizer", "sampling", "losses",
              "attention softmax", "LayerNorm", "dropout", "activations", "casts",
              "gathers/scatters", "transposes", "everything else")
_BIAS_SCOPE = re.compile(r"/(query|key|value|attention_output|intermediate|output|dense|"
                         r"dense_prediction|embeddings_project|generator_predictions)/(add|biasadd)")


def op_class(scope: str, op_type: str) -> str:
  """The class of a traced op from its name scope and type (see OP_CLASSES).

  A product's own op is a matrix product; a bias or activation fused into it (oneDNN's
  _FusedMatMul) is counted with it, as matmul_ceiling.py's products include no epilogue.
  """
  lower = scope.lower()
  if "matmul" in op_type.lower() or "einsum" in op_type.lower():
    return "matrix products"
  if any(k in lower for k in ("adamweightdecay", "/adam", "lamb", "apply_gradients",
                              "clip_by_global_norm", "optimizer")) or op_type in (
                                  "AssignSubVariableOp", "AssignVariableOp", "L2Loss"):
    return "optimizer"
  if "sample_from_logits" in lower or "position_uniforms" in lower:
    return "sampling"
  if "cross_entropy" in lower or "logistic_loss" in lower:
    return "losses"
  if op_type in ("BiasAdd", "BiasAddGrad") or _BIAS_SCOPE.search(lower):
    return "bias adds"
  if "softmax" in op_type.lower() or "softmax" in lower:
    return "attention softmax"
  if "layer_norm" in lower or "layernorm" in lower:
    return "LayerNorm"
  if "dropout" in lower:
    return "dropout"
  if "gelu" in lower or op_type in ("Erf", "Erfc"):
    return "activations"
  if op_type == "Cast":
    return "casts"
  if any(k in op_type for k in ("Gather", "Scatter", "OneHot", "SegmentSum")):
    return "gathers/scatters"
  if "Transpose" in op_type:
    return "transposes"
  return "everything else"


def op_events(trace_dir: str) -> list[tuple[str, str, float]]:
  """(scope, op type, seconds) of every TF op event on the host plane of the trace."""
  from tensorflow.tsl.profiler.protobuf import xplane_pb2

  events = []
  for path in glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True):
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
          events.append((scope, op_type, event.duration_ps / 1e12))
  return events


def op_breakdown(events: list[tuple[str, str, float]], top: int, group=None,
                 classify=None) -> list[tuple[str, float, int]]:
  """(op type, seconds, count) summed over `events` (from op_events), biggest first.

  With `group` (a function of the op's scope), only matmul-like ops are counted, keyed by
  group(scope) instead of the op type. With `classify` (a function of scope and type), every
  op is counted under classify(scope, type).
  """
  totals: dict[str, float] = collections.defaultdict(float)
  counts: dict[str, int] = collections.defaultdict(int)
  for scope, op_type, seconds in events:
    if classify is not None:
      op_type = classify(scope, op_type)
    elif group is not None:
      if "Einsum" not in op_type and "MatMul" not in op_type:
        continue
      op_type = group(scope)
    totals[op_type] += seconds
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
  parser.add_argument("--matmul_reps", type=int, default=15,
                      help="reps of each product timed alone (matmul_ceiling.py); 0 skips")
  parser.add_argument("--show_other", type=int, default=0,
                      help="list this many of the biggest ops classed as everything else")
  parser.add_argument("--inter_op_threads", type=int, default=0,
                      help="TensorFlow's inter-op threads (0: its default). 1 runs one op at a "
                           "time, so the summed op times add up to the step's time instead of "
                           "overlapping")
  args = parser.parse_args()

  import tensorflow as tf

  if args.inter_op_threads:
    tf.config.threading.set_inter_op_parallelism_threads(args.inter_op_threads)

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
    wait_for(train())
  tf.profiler.experimental.stop()
  events = op_events(trace_dir)  # the trace is parsed once for every table below
  ops = op_breakdown(events, args.top)
  total = sum(seconds for _, _, seconds in events) or 1.0
  print(f"\nop time by type over {args.trace_steps} traced steps (summed over threads)")
  print(f"{'op type':32} {'ms/step':>9} {'share':>7} {'calls/step':>10}")
  for name, seconds, count in ops:
    print(f"{name:32} {seconds / args.trace_steps * 1e3:9.1f} {seconds / total:7.1%} "
          f"{count / args.trace_steps:10.0f}")
  sites = op_breakdown(events, args.top, group=matmul_site)
  print("\nmatmul time by place in the model, layers folded (share of all op time)")
  print(f"{'place':64} {'ms/step':>9} {'share':>7}")
  for name, seconds, _ in sites:
    print(f"{name[:64]:64} {seconds / args.trace_steps * 1e3:9.1f} {seconds / total:7.1%}")
  classes = {n: sec for n, sec, _ in op_breakdown(events, len(OP_CLASSES), classify=op_class)}
  print("\nop time by class (share of all op time)")
  print(f"{'class':20} {'ms/step':>9} {'share':>7}")
  for name in OP_CLASSES:
    seconds = classes.get(name, 0.0)
    print(f"{name:20} {seconds / args.trace_steps * 1e3:9.1f} {seconds / total:7.1%}")
  if args.show_other:
    unclassed = [e for e in events if op_class(e[0], e[1]) == "everything else"]
    rows_other = op_breakdown(unclassed, args.show_other,
                              classify=lambda scope, op_type: f"{scope}:{op_type}")
    for name, seconds, _ in rows_other:
      print(f"  {seconds / args.trace_steps * 1e3:7.2f} ms  {name[-110:]}")
  matmul_ms = None
  if args.matmul_reps:

    dtype = tf.bfloat16 if args.precision == "bfloat16" else tf.float32
    # Under --xla the products alone are XLA's too (its dot emitter, not oneDNN's).
    matmul_ms = 1e3 * sum(count * time_product(batch, m, k, n, dtype, args.matmul_reps,
                                               jit_compile=args.xla)
                          for _, count, batch, m, k, n in products(config, config.batch_size))
    step_ms = full * 1e3
    alone = "XLA-compiled, " if args.xla else ""
    print(f"\nstep {step_ms:,.1f} ms; its matrix products timed alone ({alone}matmul_ceiling.py) "
          f"{matmul_ms:,.1f} ms; non-matmul time {step_ms - matmul_ms:,.1f} ms "
          f"({(step_ms - matmul_ms) / step_ms:.0%} of the step)")
  print(json.dumps({"preset": args.preset, "precision": args.precision, "xla": args.xla,
                    "step_ms": round(full * 1e3, 1),
                    "matmul_only_ms": None if matmul_ms is None else round(matmul_ms, 1),
                    "classes_ms_per_step": {n: round(classes.get(n, 0.0) / args.trace_steps
                                                     * 1e3, 2) for n in OP_CLASSES},
                    "batch_size": config.batch_size, "tokens_per_s": round(tokens / full, 1),
                    "phases_ms": {n: round(s * 1e3, 1) for n, s in rows},
                    "ops_ms_per_step": {n: round(s / args.trace_steps * 1e3, 2)
                                        for n, s, _ in ops}}))


if __name__ == "__main__":
  main()
