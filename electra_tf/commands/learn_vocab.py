r"""electra-learn-vocab: a WordPiece vocab learned from a text corpus.

  electra-learn-vocab --input_files='corpus/*.txt' --vocab_size=8000 --output=vocab.txt \
      [--nolower_case]

Without installing: python -m electra_tf.commands.learn_vocab.
"""

from __future__ import annotations

from absl import flags

from electra_tf import cli  # stdlib only: --help stays fast

FLAGS = flags.FLAGS


def _define_flags() -> None:
  flags.DEFINE_string("input_files", None,
                      "Comma-separated globs of UTF-8 text files to learn from, e.g. "
                      "'corpus/*.txt' (quote it so the shell does not expand it).")
  flags.DEFINE_integer("vocab_size", 8000, "Largest vocab size wanted (special tokens count).")
  flags.DEFINE_string("output", "vocab.txt", "Where to write the vocab, one token a line.")
  flags.DEFINE_boolean("lower_case", True,
                       "Lower-case and strip accents before learning (BERT uncased). The "
                       "tokenizer must later use the same setting.")
  flags.mark_flag_as_required("input_files")


def main(argv: list[str]) -> None:
  del argv  # cli.flags_parser refuses arguments that are not flags
  from electra_tf.data import io_utils
  from electra_tf.data.vocab import learn_vocab

  def learn() -> None:
    vocab = learn_vocab(FLAGS.input_files, FLAGS.vocab_size, FLAGS.lower_case,
                        output_path=FLAGS.output)
    print(f"wrote {vocab.size} tokens to {FLAGS.output} (md5 {vocab.md5})")

  io_utils.run_cli(learn)


def run() -> None:
  """The console script."""
  _define_flags()  # here, not at import: importing this module defines no flags
  cli.run_command(main, __name__)


if __name__ == "__main__":
  run()
