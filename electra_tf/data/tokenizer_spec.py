"""TokenizerSpec: how text becomes ids with a vocab, written beside the vocab and read with it."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import unicodedata
from collections.abc import Iterable
from typing import Any

from electra_tf import fileio
from electra_tf.errors import UserError, check_field_types

WORDPIECE, SENTENCEPIECE = "wordpiece", "sentencepiece"
KINDS = (WORDPIECE, SENTENCEPIECE)
SPEC_SUFFIX = ".tokenizer.json"  # vocab.txt -> vocab.tokenizer.json, spm.model -> spm.tok...
_FORMAT = "electra_tf.tokenizer.v1"
# Scripts whose letters carry accents that uncased BERT strips as its authors meant it to.
_ACCENT_SCRIPTS = ("LATIN", "GREEK", "CYRILLIC")


@dataclasses.dataclass(frozen=True)
class TokenizerSpec:
  """How raw text is normalized and split before the vocab is applied.

  The settings mean what transformers' BERT tokenizer means by the same names, so that the
  exported `tokenizer_config.json` (`do_lower_case`, `strip_accents`,
  `tokenize_chinese_chars`) makes transformers give our ids.

  Args:
    kind: "wordpiece" (a vocab.txt) or "sentencepiece" (a SentencePiece .model).
    lower_case: lower-case the text first.
    strip_accents: decompose (NFD) and drop non-spacing marks. Decomposition also splits
      Hangul syllables into jamo and drops the voiced marks of kana, so it is off for vocabs
      of those scripts. WordPiece only.
    split_cjk: put spaces around CJK ideographs, so each is a word. WordPiece only.

  Example:
    >>> TokenizerSpec(lower_case=False).describe()
    'wordpiece, lower_case=False, strip_accents=False, split_cjk=True'
  """

  kind: str = WORDPIECE
  lower_case: bool = True
  strip_accents: bool = True
  split_cjk: bool = True

  def __post_init__(self):
    if self.kind not in KINDS:
      raise UserError(f"unknown tokenizer kind {self.kind!r}; use one of {', '.join(KINDS)}")
    if self.kind == SENTENCEPIECE and (self.strip_accents or self.split_cjk):
      # SentencePiece normalizes inside its model; these BERT steps do not apply.
      object.__setattr__(self, "strip_accents", False)
      object.__setattr__(self, "split_cjk", False)

  @classmethod
  def create(cls, kind: str = WORDPIECE, lower_case: bool = True,
             strip_accents: bool | None = None, split_cjk: bool = True) -> TokenizerSpec:
    """A spec where `strip_accents=None` follows `lower_case` (transformers' default)."""
    return cls(kind, lower_case, lower_case if strip_accents is None else strip_accents,
               split_cjk)

  def describe(self) -> str:
    return ", ".join([self.kind] + [f"{k}={v}" for k, v in dataclasses.asdict(self).items()
                                    if k != "kind"])

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, values: Any, where: str) -> TokenizerSpec:
    values = dict(values) if isinstance(values, dict) else values
    check_field_types(cls, values, where)
    values.pop("format", None)
    unknown = sorted(set(values) - {f.name for f in dataclasses.fields(cls)})
    if unknown:
      raise UserError(f"{where}: unknown tokenizer setting {', '.join(unknown)}; valid: "
                      f"{', '.join(f.name for f in dataclasses.fields(cls))}")
    return cls(**values)

  def check_same(self, other: TokenizerSpec, mine: str, theirs: str) -> None:
    """Raises a UserError naming both settings when `other` tokenizes differently."""
    if self != other:
      raise UserError(f"{mine} tokenizes with ({self.describe()}) but {theirs} with "
                      f"({other.describe()}); use matching settings or rebuild one of them")

  def hf_settings(self) -> dict[str, Any]:
    """The `tokenizer_config.json` keys transformers' BERT tokenizers read."""
    return {"do_lower_case": self.lower_case, "strip_accents": self.strip_accents,
            "tokenize_chinese_chars": self.split_cjk}

  @classmethod
  def from_hf_settings(cls, config: dict[str, Any], kind: str = WORDPIECE) -> TokenizerSpec:
    """The spec of a Hugging Face `tokenizer_config.json` (transformers' defaults apply)."""
    lower = bool(config.get("do_lower_case", kind == WORDPIECE))
    strip = config.get("strip_accents")
    return cls.create(kind, lower, None if strip is None else bool(strip),
                      bool(config.get("tokenize_chinese_chars", True)))


def spec_path(vocab_path: str) -> str:
  """Where the spec of the vocab at `vocab_path` lives: beside it, `<stem>.tokenizer.json`."""
  return os.path.splitext(vocab_path)[0] + SPEC_SUFFIX


def write_spec(spec: TokenizerSpec, vocab_path: str) -> str:
  """Writes `spec` beside the vocab at `vocab_path` (atomically); returns its path."""
  from electra_tf.data import io_utils

  path = spec_path(vocab_path)
  io_utils.atomic_write_text(path, json.dumps({"format": _FORMAT, **spec.to_dict()},
                                              indent=2) + "\n")
  return path


def read_spec(vocab_path: str) -> TokenizerSpec | None:
  """The spec written beside `vocab_path`, or None when there is none."""
  path = spec_path(vocab_path)
  if not fileio.isfile(path):
    return None
  try:
    values = json.loads(fileio.read_text(path))
  except (UnicodeDecodeError, json.JSONDecodeError) as e:
    raise UserError(f"{path} is not valid JSON ({e}); delete it to infer the settings "
                    "from the vocab, or write it again") from None
  if not isinstance(values, dict) or values.get("format") != _FORMAT:
    raise UserError(f"{path} is not a tokenizer spec ({_FORMAT})")
  return TokenizerSpec.from_dict(values, path)


def strip_changes(char: str) -> bool:
  """True if accent stripping (NFD, drop non-spacing marks) changes `char`."""
  decomposed = unicodedata.normalize("NFD", char)
  return "".join(c for c in decomposed if unicodedata.category(c) != "Mn") != char


def _is_accent_script(char: str) -> bool:
  return unicodedata.name(char, "").startswith(_ACCENT_SCRIPTS)


def letters_stripping_would_break(chars: Iterable[str]) -> list[str]:
  """The characters outside Latin, Greek and Cyrillic that accent stripping would change
  (Hangul syllables, voiced kana, Indic letters with nukta, ...), sorted."""
  return sorted({c for c in chars if strip_changes(c) and not _is_accent_script(c)})


def infer_from_vocab(tokens: Iterable[str], kind: str = WORDPIECE) -> TokenizerSpec:
  """The settings a vocab without a spec was made with, read from its tokens.

  A vocab that holds upper-case letters (outside bracketed special tokens) is cased. One that
  holds letters accent stripping would change was made without stripping; one that holds
  none keeps BERT uncased's stripping (bert-base-uncased has none of them).
  """
  chars = {c for t in tokens if not (t.startswith("[") and t.endswith("]")) for c in t}
  if kind == SENTENCEPIECE:
    return TokenizerSpec.create(SENTENCEPIECE, lower_case=False)
  cased = any(c.lower() != c for c in chars)
  stripped = not cased and not any(strip_changes(c) for c in chars)
  return TokenizerSpec.create(kind, lower_case=not cased, strip_accents=stripped)


def choose_for_corpus(chars: Iterable[str], lower_case: bool,
                      strip_accents: bool | None, stream=None) -> TokenizerSpec:
  """The WordPiece spec for learning a vocab: `strip_accents=None` follows `lower_case`
  unless the corpus holds letters that stripping would break, which turns it off (said in
  one line on `stream`)."""
  if strip_accents is None and lower_case:
    broken = letters_stripping_would_break(chars)
    if broken:
      sample = "".join(broken[:8])
      print(f"accent stripping off: the corpus holds {len(broken)} letters it would change "
            f"(e.g. {sample}); pass --strip_accents to force it", file=stream or sys.stdout)
      strip_accents = False
  return TokenizerSpec.create(WORDPIECE, lower_case, strip_accents)
