"""Token-tagging data: CoNLL-style column files and JSON lines, read with checks that name the
file and line of what is wrong, the tag scheme, and predictions written back in the same form.

A CoNLL file has one word a line with its columns split by whitespace, a blank line between
sentences, `-DOCSTART-` lines skipped. A .jsonl file has one `{"tokens": [...], "tags":
[...]}` object a line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Sequence

from electra_tf import fileio
from electra_tf.tasks.tables import DataFormatError
from electra_tf.tasks.tagging_metrics import ALLOWED_PREFIXES, OUTSIDE, SCHEMES

NO_SCHEME = "none"  # plain tags (part of speech): token accuracy, no entities
TAG_SCHEMES = (*SCHEMES, NO_SCHEME)
_CHUNK_TAG = re.compile(r"^([A-Z])-(.+)$")
DOCSTART = "-DOCSTART-"


@dataclasses.dataclass(frozen=True)
class Sentence:
  """One sentence of a tagging file.

  Args:
    words: the words (tokens), as the file splits them.
    tags: one tag per word.
    lines: the 1-based line of each word in its file (of the sentence, for JSON lines).
    source: the sentence as written: its CoNLL lines, or its JSON object, for writing
      predictions back.
  """

  words: tuple[str, ...]
  tags: tuple[str, ...]
  lines: tuple[int, ...]
  source: tuple[str, ...] | dict


def _read_text(path: str) -> str:
  fileio.check_path(path)
  if not fileio.isfile(path):
    raise DataFormatError(f"{path} does not exist" + (" (it is a directory)"
                                                       if fileio.isdir(path) else ""))
  raw = fileio.read_bytes(path)
  if b"\0" in raw:
    line = raw.count(b"\n", 0, raw.index(b"\0")) + 1
    raise DataFormatError(f"{path} line {line} holds a NUL byte; give UTF-8 text")
  try:
    return raw.decode("utf-8-sig")
  except UnicodeDecodeError as exc:
    line = raw.count(b"\n", 0, exc.start) + 1
    raise DataFormatError(f"{path} line {line} is not UTF-8; convert the file, e.g. with "
                          f"iconv -t UTF-8") from exc


def read_conll(path: str, tag_column: int = -1, token_column: int = 0,
               same_columns: bool = True) -> list[Sentence]:
  """Sentences of a CoNLL-style file.

  Args:
    path: the file.
    tag_column, token_column: 0-based columns (negative counts from the end).
    same_columns: refuse a line whose column count differs from the file's first line.
  """
  sentences, current, width = [], [], None

  def close():
    if current:
      words, tags, lines, raws = zip(*current)
      sentences.append(Sentence(words, tags, lines, raws))
      current.clear()

  for number, line in enumerate(_read_text(path).split("\n"), 1):
    line = line.rstrip("\r")
    fields = line.split()
    if not fields or fields[0] == DOCSTART:
      close()
      continue
    if len(fields) < 2 or not all(-len(fields) <= c < len(fields)
                                  for c in (tag_column, token_column)):
      raise DataFormatError(f"{path} line {number} has {len(fields)} column(s) but a word "
                            f"needs its token and --tag_column={tag_column}: {line.strip()!r}")
    if same_columns and width is not None and len(fields) != width:
      raise DataFormatError(f"{path} line {number} has {len(fields)} columns but the file's "
                            f"first line has {width}: {line.strip()!r}")
    width = width or len(fields)
    current.append((fields[token_column], fields[tag_column], number, line))
  close()
  return sentences


def read_jsonl(path: str) -> list[Sentence]:
  """Sentences of a JSON-lines file of {"tokens": [...], "tags": [...]} objects."""
  sentences = []
  for number, line in enumerate(_read_text(path).split("\n"), 1):
    if not line.strip():
      continue
    where = f"{path} line {number}"
    try:
      row = json.loads(line)
    except json.JSONDecodeError as exc:
      raise DataFormatError(f"{where} is not JSON: {exc.msg}") from exc
    if not isinstance(row, dict) or not {"tokens", "tags"} <= set(row):
      raise DataFormatError(f"{where} is not an object with \"tokens\" and \"tags\"")
    words, tags = row["tokens"], row["tags"]
    for name, values in (("tokens", words), ("tags", tags)):
      if not (isinstance(values, list) and all(isinstance(v, str) for v in values)):
        raise DataFormatError(f"{where}: \"{name}\" must be a list of strings")
    if len(words) != len(tags):
      raise DataFormatError(f"{where} has {len(words)} tokens but {len(tags)} tags")
    if not words:
      raise DataFormatError(f"{where} is a sentence with no tokens; drop the line")
    sentences.append(Sentence(tuple(words), tuple(tags), (number,) * len(words), row))
  return sentences


def is_jsonl(path: str) -> bool:
  return os.path.splitext(path)[1].lower() in (".jsonl", ".json")


def read_tagging_file(path: str, tag_column: int = -1) -> list[Sentence]:
  """A .jsonl/.json file as JSON lines, anything else as CoNLL columns; never empty."""
  sentences = read_jsonl(path) if is_jsonl(path) else read_conll(path, tag_column)
  if not sentences:
    raise DataFormatError(f"{path} holds no sentences")
  return sentences


def _where(path: str, sentence: Sentence, index: int) -> str:
  return f"{path} line {sentence.lines[index]}"


def detect_scheme(sentences: Sequence[Sentence], path: str) -> str:
  """iob1, iob2 or bioes from the prefixes the tags use, or "none" for plain tags.

  IOB2 opens every chunk with B-; IOB1 opens a chunk with I- and keeps B- for a chunk right
  after one of its type; BIOES also has E- and S-. Tags of which some carry a chunk prefix
  and others not are refused (pass --tag_scheme=none to read them as plain tags).
  """
  prefixed = unprefixed = None
  for sentence in sentences:
    for i, tag in enumerate(sentence.tags):
      if tag == OUTSIDE:
        continue
      match = _CHUNK_TAG.match(tag)
      if match and match.group(1) in "BIES":
        prefixed = prefixed or (sentence, i)
      else:
        unprefixed = unprefixed or (sentence, i)
  if prefixed is None:
    return NO_SCHEME
  if unprefixed is not None:
    sentence, i = unprefixed
    raise DataFormatError(f"{_where(path, sentence, i)}: tag {sentence.tags[i]!r} has no "
                          f"B-/I-/E-/S- prefix while other tags do; fix it, or pass "
                          f"--tag_scheme=none to read all tags as plain labels")
  tags = {t[0] for s in sentences for t in s.tags if t != OUTSIDE}
  if tags & {"E", "S"}:
    return "bioes"
  for sentence in sentences:
    for i, tag in enumerate(sentence.tags):
      if tag[0] == "I" and (i == 0 or sentence.tags[i - 1][2:] != tag[2:]):
        return "iob1"
  return "iob2"


def _open_type(tag: str) -> str | None:
  """The type a B-/I- tag leaves open for the next word (BIOES), else None."""
  return tag[2:] if tag[:1] in ("B", "I") and tag != OUTSIDE else None


def check_tags(sentences: Sequence[Sentence], scheme: str, path: str,
               labels: Sequence[str] | None = None) -> None:
  """Refuses tags outside `labels` or `scheme`, naming the file and line.

  IOB2 wants each I-X after B-X or I-X; BIOES also wants I-X/E-X after B-X/I-X and every
  B-/I- chunk closed by E-.
  """
  known = set(labels) if labels is not None else None
  for sentence in sentences:
    prev = OUTSIDE
    for i, tag in enumerate(sentence.tags):
      where = _where(path, sentence, i)
      if known is not None and tag not in known:
        raise DataFormatError(f"{where}: tag {tag!r} is not among the training file's "
                              f"{len(known)} tags; fix the tag or add examples of it to "
                              f"the training file")
      if scheme == NO_SCHEME:
        continue
      match = _CHUNK_TAG.match(tag)
      if tag != OUTSIDE and not (match and match.group(1) in ALLOWED_PREFIXES[scheme]):
        raise DataFormatError(f"{where}: tag {tag!r} is not {scheme.upper()} (O or "
                              f"{'/'.join(ALLOWED_PREFIXES[scheme].replace('O', ''))}-<type>)"
                              f"; fix it or pass --tag_scheme")
      follows = prev != OUTSIDE and prev[0] in "BI" and prev[2:] == tag[2:]
      if scheme == "iob2" and tag[0] == "I" and tag != OUTSIDE and not follows:
        raise DataFormatError(f"{where}: {tag!r} follows {prev!r}; in IOB2 an I- tag "
                              f"continues a B- or I- of its type (the file may be IOB1: "
                              f"pass --tag_scheme=iob1)")
      if scheme == "bioes":
        if tag[0] in "IE" and tag != OUTSIDE and not follows:
          raise DataFormatError(f"{where}: {tag!r} follows {prev!r}; in BIOES it continues "
                                f"a B- or I- of its type")
        if _open_type(prev) is not None and not (tag[0] in "IE" and follows):
          raise DataFormatError(f"{where}: {tag!r} follows {prev!r}, which BIOES closes "
                                f"with E-{prev[2:]}")
      prev = tag
    if scheme == "bioes" and _open_type(prev) is not None:
      raise DataFormatError(f"{_where(path, sentence, len(sentence.tags) - 1)}: the "
                            f"sentence ends inside a chunk ({prev!r}); BIOES closes it "
                            f"with E-")


def label_list(sentences: Sequence[Sentence]) -> tuple[str, ...]:
  """The distinct tags, sorted (the label index order of the model's output)."""
  return tuple(sorted({t for s in sentences for t in s.tags}))


def format_predictions(sentences: Sequence[Sentence], predicted: Sequence[Sequence[str]],
                       jsonl: bool) -> str:
  """The sentences as they were read, with the predicted tags: a last column of each CoNLL
  line (blank lines between sentences), or "predicted_tags" in each JSON object."""
  if jsonl:
    return "".join(json.dumps({**s.source, "predicted_tags": list(p)}, ensure_ascii=False)
                   + "\n" for s, p in zip(sentences, predicted))
  blocks = []
  for sentence, tags in zip(sentences, predicted):
    blocks.append("".join(f"{line}{chr(9) if chr(9) in line else ' '}{tag}\n"
                          for line, tag in zip(sentence.source, tags)))
  return "\n".join(blocks)
