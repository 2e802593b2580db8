"""SQuAD reading and windowing: character offsets through tf.text's byte offsets, answers
mapped to tokens and back, windows and max context, malformed files, the feature cache."""

import json

import numpy as np
import pytest

from electra_tf.data import builtin
from electra_tf.data.tokenizer import WordPieceTokenizer
from electra_tf.data.tokenizer_spec import TokenizerSpec
from electra_tf.data.vocab import builtin_vocab_path, load_vocab
from electra_tf.tasks import squad_cache, squad_data
from electra_tf.tasks.squad_data import SquadExample, SquadFormatError


@pytest.fixture(scope="module")
def tokenizer():
  return WordPieceTokenizer(builtin_vocab_path())


def _example(context, answer, question="What is it?", qid="q1"):
  return SquadExample(qid, question, context, (answer,), context.index(answer), False)


def _answer_text(example, feature):
  return example.context[feature.token_char_starts[feature.start_position]:
                         feature.token_char_ends[feature.end_position]]


def test_char_offsets_from_utf8_bytes():
  text = "né à 東京"
  byte_starts = [0, 4, 7, 10]  # n, à, 東, 京 as UTF-8 byte offsets
  np.testing.assert_array_equal(squad_data.char_offsets(text, byte_starts), [0, 3, 5, 6])


@pytest.mark.parametrize("context,answer", [
    ("The café opened in Zürich in 1998.", "Zürich"),
    ("Tokyo (東京) is the capital of Japan.", "東京"),
    ("It cost $5,000 -- roughly; (or so)!", "$5,000"),
    ("Runs  of   spaces\tand\ttabs\nand newlines  end here.", "tabs\nand newlines"),
    ("Crème brûlée is a dessert.", "Crème brûlée"),
])
def test_answer_maps_to_tokens_and_back(tokenizer, context, answer):
  example = _example(context, answer)
  [feature] = squad_data.convert_examples([example], tokenizer, max_seq_length=64,
                                          doc_stride=16, max_query_length=16, is_training=True)
  assert not feature.is_impossible
  assert _answer_text(example, feature) == answer
  # [CLS] question [SEP] context [SEP]: question and specials have no context offsets.
  assert feature.token_char_starts[0] == -1 and feature.segment_ids[0] == 0
  first = feature.segment_ids.index(1)
  assert feature.input_ids[first - 1] == tokenizer.vocab.sep_id
  assert feature.token_char_starts[first] == 0


def test_sentencepiece_answers_map_to_their_words(tmp_path):
  from electra_tf.data import builtin
  from electra_tf.data.tokenizer import make_tokenizer
  from electra_tf.data.vocab_learning import learn_vocab

  files = builtin.builtin_corpus(str(tmp_path / "cache"), max_articles=2)
  vocab = learn_vocab(files, 600, TokenizerSpec.create("sentencepiece", False),
                      output_path=str(tmp_path / "spm.model"))
  tokenizer = make_tokenizer(vocab)
  for context, answer in [("The café opened in  Zürich in 1998.", "Zürich"),
                          ("It cost $5,000 -- roughly; (or so)!", "$5,000"),
                          ("Crème brûlée is a dessert.", "Crème brûlée")]:
    example = _example(context, answer)
    [feature] = squad_data.convert_examples([example], tokenizer, max_seq_length=64,
                                            doc_stride=16, max_query_length=16,
                                            is_training=True)
    # A word-initial piece ("▁Z") starts at its word, not at the space before it.
    assert _answer_text(example, feature) == answer


def test_answer_split_by_the_stride_picks_the_max_context_window(tokenizer):
  words = [f"w{i}" for i in range(60)]
  context = " ".join(words)
  example = _example(context, "w30 w31")
  features = squad_data.convert_examples([example], tokenizer, max_seq_length=32,
                                         doc_stride=8, max_query_length=8, is_training=True)
  assert len(features) > 3
  holding = [f for f in features if not f.is_impossible]
  assert len(holding) >= 2  # the stride makes windows overlap around the answer
  for f in holding:
    assert _answer_text(example, f) == "w30 w31"
  # Each context token is the max-context token of exactly one window.
  owners = {}
  for f in features:
    for start, is_max in zip(f.token_char_starts, f.token_is_max_context):
      if start >= 0 and is_max:
        assert start not in owners, f"token at char {start} owned twice"
        owners[start] = f.window_index
  token_starts = {s for f in features for s in f.token_char_starts if s >= 0}
  assert set(owners) == token_starts
  # Windows without the answer point at [CLS].
  assert all(f.start_position == f.end_position == 0 for f in features if f.is_impossible)


def test_real_questions_recover_their_gold_answers(tokenizer):
  examples, report = squad_data.read_squad(builtin.squad_path("unittest"), is_training=True)
  assert report.num_questions == 10 and report.num_skipped == 0
  train, _ = squad_data.read_squad(builtin.squad_path("train"), is_training=True)
  examples += train[:300]
  features = squad_data.convert_examples(examples, tokenizer, max_seq_length=128,
                                         doc_stride=64, max_query_length=32, is_training=True)
  found = {}
  for f in features:
    if not f.is_impossible:
      found.setdefault(f.example_index, _answer_text(examples[f.example_index], f))
  exact = sum(found.get(i) == e.answers[0] for i, e in enumerate(examples))
  # A few answers are parts of a word piece ("six" in "sixth") and cannot be exact.
  assert exact >= 0.98 * len(examples), exact
  assert len(found) == len(examples)


@pytest.mark.parametrize("mutate,needle", [
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0].pop("question"), "no 'question'"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0].update(answers="x"), "must be list"),
    (lambda d: d["data"][0]["paragraphs"][0].update(context=7), "must be str"),
])
def test_malformed_json_names_the_question(tmp_path, mutate, needle):
  data = json.load(open(builtin.squad_path("unittest")))
  qid = data["data"][0]["paragraphs"][0]["qas"][0]["id"]
  mutate(data)
  path = tmp_path / "bad.json"
  path.write_text(json.dumps(data))
  with pytest.raises(SquadFormatError) as err:
    squad_data.read_squad(str(path), is_training=True)
  assert needle in str(err.value)
  if "context" not in needle and "str" not in needle:
    assert qid in str(err.value)
  path.write_text("{not json")
  with pytest.raises(SquadFormatError, match="not valid JSON"):
    squad_data.read_squad(str(path), is_training=True)


def test_answer_not_at_offset_is_skipped_and_counted(tmp_path):
  data = json.load(open(builtin.squad_path("unittest")))
  qa = data["data"][0]["paragraphs"][0]["qas"][0]
  qa["answers"][0]["answer_start"] += 3
  path = tmp_path / "shifted.json"
  path.write_text(json.dumps(data))
  examples, report = squad_data.read_squad(str(path), is_training=True)
  assert report.num_skipped == 1 and report.skipped_ids == [qa["id"]]
  assert len(examples) == 9
  # Evaluation keeps every question: offsets are not used to score.
  examples, _ = squad_data.read_squad(str(path), is_training=False)
  assert len(examples) == 10


def test_unanswerable_questions_from_other_paragraphs():
  train, _ = squad_data.read_squad(builtin.squad_path("train"), is_training=True)
  made = squad_data.make_unanswerable(train[:200], fraction=0.5, seed=0)
  impossible = [e for e in made if e.is_impossible]
  assert 60 < len(impossible) < 140
  originals = {e.qas_id: e for e in train[:200]}
  for e in impossible:
    source = originals[e.qas_id.replace("-unanswerable", "")]
    assert e.context != source.context and e.title == source.title
  assert made == squad_data.make_unanswerable(train[:200], fraction=0.5, seed=0)


def test_feature_cache_round_trip_and_rebuild(tmp_path, tokenizer):
  import tensorflow as tf

  examples, _ = squad_data.read_squad(builtin.squad_path("unittest"), is_training=True)
  sizes = dict(max_seq_length=96, doc_stride=32, max_query_length=16, is_training=True)
  features, path = squad_cache.cached_features(examples, tokenizer, str(tmp_path), **sizes)
  again, path2 = squad_cache.cached_features(examples, tokenizer, str(tmp_path), **sizes)
  assert path2 == path and again[0].input_ids is None  # read from the cache
  assert [f.token_char_starts for f in again] == [f.token_char_starts for f in features]
  records = list(squad_cache.load_features_dataset(path, max_seq_length=96, is_training=True))
  assert len(records) == len(features)
  for record, f in zip(records, features):
    assert record["input_ids"].numpy().tolist() == f.input_ids
    assert int(record["start_positions"]) == f.start_position
    assert record["input_ids"].dtype == tf.int32
  other = WordPieceTokenizer(load_vocab(builtin_vocab_path(),
                                        spec=TokenizerSpec.create(lower_case=False)))
  _, path3 = squad_cache.cached_features(examples, other, str(tmp_path), **sizes)
  assert path3 != path
