r"""Input pipeline throughput: the TFRecord reading, parsing and dynamic masking that feed
pretraining, alone, on one core, and its ratio to what the train step consumes.

  python bench/data/input_pipeline.py                                   # small preset, batch 32
  python bench/data/input_pipeline.py --preset=tiny --batch_size=8
  python bench/data/input_pipeline.py --step_json=/tmp/pretrain_step.jsonl

Builds pretraining data from the built-in corpus (SQuAD v1.1 train contexts) at the preset's
sequence length, pins the process to one core (sched_setaffinity, one TF thread) and times
batches from `make_pretraining_dataset` exactly as pretrain.py builds it (shuffle, repeat,
batch-then-parse, masking; `--deterministic` for the seeded sequential masking). The
consumer rate comes from `--step_json` (the JSON lines of bench/speed/pretrain_step.py: ours, best
setting, same preset) or `--consumer_examples_per_s`. Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def consumer_rate(args, seq_len: int) -> tuple[float | None, str]:
  """Examples/s the train step eats: ours' best tokens/s for the preset / seq length."""
  if args.consumer_examples_per_s:
    return args.consumer_examples_per_s, "--consumer_examples_per_s"
  if not args.step_json:
    return None, ""
  best = None
  with open(args.step_json, encoding="utf-8") as f:
    for line in f:
      line = line.strip()
      if not line.startswith("{"):
        continue
      row = json.loads(line)
      if row.get("impl") == "ours" and row.get("preset") == args.preset:
        best = max(best or 0.0, row["tokens_per_s"])
  if best is None:
    sys.exit(f"error: {args.step_json} has no 'ours' row for preset {args.preset}")
  return best / seq_len, f"ours' best in {args.step_json}"


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--preset", default="small")
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--max_articles", type=int, default=100)
  parser.add_argument("--batches", type=int, default=300, help="timed batches")
  parser.add_argument("--warmup", type=int, default=30)
  parser.add_argument("--deterministic", action="store_true")
  parser.add_argument("--step_json", default=None)
  parser.add_argument("--consumer_examples_per_s", type=float, default=None)
  args = parser.parse_args()

  if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
  import tensorflow as tf

  tf.config.threading.set_inter_op_parallelism_threads(1)
  tf.config.threading.set_intra_op_parallelism_threads(1)

  from electra_tf import presets
  from electra_tf.data import builtin, pretraining_data, vocab
  from electra_tf.data.pipeline import make_pretraining_dataset

  config = presets.get(args.preset)
  seq_len = config.max_seq_length
  scratch = tempfile.mkdtemp(prefix="bench_pipeline_")
  try:
    files = builtin.builtin_corpus(os.path.join(scratch, "text"), args.max_articles)
    data = os.path.join(scratch, "data")
    pretraining_data.build_pretraining_data(files, vocab.builtin_vocab_path(), data,
                                            max_seq_length=seq_len, num_workers=1,
                                            min_shards=4, show_progress=False)
    dataset = make_pretraining_dataset(
        data, batch_size=args.batch_size, max_seq_length=seq_len,
        max_predictions_per_seq=config.max_predictions_per_seq, mask_prob=config.mask_prob,
        vocab=vocab.load_vocab(vocab.builtin_vocab_path()),
        seed=0 if args.deterministic else None, deterministic=args.deterministic)
    options = tf.data.Options()
    options.threading.private_threadpool_size = 1
    options.threading.max_intra_op_parallelism = 1
    iterator = iter(dataset.with_options(options))
    for _ in range(args.warmup):
      next(iterator)
    rates = []
    for _ in range(args.batches // 10):
      start = time.perf_counter()
      for _ in range(10):
        batch = next(iterator)
      batch["masked_lm_weights"].numpy()
      rates.append(10 * args.batch_size / (time.perf_counter() - start))
  finally:
    shutil.rmtree(scratch, ignore_errors=True)

  examples_per_s = statistics.median(rates)
  consumer, source = consumer_rate(args, seq_len)
  row = {"preset": args.preset, "batch_size": args.batch_size, "max_seq_length": seq_len,
         "deterministic": args.deterministic, "cores": 1,
         "examples_per_s": round(examples_per_s, 1),
         "tokens_per_s": round(examples_per_s * seq_len),
         "consumer_examples_per_s": None if consumer is None else round(consumer, 2),
         "ratio": None if consumer is None else round(examples_per_s / consumer, 1)}
  print(f"input pipeline ({args.preset}, seq {seq_len}, batch {args.batch_size}, one core): "
        f"{examples_per_s:.0f} examples/s = {examples_per_s * seq_len:.0f} tokens/s")
  if consumer is not None:
    print(f"train step consumes {consumer:.1f} examples/s ({source}): "
          f"the pipeline delivers {examples_per_s / consumer:.1f}x that")
  print(json.dumps(row))


if __name__ == "__main__":
  main()
