"""keras-hub's ElectraTokenizer, set up as our keras_hub preset writes it, against our tokenizer
on held-out Korean, Chinese, Japanese and German text, each with a WordPiece vocab learned on
that language's training text as electra-learn-vocab learns it by default (uncased; accent
stripping off where it would break the script's letters), or cased (--cased, as
electra-learn-vocab --nolower_case).

  .venv/bin/python bench/serving/keras_hub_tokenizer.py [--cased] [--vocab_size=4000] \
      [--max_lines=2000] [--languages=ko,zh,ja,de]

Prints, per language, the spec, how many held-out lines get different ids, and the first
differences (the text and both tokenizations around the first differing token). The
numbers go to docs/exports.md.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from electra_tf.data import corpora, tokenizer_spec  # noqa: E402
from electra_tf.data.tokenizer import make_tokenizer  # noqa: E402
from electra_tf.data.vocab_learning import learn_vocab  # noqa: E402
from electra_tf.serving import keras_hub_preset  # noqa: E402
from electra_tf.serving.sources import EncoderSource  # noqa: E402

LANGUAGES = ("ko", "zh", "ja", "de")


def _lines(path: str, limit: int) -> list[str]:
  with open(path, encoding="utf-8") as f:
    return [line.strip() for line in f if line.strip()][:limit]


def keras_hub_tokenizer(vocab):
  """ElectraTokenizer with the arguments our preset's tokenizer.json gives it."""
  import keras_hub

  config = dict(keras_hub_preset.tokenizer_config(EncoderSource(None, vocab))["config"])
  for key in ("name", "config_file", "vocabulary", "dtype", "trainable", "sequence_length",
              "special_tokens", "special_tokens_in_strings"):
    config.pop(key, None)
  return keras_hub.models.ElectraTokenizer(vocabulary=vocab.path, **config)


def _first_difference(ours: list[str], theirs: list[str]) -> str:
  at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b),
            min(len(ours), len(theirs)))
  window = slice(max(at - 1, 0), at + 3)
  return f"ours {' '.join(ours[window])} | keras-hub {' '.join(theirs[window])}"


def measure(language: str, vocab_size: int, max_lines: int, work: str, cased: bool = False,
            shown: int = 3) -> dict:
  import tensorflow as tf

  train = corpora.language_corpus(language, "train")
  held_out = _lines(corpora.language_corpus(language, "held_out"), max_lines)
  chars = set(open(train, encoding="utf-8").read())
  spec = tokenizer_spec.choose_for_corpus(chars, not cased, None, stream=io.StringIO())
  vocab = learn_vocab(train, vocab_size, spec, output_path=os.path.join(work, f"{language}.txt"),
                      stream=io.StringIO())
  ours = make_tokenizer(vocab).tokenize(held_out).to_list()
  theirs = keras_hub_tokenizer(vocab)(tf.constant(held_out))
  theirs = theirs.to_list() if hasattr(theirs, "to_list") else [list(r) for r in theirs]
  differ = [i for i, (a, b) in enumerate(zip(ours, theirs)) if list(a) != list(b)]
  unk = sum(row.count(vocab.unk_id) for row in theirs) - sum(row.count(vocab.unk_id)
                                                            for row in ours)
  print(f"{language}: vocab {vocab.size} ({spec.describe()}); {len(differ)} of "
        f"{len(held_out)} held-out lines differ; keras-hub has {unk:+d} [UNK] tokens")
  for i in differ[:shown]:
    tokens = vocab.tokens
    print(f"  {held_out[i][:60]!r}: " + _first_difference(
        [tokens[t] for t in ours[i]], [tokens[t] for t in theirs[i]]))
  return {"language": language, "lines": len(held_out), "differ": len(differ),
          "extra_unk": unk, "spec": spec.describe()}


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--vocab_size", type=int, default=4000)
  parser.add_argument("--max_lines", type=int, default=2000)
  parser.add_argument("--languages", default=",".join(LANGUAGES))
  parser.add_argument("--cased", action="store_true", help="learn cased vocabs")
  args = parser.parse_args(argv)
  with tempfile.TemporaryDirectory() as work:
    for language in args.languages.split(","):
      measure(language, args.vocab_size, args.max_lines, work, args.cased)


if __name__ == "__main__":
  main()
