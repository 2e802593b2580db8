"""WordPiece tokenizer: BERT-uncased normalization, word pieces, offsets, use in tf.data."""

import dataclasses

import pytest
import tensorflow as tf

from electra_tf.data.tokenizer import WordPieceTokenizer
from electra_tf.data.tokenizer_spec import TokenizerSpec


@pytest.fixture(scope="module")
def uncased(bert_vocab):
  return WordPieceTokenizer(bert_vocab)


def _with_spec(vocab, **settings):
  return dataclasses.replace(vocab, spec=TokenizerSpec.create(**settings))


def test_lower_cases_and_strips_accents(uncased):
  plain, accented = uncased.tokenize(["hello world cafe naive", "HÉLLO Wörld CAFÉ naïve"])
  assert plain.numpy().tolist() == accented.numpy().tolist()
  assert uncased.ids_to_tokens(plain.numpy().tolist()) == ["hello", "world", "cafe", "naive"]


def test_cased_keeps_case_and_accents(bert_vocab):
  cased = WordPieceTokenizer(_with_spec(bert_vocab, lower_case=False))
  ids = cased.tokenize(["Hello hello"]).to_list()[0]
  # The uncased vocab has no "Hello": the cased tokenizer must not fold it to "hello".
  assert ids == [bert_vocab.unk_id, bert_vocab.tokens.index("hello")]


def test_splits_into_word_pieces_and_punctuation(uncased):
  ids = uncased.tokenize(["unaffable, isn't it?"]).to_list()[0]
  assert uncased.ids_to_tokens(ids) == ["una", "##ffa", "##ble", ",", "isn", "'", "t", "it", "?"]


def test_offsets_point_into_the_original_text(uncased):
  text = "Héllo, Wörld!"
  ids, starts, ends = uncased.tokenize_with_offsets([text])
  raw = text.encode("utf-8")
  pieces = [raw[s:e].decode() for s, e in zip(starts.to_list()[0], ends.to_list()[0],
                                               strict=True)]
  assert pieces == ["Héllo", ",", "Wörld", "!"]
  assert uncased.ids_to_tokens(ids.to_list()[0]) == ["hello", ",", "world", "!"]


def test_works_in_tf_data_and_tf_function(uncased):
  dataset = tf.data.Dataset.from_tensor_slices(["a b", "hello there friend"]).batch(2)
  batch = next(iter(dataset.map(uncased.tokenize)))
  assert batch.dtype == tf.int32
  assert batch.row_lengths().numpy().tolist() == [2, 3]
  fn = tf.function(uncased.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
  assert fn(tf.constant(["a b"])).to_list() == batch[:1].to_list()


def test_detokenize_round_trips_normalized_words(uncased):
  ids = uncased.tokenize(["Unaffable Héllo"])
  assert uncased.detokenize(ids).numpy().tolist() == [b"unaffable hello"]
