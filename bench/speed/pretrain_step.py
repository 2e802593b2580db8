r"""Pretraining step throughput: ours beside tf-models-official's ElectraPretrainer and
transformers' PyTorch ELECTRA, same sizes and batch, each in its own process.

  python bench/speed/pretrain_step.py                       # tiny and small, every impl/precision
  python bench/speed/pretrain_step.py --presets=small --impls=ours --steps=5
  python bench/speed/pretrain_step.py --quick               # tiny only, few steps

Prints a table, one JSON line per measurement (impl, preset, precision, xla, batch_size,
tokens_per_s (median step), tokens_per_s_best (fastest step), mfu, compile_s) and a last JSON
summary line. MFU = model FLOPs per second
(electra_tf/model/flops.py: matmuls only, 3x forward) over this machine's matmul peak for
the same dtype, which the script measures itself (best of large square tf.matmul runs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.dirname(os.path.abspath(__file__))]

from step_lib import build_ours, measure_peak, synthetic_batch, synthetic_dataset, time_fit  # noqa: E402

BATCH = {"tiny": 8, "small": 32}


def run_ours(config, xla: bool, steps: int, per_call: int):
  model, dataset = build_ours(config, xla, per_call)
  return time_fit(model, dataset, steps, per_call)


def run_tf_models(config, xla: bool, steps: int, per_call: int):
  import tensorflow as tf
  import tf_keras
  from official.nlp.modeling import models, networks

  from electra_tf.training import strategy
  from electra_tf.training.optimizer import AdamWeightDecay

  strategy.set_precision(config.precision)

  def encoder(c, embedding_layer=None):
    return networks.BertEncoder(
        vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_layers=c.num_layers,
        num_attention_heads=c.num_heads, inner_dim=c.intermediate_size,
        max_sequence_length=c.max_position_embeddings, embedding_width=c.embedding_size,
        embedding_layer=embedding_layer, dict_outputs=True)

  generator = encoder(config.generator)
  dummy = [tf.ones([1, 8], tf.int32), tf.ones([1, 8], tf.int32), tf.zeros([1, 8], tf.int32)]
  generator(dummy)  # builds the embedding table the MLM head is tied to
  discriminator = encoder(config.model, generator.get_embedding_layer())
  discriminator(dummy)
  if config.precision != "float32":
    # Model Garden's sampling adds float32 Gumbel noise to the MLM logits, which fails on
    # bfloat16 logits; its best bf16 setting therefore keeps the pretrainer's own heads
    # (MLM and discriminator heads) in float32 and runs the two encoders in bf16.
    tf_keras.mixed_precision.set_global_policy("float32")
  pretrainer = models.ElectraPretrainer(
      generator, discriminator, vocab_size=config.model.vocab_size, num_classes=2,
      num_token_predictions=config.max_predictions_per_seq,
      mlm_activation=tf_keras.activations.gelu, output_type="logits")

  class Trainer(tf_keras.Model):
    def __init__(self):
      super().__init__()
      self.pretrainer = pretrainer

    def train_step(self, f):
      with tf.GradientTape() as tape:
        out = self.pretrainer({"input_word_ids": f["masked_input_ids"],
                               "input_mask": f["input_mask"], "input_type_ids": f["segment_ids"],
                               "masked_lm_positions": f["masked_lm_positions"],
                               "masked_lm_ids": f["masked_lm_ids"]})
        mlm = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            f["masked_lm_ids"], tf.cast(out["lm_outputs"], tf.float32)))
        disc = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
            tf.cast(out["disc_label"], tf.float32), tf.cast(out["disc_logits"], tf.float32)))
        loss = mlm + 50.0 * disc
      grads = tape.gradient(loss, self.trainable_variables)
      grads, _ = tf.clip_by_global_norm(grads, 1.0)
      self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
      return {"loss": loss}

  model = Trainer()
  model.compile(optimizer=AdamWeightDecay(1e-4), steps_per_execution=per_call, jit_compile=xla)
  dataset = synthetic_dataset(config)
  return time_fit(model, dataset, steps, per_call)


def run_transformers(config, bf16: bool, steps: int):
  import torch
  import transformers

  torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))

  def electra_config(c):
    return transformers.ElectraConfig(
        vocab_size=c.vocab_size, embedding_size=c.embedding_size, hidden_size=c.hidden_size,
        num_hidden_layers=c.num_layers, num_attention_heads=c.num_heads,
        intermediate_size=c.intermediate_size, max_position_embeddings=c.max_position_embeddings)

  generator = transformers.ElectraForMaskedLM(electra_config(config.generator))
  discriminator = transformers.ElectraForPreTraining(electra_config(config.model))
  discriminator.electra.embeddings = generator.electra.embeddings  # tied, as users do
  params = list({id(p): p for p in [*generator.parameters(), *discriminator.parameters()]}
                .values())
  optimizer = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, eps=1e-6)
  batch = {k: torch.from_numpy(v) for k, v in synthetic_batch(config).items()}
  labels = torch.full_like(batch["input_ids"], -100).long()
  labels.scatter_(1, batch["masked_lm_positions"].long(), batch["masked_lm_ids"].long())
  masked = labels != -100

  def step():
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
      out = generator(input_ids=batch["masked_input_ids"].long(),
                      attention_mask=batch["input_mask"].long(),
                      token_type_ids=batch["segment_ids"].long(), labels=labels)
      with torch.no_grad():  # full-vocabulary softmax, torch.multinomial sampling
        probs = torch.softmax(out.logits[masked].float(), -1)
        sampled = torch.multinomial(probs, 1).squeeze(-1)
      corrupted = batch["input_ids"].long().clone()
      corrupted[masked] = sampled
      is_replaced = (corrupted != batch["input_ids"].long()).long()
      disc = discriminator(input_ids=corrupted, attention_mask=batch["input_mask"].long(),
                           token_type_ids=batch["segment_ids"].long(), labels=is_replaced)
      loss = out.loss + 50.0 * disc.loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    optimizer.step()
    optimizer.zero_grad()

  start = time.perf_counter()
  step()
  compile_s = time.perf_counter() - start
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    step()
    times.append(time.perf_counter() - start)
  return compile_s, times


def child(args):
  from electra_tf import presets
  from electra_tf.model import flops

  config = presets.get(args.preset).replace(batch_size=args.batch_size, precision=(
      "mixed_bfloat16" if args.precision == "bfloat16" else "float32"))
  per_call = args.per_call
  if args.impl == "ours":
    compile_s, times = run_ours(config, args.xla, args.steps, per_call)
  elif args.impl == "tf_models":
    compile_s, times = run_tf_models(config, args.xla, args.steps, per_call)
  else:
    compile_s, times = run_transformers(config, args.precision == "bfloat16", args.steps)
  step_s = statistics.median(times)
  peak = measure_peak(config.precision)
  model_flops = flops.train_step_flops(config)
  print("RESULT " + json.dumps({
      "impl": args.impl, "preset": args.preset, "precision": args.precision, "xla": args.xla,
      "batch_size": config.batch_size,
      "tokens_per_s": round(config.batch_size * config.max_seq_length / step_s, 1),
      # The fastest timed step: on a VM whose steps now and then stall (see bench/README),
      # the lower envelope is the steadier figure to compare implementations by.
      "tokens_per_s_best": round(config.batch_size * config.max_seq_length / min(times), 1),
      "mfu": round(model_flops / step_s / peak, 4), "step_s": round(step_s, 4),
      "compile_s": round(compile_s, 1), "peak_gflops": round(peak / 1e9, 1)}))


def plan(args):
  runs = []
  for preset in args.presets.split(","):
    for impl in args.impls.split(","):
      for precision in ("float32", "bfloat16"):
        for xla in ((False, True) if impl != "transformers" else (False,)):
          runs.append((impl, preset, precision, xla))
  return runs


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--presets", default="tiny,small")
  parser.add_argument("--impls", default="ours,tf_models,transformers")
  parser.add_argument("--steps", type=int, default=10, help="timed steps per measurement")
  parser.add_argument("--batch_size", type=int, default=None, help="default: tiny 8, small 32")
  parser.add_argument("--quick", action="store_true")
  for name in ("impl", "preset", "precision"):
    parser.add_argument(f"--{name}", help=argparse.SUPPRESS)
  parser.add_argument("--xla", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--per_call", type=int, default=1, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.impl:
    return child(args)
  if args.quick:
    args.presets, args.steps = "tiny", 4
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
  rows = []
  for impl, preset, precision, xla in plan(args):
    batch = args.batch_size or BATCH[preset]
    per_call = 10 if preset == "tiny" and impl != "transformers" else 1
    steps = args.steps * per_call
    cmd = [sys.executable, __file__, f"--impl={impl}", f"--preset={preset}",
           f"--precision={precision}", f"--batch_size={batch}", f"--steps={steps}",
           f"--per_call={per_call}"] + (["--xla"] if xla else [])
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if out.returncode or not lines:
      error = (out.stderr.strip().splitlines() or ["no output"])[-1][:200]
      print(f"{impl} {preset} {precision} xla={xla}: failed: {error}", flush=True)
      continue
    row = json.loads(lines[-1][len("RESULT "):])
    rows.append(row)
    print(json.dumps(row), flush=True)
  print(f"\n{'impl':13} {'preset':6} {'precision':9} {'xla':5} {'batch':>5} {'tokens/s':>10} "
        f"{'MFU':>6} {'best tok/s':>10} {'compile s':>9}")
  for r in rows:
    print(f"{r['impl']:13} {r['preset']:6} {r['precision']:9} {str(r['xla']):5} "
          f"{r['batch_size']:5d} {r['tokens_per_s']:10.0f} {r['mfu']:6.1%} "
          f"{r['tokens_per_s_best']:10.0f} {r['compile_s']:9.1f}")
  summary = {}
  for preset in args.presets.split(","):
    best = {}
    for r in rows:
      if r["preset"] == preset:
        best[r["impl"]] = max(best.get(r["impl"], 0.0), r["tokens_per_s"])
    ours = best.get("ours")
    summary[preset] = {
        "ratio_vs_transformers": round(ours / best["transformers"], 3)
        if ours and best.get("transformers") else None,
        "ratio_vs_tf_models": round(ours / best["tf_models"], 3)
        if ours and best.get("tf_models") else None,
        # MFU of ours in its best setting (fastest row), against that row's dtype peak.
        "mfu": max(((r["tokens_per_s"], r["mfu"]) for r in rows
                    if r["impl"] == "ours" and r["preset"] == preset), default=(0, None))[1]}
  print(json.dumps({"summary": summary}))


if __name__ == "__main__":
  main()
