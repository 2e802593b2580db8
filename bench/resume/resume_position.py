r"""Time to the first batch of a resumed input stream, at positions deep into a large data set.

  python bench/resume/resume_position.py                  # builds the data once into --data_dir
  python bench/resume/resume_position.py --copies=2 --max_seq_length=32

Builds pretraining data from the built-in corpus (SQuAD v1.1 train contexts) repeated
`--copies` times, with the project's builder, at a short sequence length so that it holds a
few hundred thousand examples; reuses it on later runs. Then, for positions at 0, 10%, 50%
and 90% of the first pass and in the middle of the fourth (epoch 3), builds the stream as
pretrain.py does (`make_pretraining_dataset(start_batch=...)`, both modes) and times the
first batch (wall clock and the process's CPU time), with the bytes the process read
meanwhile (/proc/self/io rchar). For
comparison, the last column times what a resume did before the record index: reading (not
parsing) the records of the pass up to the position. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def rchar() -> int:
  with open("/proc/self/io", encoding="ascii") as f:
    return int(next(line for line in f if line.startswith("rchar:")).split()[1])


def build(args) -> str:
  from electra_tf.data import builtin, pretraining_data, vocab
  from electra_tf.data.manifest import is_data_dir

  data = os.path.join(args.data_dir, f"data_{args.max_seq_length}_x{args.copies}")
  if is_data_dir(data):
    return data
  text = builtin.builtin_corpus(os.path.join(args.data_dir, "text"))
  copies = os.path.join(args.data_dir, f"text_x{args.copies}")
  os.makedirs(copies, exist_ok=True)
  files = []
  for copy in range(args.copies):
    for path in text:
      target = os.path.join(copies, f"{copy}_{os.path.basename(path)}")
      if not os.path.exists(target):
        shutil.copyfile(path, target)
      files.append(target)
  began = time.monotonic()
  pretraining_data.build_pretraining_data(files, vocab.builtin_vocab_path(), data,
                                          max_seq_length=args.max_seq_length,
                                          show_progress=False)
  print(f"built {data} in {time.monotonic() - began:.0f} s", file=sys.stderr)
  return data


def first_batch(data: str, start_batch: int, deterministic: bool,
                args) -> tuple[float, float, int]:
  """(seconds, CPU seconds, bytes read) from building the stream at `start_batch` to its
  first batch. CPU time is the process's (all its threads): on a shared machine it moves
  less than the wall clock."""
  from electra_tf.data import pipeline, vocab

  before, began, cpu = rchar(), time.perf_counter(), time.process_time()
  dataset = pipeline.make_pretraining_dataset(
      data, batch_size=args.batch_size, max_seq_length=args.max_seq_length,
      max_predictions_per_seq=max(1, int(0.155 * args.max_seq_length)), mask_prob=0.15,
      vocab=vocab.load_vocab(vocab.builtin_vocab_path()), seed=0,
      deterministic=deterministic, start_batch=start_batch)
  iterator = iter(dataset)
  next(iterator)["input_ids"].numpy()
  result = time.perf_counter() - began, time.process_time() - cpu, rchar() - before
  del iterator  # stops its reads ahead before the next measurement
  return result


def read_up_to(files: list[str], records: int) -> tuple[float, float]:
  """(seconds, CPU seconds) to read (not parse) `records` records and one more: the skip a
  resume did before (at most one pass)."""
  import tensorflow as tf

  began, cpu = time.perf_counter(), time.process_time()
  dataset = tf.data.Dataset.from_tensor_slices(files).interleave(
      tf.data.TFRecordDataset, cycle_length=min(len(files), 16),
      num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  next(iter(dataset.skip(records)))
  return time.perf_counter() - began, time.process_time() - cpu


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--data_dir", default="/tmp/electra_bench_resume_position")
  parser.add_argument("--copies", type=int, default=4, help="times the corpus is repeated")
  parser.add_argument("--max_seq_length", type=int, default=32)
  parser.add_argument("--batch_size", type=int, default=128)
  parser.add_argument("--repeats", type=int, default=5, help="median of this many")
  args = parser.parse_args()

  from electra_tf.data.manifest import read_manifest

  data = build(args)
  manifest = read_manifest(data)
  per_epoch = manifest.examples
  positions = {"0": 0, "10% of epoch 0": per_epoch // 10, "50% of epoch 0": per_epoch // 2,
               "90% of epoch 0": per_epoch * 9 // 10, "50% of epoch 3": per_epoch * 7 // 2}
  first_batch(data, 0, True, args)  # traces the functions once
  print(f"data: {manifest.examples:,} examples of {args.max_seq_length} tokens, "
        f"{manifest.record_bytes / 1e6:.0f} MB in {len(manifest.shards)} shards; batch "
        f"{args.batch_size}; median of {args.repeats}, the positions taken in turn; load "
        f"average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores at the start\n")
  runs = {(name, mode): [] for name in positions for mode in (True, False)}
  reads = {name: [] for name in positions}
  for _ in range(args.repeats):  # in turn, so that a busy spell of the machine hits all
    for name, position in positions.items():
      start = position // args.batch_size
      for deterministic in (True, False):
        runs[name, deterministic].append(first_batch(data, start, deterministic, args))
      reads[name].append(read_up_to(manifest.shard_paths,
                                    (start * args.batch_size) % per_epoch))
  print("| resume at | example position | deterministic: first batch (CPU) | bytes read | "
        "default mode: first batch (CPU) | bytes read | reading up to the position, "
        "before (CPU) |")
  print("|---|---|---|---|---|---|---|")
  for name, position in positions.items():
    row = [name, f"{position // args.batch_size * args.batch_size:,}"]
    for deterministic in (True, False):
      measured = runs[name, deterministic]
      wall, cpu, read = (statistics.median(m[i] for m in measured) for i in range(3))
      row += [f"{wall:.2f} s ({cpu:.2f} s)", f"{read / 1e6:.1f} MB"]
    wall, cpu = (statistics.median(r[i] for r in reads[name]) for i in range(2))
    row.append(f"{wall:.2f} s ({cpu:.2f} s)")
    print("| " + " | ".join(row) + " |", flush=True)
  print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
  main()
