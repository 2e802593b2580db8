"""The tokenizer flags the commands share, and the vocab (with its spec) they resolve to.

Left unset, the vocab's own settings apply: those recorded beside it, or inferred from its
tokens. Set, they override an unrecorded vocab and must agree with a recorded one.
"""

from __future__ import annotations

from absl import flags

_NAMES = ("lower_case", "strip_accents", "split_cjk")


def define_flags() -> None:
  """Defines --lower_case, --strip_accents and --split_cjk (call once per command)."""
  flags.DEFINE_boolean(
      "lower_case", True,
      "Lower-case text before the vocab applies (transformers' do_lower_case). Unset: the "
      "vocab's recorded setting, else inferred from its tokens (the built-in vocab: true).")
  flags.DEFINE_boolean(
      "strip_accents", None,
      "Strip accents: NFD, then drop non-spacing marks. Unset: as recorded with the vocab, "
      "else it follows --lower_case. It splits Hangul into jamo and drops the voiced marks "
      "of kana, so vocabs of those scripts are made without it.")
  flags.DEFINE_boolean(
      "split_cjk", None,
      "Make every CJK ideograph a word of its own (BERT's tokenize_chinese_chars). Unset: "
      "as recorded with the vocab, else true.")


def given(flag_values) -> dict[str, bool]:
  """The tokenizer flags set on the command line, by name."""
  return {name: flag_values[name].value for name in _NAMES
          if name in flag_values and flag_values[name].present}


def load_vocab(flag_values, path: str):
  """The vocab at `path` with its spec, overridden by the tokenizer flags that were set.

  Raises:
    UserError: a flag disagrees with the settings recorded beside the vocab.
  """
  from electra_tf.data import vocab as vocab_lib

  return vocab_lib.load_vocab_overriding(path, given(flag_values))
