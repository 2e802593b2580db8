"""BERT WordPiece tokenization on tf.text (FastBertTokenizer): strings -> ragged token ids."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_text as tf_text

from electra_tf.data.vocab import Vocab, load_vocab


class WordPieceTokenizer:
  """End-to-end BERT tokenization: normalize, split words, then WordPiece.

  With `lower_case=True` the text is lower-cased, NFD-normalized and stripped of accents
  (BERT uncased: "Café" -> "cafe"); otherwise it is only cleaned of control characters.
  Works eagerly and inside `tf.function` / `tf.data` maps.

  Args:
    vocab: a `Vocab` or the path of a vocab file.
    lower_case: must match how the vocab was made (True for bert-base-uncased).
    dtype: integer dtype of the ids, tf.int32 (model inputs) or tf.int64 (tf.Example).
    max_bytes_per_word: longer words become [UNK].

  Example:
    >>> tokenizer = WordPieceTokenizer(load_vocab(builtin_vocab_path()))
    >>> tokenizer.tokenize(["Héllo world!"]).to_list()
    [[7592, 2088, 999]]
  """

  def __init__(self, vocab: Vocab | str, lower_case: bool = True, dtype: tf.DType = tf.int32,
               max_bytes_per_word: int = 100):
    self.vocab = load_vocab(vocab) if isinstance(vocab, str) else vocab
    self.lower_case = lower_case
    self.dtype = tf.as_dtype(dtype)
    self._tokenizer = tf_text.FastBertTokenizer(
        vocab=list(self.vocab.tokens), suffix_indicator="##",
        max_bytes_per_word=max_bytes_per_word, token_out_type=self.dtype,
        unknown_token=self.vocab.tokens[self.vocab.unk_id],
        lower_case_nfd_strip_accents=lower_case, support_detokenization=True)

  def tokenize(self, texts: tf.Tensor | list[str]) -> tf.RaggedTensor:
    """Token ids of each string.

    Args:
      texts: string tensor [B] (or a list of str).

    Returns:
      RaggedTensor [B, (tokens)] of `dtype` word-piece ids.
    """
    return self._tokenizer.tokenize(tf.convert_to_tensor(texts, tf.string))

  def tokenize_with_offsets(self, texts: tf.Tensor | list[str]
                            ) -> tuple[tf.RaggedTensor, tf.RaggedTensor, tf.RaggedTensor]:
    """Token ids with the byte span of each token in the original (un-normalized) string.

    Args:
      texts: string tensor [B].

    Returns:
      (ids, starts, ends), each RaggedTensor [B, (tokens)]; ids are `dtype`, offsets int64
      UTF-8 byte offsets into the input, so `text[start:end]` is the token's source text.
    """
    return self._tokenizer.tokenize_with_offsets(tf.convert_to_tensor(texts, tf.string))

  def detokenize(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor:
    """Joins word pieces back into space-separated words (lower-cased text stays lower)."""
    return self._tokenizer.detokenize(ids)

  def ids_to_tokens(self, ids: list[int]) -> list[str]:
    """The vocab strings of `ids` (for printing and debugging)."""
    return [self.vocab.tokens[i] for i in ids]
