r"""electra-build-data: pretraining TFRecords from text files.

  electra-build-data --input_files='corpus/*.txt' --vocab_file=vocab.txt --output_dir=data/ \
      --max_seq_length=128

Text: UTF-8, one sentence per line, a blank line between documents. `--input_files=builtin`
uses the built-in corpus (SQuAD v1.1 train contexts, cached in --cache_dir).
Without installing: python -m electra_tf.commands.build_data.
"""

from __future__ import annotations

from absl import flags

from electra_tf import cli, fileio  # stdlib only: --help stays fast
from electra_tf.commands import tokenizer_flags
from electra_tf.data import io_utils
from electra_tf.filenames import HELD_OUT_SUBDIR

FLAGS = flags.FLAGS


def _define_flags() -> None:
  flags.DEFINE_string(
      "input_files", None,
      "Comma-separated globs of UTF-8 text files, one sentence per line and a blank line "
      "between documents (quote the glob). 'builtin' uses SQuAD v1.1 train contexts.")
  flags.DEFINE_string("vocab_file", None,
                      "WordPiece vocab.txt or SentencePiece .model, with its tokenizer "
                      "settings beside it. Default: the built-in bert-base-uncased vocab.")
  flags.DEFINE_string("output_dir", None, "Data dir to create (shards + manifest.json).")
  flags.DEFINE_integer("max_seq_length", 128, "Tokens per example, [CLS] and [SEP]s included.")
  tokenizer_flags.define_flags()
  flags.DEFINE_integer("num_workers", 0,
                       "Worker processes; 0 means every core (at most one per 8 MB of text).")
  flags.DEFINE_integer("min_shards", 1,
                       "At least this many output shards (e.g. the number of input hosts); "
                       "there is also one per worker and one per 64 MB of text.")
  flags.DEFINE_float("holdout_fraction", 0.0,
                     "Share of documents set aside, whole, in <output_dir>/held_out for "
                     "held-out evaluation (pretrain.py uses it when --train_data is this "
                     "dir); e.g. 0.01. 0: no split.")
  flags.DEFINE_integer("seed", 0, "Random seed; same seed, inputs and shard count: same data.")
  flags.DEFINE_boolean("overwrite", False, "Replace --output_dir if it already holds data.")
  flags.DEFINE_string("cache_dir", None,
                      "Where --input_files=builtin writes its text files (default: "
                      "$ELECTRA_TF_CACHE or ~/.cache/electra_tf, shared with pretrain.py).")
  flags.mark_flags_as_required(["input_files", "output_dir"])


def _build() -> None:
  from electra_tf.data import builtin, pretraining_data, vocab

  cli.check_output_dir(FLAGS.output_dir, "--output_dir")
  input_files = FLAGS.input_files
  if input_files == builtin.BUILTIN_NAME:
    input_files = builtin.builtin_corpus(FLAGS.cache_dir or builtin.default_cache_dir())
  vocab_file = FLAGS.vocab_file or vocab.builtin_vocab_path()
  manifest = pretraining_data.build_pretraining_data(
      input_files, tokenizer_flags.load_vocab(FLAGS, vocab_file), FLAGS.output_dir,
      max_seq_length=FLAGS.max_seq_length,
      num_workers=FLAGS.num_workers or None, seed=FLAGS.seed, overwrite=FLAGS.overwrite,
      min_shards=FLAGS.min_shards, holdout_fraction=FLAGS.holdout_fraction)
  mb = manifest.record_bytes / 1e6
  print(f"wrote {manifest.examples:,} examples ({manifest.tokens:,} tokens) from "
        f"{manifest.documents:,} documents to {len(manifest.shards)} shard(s), {mb:,.1f} MB, "
        f"in {FLAGS.output_dir} ({manifest.build_seconds:.1f} s)")
  if FLAGS.holdout_fraction:
    held_out = pretraining_data.read_manifest(fileio.join(FLAGS.output_dir, HELD_OUT_SUBDIR))
    print(f"held out {held_out.examples:,} examples ({held_out.tokens:,} tokens) from "
          f"{held_out.documents:,} documents in {held_out.data_dir}")


def main(argv: list[str]) -> None:
  del argv  # cli.flags_parser refuses arguments that are not flags
  io_utils.run_cli(_build)


def run() -> None:
  """The console script."""
  _define_flags()  # here, not at import: importing this module defines no flags
  cli.run_command(main, __name__)


if __name__ == "__main__":
  run()
