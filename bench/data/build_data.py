r"""Data building throughput: MB/s of raw text turned into WordPiece TFRecords.

  python bench/data/build_data.py               # all 442 SQuAD train articles, 1 and 2 workers
  python bench/data/build_data.py --workers=1 --max_articles=100

Uses the built-in corpus (the SQuAD v1.1 train contexts from the installed package, one
sentence per line, about 13 MB) and the bert-base-uncased vocab, and runs the same
`build_pretraining_data` that `electra-build-data` runs. Prints
a table and one JSON line per measurement (workers, max_seq_length, mb, seconds, mb_per_s,
examples_per_s).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--max_articles", type=int, default=None,
                      help="first N SQuAD train articles (default: all 442)")
  parser.add_argument("--workers", default="1,2", help="comma-separated worker counts")
  parser.add_argument("--max_seq_length", type=int, default=128)
  args = parser.parse_args()

  from electra_tf.data import builtin, pretraining_data, vocab

  scratch = tempfile.mkdtemp(prefix="bench_build_")
  try:
    files = builtin.builtin_corpus(os.path.join(scratch, "text"), args.max_articles)
    megabytes = sum(os.path.getsize(f) for f in files) / 1e6
    rows = []
    for workers in [int(w) for w in args.workers.split(",")]:
      out = os.path.join(scratch, f"data_{workers}")
      start = time.perf_counter()
      manifest = pretraining_data.build_pretraining_data(
          files, vocab.builtin_vocab_path(), out, max_seq_length=args.max_seq_length,
          num_workers=workers, show_progress=False)
      seconds = time.perf_counter() - start
      examples = manifest.examples
      rows.append({"workers": workers, "max_seq_length": args.max_seq_length,
                   "mb": round(megabytes, 2), "seconds": round(seconds, 2),
                   "mb_per_s": round(megabytes / seconds, 3),
                   "examples": examples, "examples_per_s": round(examples / seconds, 1)})
      shutil.rmtree(out)
  finally:
    shutil.rmtree(scratch, ignore_errors=True)

  print(f"{'workers':>8} {'MB':>8} {'seconds':>8} {'MB/s':>8} {'examples/s':>11}")
  for r in rows:
    print(f"{r['workers']:>8} {r['mb']:>8.2f} {r['seconds']:>8.2f} {r['mb_per_s']:>8.3f} "
          f"{r['examples_per_s']:>11.1f}")
  for r in rows:
    print(json.dumps(r))


if __name__ == "__main__":
  main()
