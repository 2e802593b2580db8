"""Tokenizers in the graph: strings -> ragged ids with byte offsets, WordPiece or SentencePiece,
set up from a vocab and the TokenizerSpec that travels with it."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_text as tf_text

from electra_tf import fileio
from electra_tf.data.bert_text import BasicTokenizer, Words, utf8_width
from electra_tf.data.tokenizer_spec import SENTENCEPIECE, TokenizerSpec
from electra_tf.data.vocab import Vocab, load_vocab

MAX_CHARS_PER_WORD = 100  # longer words become [UNK], as in BERT and transformers


class WordPieceTokenizer(tf.Module):
  """BERT tokenization: the basic tokenizer (see `bert_text`), then WordPiece per word.

  The vocab's spec says how text is normalized; ids equal those of transformers' BERT
  tokenizer configured with the same settings. Works eagerly and inside `tf.function`,
  `tf.data` maps and SavedModels.

  Args:
    vocab: a `Vocab` (with its spec) or the path of a vocab file.
    dtype: integer dtype of the ids, tf.int32 (model inputs) or tf.int64 (tf.Example).

  Example:
    >>> tokenizer = WordPieceTokenizer(builtin_vocab_path())
    >>> tokenizer.tokenize(["Héllo world!"]).to_list()
    [[7592, 2088, 999]]
  """

  def __init__(self, vocab: Vocab | str, dtype: tf.DType = tf.int32, name=None):
    super().__init__(name=name)
    self.vocab = load_vocab(vocab) if isinstance(vocab, str) else vocab
    self.spec: TokenizerSpec = self.vocab.spec
    if self.spec.kind == SENTENCEPIECE:
      raise ValueError("WordPieceTokenizer got a SentencePiece vocab; use make_tokenizer")
    self.dtype = tf.as_dtype(dtype)
    self._basic = BasicTokenizer(self.spec)
    self._unk = self.vocab.tokens[self.vocab.unk_id]
    self._wordpiece = tf_text.FastWordpieceTokenizer(
        vocab=list(self.vocab.tokens), suffix_indicator="##",
        max_bytes_per_word=4 * MAX_CHARS_PER_WORD, token_out_type=self.dtype,
        unknown_token=self._unk, no_pretokenization=True, support_detokenization=True)

  def split_words(self, texts: tf.Tensor | list[str]) -> Words:
    """The words of each string, normalized, with their characters' original byte spans."""
    return self._basic.split(texts)

  def _pieces(self, words: Words):
    """Word pieces of each word [W, (P)] with the index of their first and last character
    among the words' characters (`words.char_starts`)."""
    long_words = words.chars.row_lengths() > MAX_CHARS_PER_WORD
    strings = tf.where(long_words, self._unk, words.strings)
    ids, starts, ends = self._wordpiece.tokenize_with_offsets(strings)
    # A piece's byte offsets within its word -> indices of the characters it covers.
    widths = utf8_width(words.chars.values)
    char_byte_starts = tf.cumsum(widths, exclusive=True)
    word_base = tf.gather(tf.concat([char_byte_starts, [0]], 0), words.chars.row_splits[:-1])
    piece_word = ids.value_rowids()
    base = tf.gather(word_base, piece_word)
    def char_at(byte: tf.Tensor) -> tf.Tensor:  # [N] global byte -> index of its character
      return tf.searchsorted(char_byte_starts[None, :], byte[None, :], side="right",
                             out_type=tf.int64)[0] - 1

    first, last = char_at(base + starts.values), char_at(base + ends.values - 1)
    # A word replaced by [UNK] covers all its characters.
    is_long = tf.gather(long_words, piece_word)
    first = tf.where(is_long, tf.gather(words.chars.row_splits[:-1], piece_word), first)
    last = tf.where(is_long, tf.gather(words.chars.row_splits[1:] - 1, piece_word), last)
    return ids, first, last

  def tokenize_words(self, texts: tf.Tensor | list[str]
                     ) -> tuple[tf.RaggedTensor, tf.RaggedTensor, tf.RaggedTensor]:
    """Ids grouped by word, with each word's original byte span.

    Returns:
      (ids [B, (W), (P)], word_starts [B, (W)], word_ends [B, (W)]); offsets int64.
    """
    words = self.split_words(texts)
    ids, _, _ = self._pieces(words)
    starts, ends = words.spans()
    return words.batched(ids), words.batched(starts), words.batched(ends)

  def tokenize(self, texts: tf.Tensor | list[str]) -> tf.RaggedTensor:
    """Token ids of each string: RaggedTensor [B, (tokens)] of `dtype`."""
    return self.tokenize_with_offsets(texts)[0]

  def tokenize_with_offsets(self, texts: tf.Tensor | list[str]
                            ) -> tuple[tf.RaggedTensor, tf.RaggedTensor, tf.RaggedTensor]:
    """Token ids with the byte span of each token in the original string.

    Args:
      texts: string tensor [B] (or a list of str).

    Returns:
      (ids, starts, ends), each RaggedTensor [B, (tokens)]; ids are `dtype`, offsets int64
      UTF-8 byte offsets into the input, so `text[start:end]` is the token's source text.
    """
    words = self.split_words(texts)
    ids, first, last = self._pieces(words)
    starts = ids.with_values(tf.gather(words.char_starts, first))
    ends = ids.with_values(tf.gather(words.char_ends, last))
    return tuple(words.batched(t).merge_dims(1, 2) for t in (ids, starts, ends))

  def detokenize(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor:
    """Joins word pieces back into space-separated words (normalized text stays so)."""
    return self._wordpiece.detokenize(ids)

  def ids_to_tokens(self, ids: list[int]) -> list[str]:
    """The vocab strings of `ids` (for printing and debugging)."""
    return [self.vocab.tokens[i] for i in ids]


class SentencePieceTokenizer(tf.Module):
  """A SentencePiece model in the graph (tf.text), with the same methods as WordPiece's.

  Args:
    vocab: a `Vocab` of kind sentencepiece (its path is the .model file) or that path.
    dtype: integer dtype of the ids.
  """

  def __init__(self, vocab: Vocab | str, dtype: tf.DType = tf.int32, name=None):
    super().__init__(name=name)
    self.vocab = load_vocab(vocab) if isinstance(vocab, str) else vocab
    self.spec: TokenizerSpec = self.vocab.spec
    if self.spec.kind != SENTENCEPIECE:
      raise ValueError("SentencePieceTokenizer got a WordPiece vocab; use make_tokenizer")
    self.dtype = tf.as_dtype(dtype)
    # tf.text's op returns int32 ids only; _cast gives the requested dtype.
    self._model = tf_text.SentencepieceTokenizer(
        model=fileio.read_bytes(self.vocab.path), out_type=tf.int32)
    # Words for tagging are what BERT's basic tokenizer splits, without normalization.
    self._basic = BasicTokenizer(TokenizerSpec(lower_case=False, strip_accents=False))

  def _prepare(self, texts) -> tf.Tensor:
    texts = tf.convert_to_tensor(texts, tf.string)
    if not self.spec.lower_case:
      return texts
    # tf.strings.lower stops at a NUL byte; the model's own normalization deletes it anyway.
    return tf.strings.lower(tf.strings.regex_replace(texts, "\x00", ""), encoding="utf-8")

  def _cast(self, ids: tf.RaggedTensor) -> tf.RaggedTensor:
    return tf.cast(ids, self.dtype) if self.dtype != tf.int32 else ids

  def split_words(self, texts: tf.Tensor | list[str]) -> Words:
    return self._basic.split(texts)

  def tokenize_words(self, texts):
    words = self.split_words(texts)
    ids = self._cast(self._model.tokenize(self._prepare(words.strings)))
    starts, ends = words.spans()
    return words.batched(ids), words.batched(starts), words.batched(ends)

  def tokenize(self, texts: tf.Tensor | list[str]) -> tf.RaggedTensor:
    return self._cast(self._model.tokenize(self._prepare(texts)))

  def tokenize_with_offsets(self, texts):
    """(ids, starts, ends) [B, (tokens)] with byte offsets into the (lower-cased) input.

    A piece that begins a word ("▁word") covers the space before it in SentencePiece's
    offsets; its start here is the word's first byte, so spans slice words as WordPiece's do.
    """
    prepared = self._prepare(texts)
    ids, starts, ends = self._model.tokenize_with_offsets(prepared)
    starts, ends = tf.cast(starts, tf.int64), tf.cast(ends, tf.int64)
    text = tf.gather(prepared, starts.value_rowids())
    span = tf.strings.substr(text, starts.values, ends.values - starts.values)
    stripped = tf.strings.regex_replace(span, r"^\s+", "")
    lead = tf.strings.length(span) - tf.strings.length(stripped)
    lead = tf.where(tf.strings.length(stripped) > 0, tf.cast(lead, tf.int64), 0)
    return self._cast(ids), starts.with_values(starts.values + lead), ends

  def detokenize(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor:
    return self._model.detokenize(tf.cast(ids, tf.int32))

  def ids_to_tokens(self, ids: list[int]) -> list[str]:
    return [self.vocab.tokens[i] for i in ids]


Tokenizer = WordPieceTokenizer | SentencePieceTokenizer


def make_tokenizer(vocab: Vocab | str, dtype: tf.DType = tf.int32) -> Tokenizer:
  """The tokenizer of a vocab's kind (its spec says which)."""
  vocab = load_vocab(vocab) if isinstance(vocab, str) else vocab
  cls = SentencePieceTokenizer if vocab.spec.kind == SENTENCEPIECE else WordPieceTokenizer
  return cls(vocab, dtype)
