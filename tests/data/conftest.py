"""Fixtures for the data tests: a toy vocab whose words name their document, tiny corpora."""

from __future__ import annotations

import os

import pytest
from toy_data import NUM_DOCUMENTS, WORDS_PER_DOCUMENT, doc_word, write_corpus

from electra_tf.data.vocab import SPECIAL_TOKENS, builtin_vocab_path, load_vocab


@pytest.fixture(scope="session")
def toy_vocab_path(tmp_path_factory) -> str:
  path = tmp_path_factory.mktemp("vocab") / "toy_vocab.txt"
  words = [doc_word(d, k) for d in range(NUM_DOCUMENTS * 2) for k in range(WORDS_PER_DOCUMENT)]
  path.write_text("".join(f"{t}\n" for t in (*SPECIAL_TOKENS, *words)), encoding="utf-8")
  return str(path)


@pytest.fixture(scope="session")
def toy_vocab(toy_vocab_path):
  return load_vocab(toy_vocab_path)


@pytest.fixture(scope="session")
def bert_vocab():
  return load_vocab(builtin_vocab_path())


@pytest.fixture(scope="session")
def toy_corpus(tmp_path_factory) -> str:
  """Two files of toy documents; returns their glob."""
  directory = tmp_path_factory.mktemp("toy_corpus")
  write_corpus(os.path.join(directory, "a.txt"), seed=1)
  write_corpus(os.path.join(directory, "b.txt"), seed=2, num_documents=NUM_DOCUMENTS // 2)
  return os.path.join(directory, "*.txt")


@pytest.fixture(scope="session")
def squad_data(tmp_path_factory, bert_vocab) -> str:
  """Pretraining data (L=128) from the first 15 SQuAD train articles, two shards."""
  from electra_tf.data import builtin, pretraining_data

  root = tmp_path_factory.mktemp("squad")
  files = builtin.builtin_corpus(str(root / "cache"), max_articles=15)
  out = str(root / "data")
  pretraining_data.build_pretraining_data(files, bert_vocab, out, max_seq_length=128,
                                          num_workers=1, min_shards=2, show_progress=False)
  return out
