r"""electra-learn-vocab: a WordPiece or SentencePiece vocab learned from a text corpus, with
its tokenizer settings written beside it (<stem>.tokenizer.json).

  electra-learn-vocab --input_files='corpus/*.txt' --vocab_size=8000 --output=vocab.txt \
      [--nolower_case] [--strip_accents|--nostrip_accents]
  electra-learn-vocab --kind=sentencepiece --input_files='corpus/*.txt' --vocab_size=8000 \
      --output=spm.model [--model_type=bpe]

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
  flags.DEFINE_enum("kind", "wordpiece", ["wordpiece", "sentencepiece"],
                    "wordpiece: a BERT vocab.txt; sentencepiece: a SentencePiece .model.")
  flags.DEFINE_integer("vocab_size", 8000, "Largest vocab size wanted (special tokens count).")
  flags.DEFINE_string("output", "vocab.txt", "Where to write the vocab (vocab.txt, or "
                      "spm.model for --kind=sentencepiece); its settings go beside it.")
  flags.DEFINE_boolean("lower_case", None,
                       "Lower-case the text first. Default: true for wordpiece (BERT uncased), "
                       "false for sentencepiece.")
  flags.DEFINE_boolean("strip_accents", None,
                       "WordPiece: strip accents (NFD, drop marks). Default: follows "
                       "--lower_case, but off when the corpus holds letters it would change "
                       "outside Latin, Greek and Cyrillic (Hangul syllables, voiced kana).")
  flags.DEFINE_boolean("split_cjk", True, "WordPiece: every CJK ideograph is a word.")
  flags.DEFINE_enum("model_type", "unigram", ["unigram", "bpe"],
                    "SentencePiece's algorithm.")
  flags.mark_flag_as_required("input_files")


def main(argv: list[str]) -> None:
  del argv  # cli.flags_parser refuses arguments that are not flags
  from electra_tf.data import io_utils
  from electra_tf.data import tokenizer_spec as spec_lib
  from electra_tf.data.vocab_learning import corpus_chars, learn_vocab

  def learn() -> None:
    if FLAGS.kind == spec_lib.SENTENCEPIECE:
      spec = spec_lib.TokenizerSpec.create(spec_lib.SENTENCEPIECE, bool(FLAGS.lower_case))
    else:
      lower = True if FLAGS.lower_case is None else FLAGS.lower_case
      chars = corpus_chars(FLAGS.input_files) if FLAGS.strip_accents is None else ()
      spec = spec_lib.choose_for_corpus(chars, lower, FLAGS.strip_accents)
      spec = spec_lib.TokenizerSpec.create(spec.kind, spec.lower_case, spec.strip_accents,
                                           FLAGS.split_cjk)
    vocab = learn_vocab(FLAGS.input_files, FLAGS.vocab_size, spec, output_path=FLAGS.output,
                        model_type=FLAGS.model_type)
    print(f"wrote {vocab.size} tokens to {FLAGS.output} (md5 {vocab.md5}), settings "
          f"({spec.describe()}) to {spec_lib.spec_path(FLAGS.output)}")

  io_utils.run_cli(learn)


def run() -> None:
  """The console script."""
  _define_flags()  # here, not at import: importing this module defines no flags
  cli.run_command(main, __name__)


if __name__ == "__main__":
  run()
