"""BERT's basic tokenizer in the graph: normalize each character, then split words, keeping
every character's byte span in the original string.

The rules are those of transformers' (Rust) `BertNormalizer` and `BertPreTokenizer`, so ids
match the tokenizer transformers builds from an exported `tokenizer_config.json`:
1. clean: delete U+0000, U+FFFD and control, format, private-use and surrogate characters
   (categories Cc Cf Co Cs, but tab, newline and carriage return), map whitespace to a space;
2. split_cjk: put spaces around CJK Unified Ideographs;
3. strip_accents: NFD, then drop non-spacing marks (category Mn);
4. lower_case: full Unicode lower-casing of each character;
5. words: split on spaces, and every punctuation character (ASCII punctuation or
   category P*) is a word of its own.
Every step maps one character to zero or more characters, so the mapping is a table built
once from Python's Unicode database and applied to the code points of a batch at once.
"""

from __future__ import annotations

import functools
import unicodedata
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from electra_tf.data.tokenizer_spec import TokenizerSpec

# CJK Unified Ideographs and their extensions and compatibility blocks, as BERT defines them.
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
_DELETE, _KEEP, _CJK = 0, 1, 2
_SPACE = 32


def _is_deleted(char: str) -> bool:
  # Unassigned code points (Cn) stay, as in transformers' Rust normalizer.
  return char in "\x00\ufffd" or (unicodedata.category(char) in ("Cc", "Cf", "Co", "Cs")
                                   and char not in "\t\n\r")


def _runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """(starts, values) of the runs of equal values in `values` indexed by code point."""
  array = np.asarray(values, np.int32)
  starts = np.flatnonzero(np.concatenate([[True], array[1:] != array[:-1]]))
  return starts.astype(np.int32), array[starts]


class CharTables(NamedTuple):
  """Per-code-point rules of one spec, as arrays for the graph.

  class_starts/class_values: runs of the character class (_DELETE, _KEEP, _CJK) by code point.
  punct_starts/punct_values: runs of "is punctuation" (0/1) by code point.
  mapped_keys: code points whose characters normalization changes (sorted);
  mapped_splits/mapped_values: ragged row splits and code points of what each becomes.
  """

  class_starts: np.ndarray
  class_values: np.ndarray
  punct_starts: np.ndarray
  punct_values: np.ndarray
  mapped_keys: np.ndarray
  mapped_splits: np.ndarray
  mapped_values: np.ndarray


# Ideograph blocks that neither lower-casing nor NFD changes: skipped when building tables.
_UNCHANGED_IDEOGRAPHS = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2FFFF))


def _normalized(char: str, lower_case: bool, strip_accents: bool) -> str:
  if char.isspace():
    return " "
  if strip_accents:
    char = "".join(c for c in unicodedata.normalize("NFD", char)
                   if unicodedata.category(c) != "Mn")
  return char.lower() if lower_case else char


@functools.lru_cache(maxsize=8)
def char_tables(spec: TokenizerSpec) -> CharTables:
  """The tables of one spec's settings (built in about a second, then cached)."""
  classes = np.full(0x110000, _KEEP, np.int32)
  punct = np.zeros(0x110000, np.int32)
  punct[[33 + i for i in range(15)] + list(range(58, 65)) + list(range(91, 97))
        + list(range(123, 127))] = 1
  skip = np.zeros(0x110000, bool)
  for lo, hi in _UNCHANGED_IDEOGRAPHS:
    skip[lo:hi + 1] = True
  skip[0xF900:0xFB00] = False  # compatibility ideographs decompose
  skip[0x2F800:0x2FA20] = False
  keys, splits, values = [], [0], []
  for cp in range(0x110000):
    char = chr(cp)
    category = unicodedata.category(char)
    if category == "Cn" or skip[cp]:
      continue  # unassigned, or an ideograph that stays as it is
    if category[0] == "P":
      punct[cp] = 1
    if _is_deleted(char):
      classes[cp] = _DELETE
      continue
    out = _normalized(char, spec.lower_case, spec.strip_accents)
    if out != char:
      keys.append(cp)
      values.extend(ord(c) for c in out)
      splits.append(len(values))
  if spec.split_cjk:
    for lo, hi in CJK_RANGES:
      classes[lo:hi + 1] = _CJK
  classes[[0, 0xFFFD]] = _DELETE
  class_starts, class_values = _runs(classes)
  punct_starts, punct_values = _runs(punct)
  return CharTables(class_starts, class_values, punct_starts, punct_values,
                    np.asarray(keys, np.int32), np.asarray(splits, np.int64),
                    np.asarray(values, np.int32))


def _lookup_runs(starts: tf.Tensor, values: tf.Tensor, cps: tf.Tensor) -> tf.Tensor:
  """values[run containing each of `cps` [N]] for runs starting at `starts` [R]."""
  index = tf.searchsorted(starts, cps, side="right") - 1
  return tf.gather(values, index)


def utf8_width(cps: tf.Tensor) -> tf.Tensor:
  """Bytes of each code point in UTF-8, int64 [N]."""
  return (1 + tf.cast(cps >= 0x80, tf.int64) + tf.cast(cps >= 0x800, tf.int64)
          + tf.cast(cps >= 0x10000, tf.int64))


class Words(NamedTuple):
  """Words of a batch, flat: strings [W] with their row in the batch, the code points of
  each [W, (C)], and every character's original byte span."""

  strings: tf.Tensor  # [W] UTF-8 words after normalization
  row_ids: tf.Tensor  # [W] int64 batch row of each word
  nrows: tf.Tensor  # scalar int64: batch size
  chars: tf.RaggedTensor  # [W, (C)] int32 code points
  char_starts: tf.Tensor  # [sum C] int64 byte offset in the original string
  char_ends: tf.Tensor  # [sum C] int64

  def spans(self) -> tuple[tf.Tensor, tf.Tensor]:
    """Original byte (start, end) of each word, int64 [W]."""
    first = self.chars.row_splits[:-1]
    last = tf.maximum(self.chars.row_splits[1:] - 1, 0)
    return tf.gather(self.char_starts, first), tf.gather(self.char_ends, last)

  def batched(self, flat: tf.Tensor | tf.RaggedTensor) -> tf.RaggedTensor:
    """`flat` [W, ...] regrouped by batch row, [B, (W), ...]."""
    return tf.RaggedTensor.from_value_rowids(flat, self.row_ids, nrows=self.nrows)


class BasicTokenizer(tf.Module):
  """Normalizes and splits strings into words in the graph (no vocab involved).

  Args:
    spec: the settings (`lower_case`, `strip_accents`, `split_cjk`) of a TokenizerSpec.

  Example:
    >>> words = BasicTokenizer(TokenizerSpec()).split(["Héllo,  世界"])
    >>> words.strings.numpy().tolist()
    [b'hello', b',', b'\\xe4\\xb8\\x96', b'\\xe7\\x95\\x8c']
  """

  def __init__(self, spec: TokenizerSpec, name=None):
    super().__init__(name=name)
    tables = char_tables(spec)
    self._class_starts = tf.constant(tables.class_starts)
    self._class_values = tf.constant(tables.class_values)
    self._punct_starts = tf.constant(tables.punct_starts)
    self._punct_values = tf.constant(tables.punct_values)
    self._mapped_keys = tf.constant(tables.mapped_keys)
    self._mapped_splits = tf.constant(tables.mapped_splits)
    self._mapped = tf.RaggedTensor.from_row_splits(
        tf.constant(tables.mapped_values), self._mapped_splits)

  def _normalize(self, texts: tf.Tensor):
    """Flat normalized code points [N] with their batch row and original byte span."""
    cps, starts = tf.strings.unicode_decode_with_offsets(texts, "UTF-8", errors="replace")
    flat_cps, flat_starts = cps.flat_values, starts.flat_values
    char_class = _lookup_runs(self._class_starts, self._class_values, flat_cps)
    # Changed characters: found by binary search in the sorted keys.
    num_keys = tf.size(self._mapped_keys)
    position = tf.searchsorted(self._mapped_keys, flat_cps)
    safe = tf.minimum(position, num_keys - 1)
    found = (position < num_keys) & tf.equal(tf.gather(self._mapped_keys, safe), flat_cps)
    map_start = tf.gather(self._mapped_splits, safe)
    core = tf.where(found, tf.gather(self._mapped_splits, safe + 1) - map_start, 1)
    is_cjk = tf.equal(char_class, _CJK)
    length = tf.where(tf.equal(char_class, _DELETE), tf.zeros_like(core),
                      core + 2 * tf.cast(is_cjk, core.dtype))
    # Character i becomes length[i] output characters; k is each one's place among them.
    origin = tf.repeat(tf.range(tf.size(flat_cps, out_type=tf.int64)), length)
    k = tf.range(tf.size(origin, out_type=tf.int64)) - tf.gather(
        tf.cumsum(length, exclusive=True), origin)
    o_cjk = tf.gather(is_cjk, origin)
    inner = k - tf.cast(o_cjk, tf.int64)
    padding = o_cjk & ((k == 0) | (k == tf.gather(length, origin) - 1))
    mapped = tf.gather(self._mapped.values,
                       tf.clip_by_value(tf.gather(map_start, origin) + inner, 0,
                                        tf.size(self._mapped.values, out_type=tf.int64) - 1))
    out = tf.where(padding, _SPACE,
                   tf.where(tf.gather(found, origin), mapped, tf.gather(flat_cps, origin)))
    flat_ends = flat_starts + utf8_width(flat_cps)
    return (out, tf.gather(cps.value_rowids(), origin), tf.gather(flat_starts, origin),
            tf.gather(flat_ends, origin), cps.nrows())

  def split(self, texts: tf.Tensor | list[str]) -> Words:
    """Words of each string in `texts` [B] (see `Words`)."""
    texts = tf.convert_to_tensor(texts, tf.string)
    cps, rows, starts, ends, nrows = self._normalize(texts)
    is_space = tf.equal(cps, _SPACE)
    punct = tf.cast(_lookup_runs(self._punct_starts, self._punct_values, cps), tf.bool)
    new_row = tf.concat([[True], rows[1:] != rows[:-1]], axis=0)
    previous_ends_word = tf.concat([[True], tf.logical_or(is_space, punct)[:-1]], axis=0)
    begins = tf.logical_and(~is_space, punct | new_row | previous_ends_word)
    keep = tf.where(~is_space)[:, 0]
    word_ids = tf.cumsum(tf.cast(tf.gather(begins, keep), tf.int64)) - 1
    chars = tf.RaggedTensor.from_value_rowids(tf.gather(cps, keep), word_ids)
    first = chars.row_splits[:-1]
    return Words(strings=tf.strings.unicode_encode(chars, "UTF-8"),
                 row_ids=tf.gather(tf.gather(rows, keep), first), nrows=nrows,
                 chars=chars, char_starts=tf.gather(starts, keep),
                 char_ends=tf.gather(ends, keep))
