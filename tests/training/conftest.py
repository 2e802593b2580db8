"""Fixtures of the training tests."""

import pytest


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
  """The built-in corpus (4 articles) as 3 shards of length-64 records."""
  from electra_tf.data import builtin, pretraining_data, vocab

  corpus = builtin.builtin_corpus(str(tmp_path_factory.mktemp("cache")), max_articles=4)
  out = str(tmp_path_factory.mktemp("d64") / "data")
  pretraining_data.build_pretraining_data(corpus, vocab.builtin_vocab_path(), out,
                                          max_seq_length=64, num_workers=1, min_shards=3,
                                          show_progress=False)
  return out
