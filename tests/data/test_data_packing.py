"""Packing rules: layout, lengths, document boundaries, 10% single / 5% short targets."""

import random

import pytest

from electra_tf.data.packing import ExampleBuilder, pack_documents

CLS, SEP = 101, 102
L = 128


def _documents(num_documents, seed=0, sentence_len=(3, 30), sentences=(5, 60)):
  """Document d's tokens are 10000*(d+1) + position: each token names its document."""
  rng = random.Random(seed)
  documents = []
  for d in range(num_documents):
    doc, next_id = [], 10000 * (d + 1) + 200  # > SEP: never confused with a special id
    for _ in range(rng.randint(*sentences)):
      n = rng.randint(*sentence_len)
      doc.append(list(range(next_id, next_id + n)))
      next_id += n
    documents.append(doc)
  return documents


def _split(input_ids, segment_ids):
  """Checks the [CLS] A [SEP] (B [SEP]) layout; returns the two segments."""
  assert input_ids[0] == CLS and input_ids[-1] == SEP
  assert segment_ids == sorted(segment_ids), "segment ids must be 0s then 1s"
  first_end = segment_ids.index(1) - 1 if 1 in segment_ids else len(input_ids) - 1
  assert input_ids[first_end] == SEP
  a, b = input_ids[1:first_end], input_ids[first_end + 1:-1]
  assert a and CLS not in a + b and SEP not in a + b
  assert (len(b) > 0) == (1 in segment_ids)
  return a, b


@pytest.fixture(scope="module")
def packed():
  documents = _documents(300)
  examples = list(pack_documents(documents, L, CLS, SEP, seed=3))
  return documents, examples


def test_layout_and_lengths(packed):
  _, examples = packed
  assert len(examples) > 1000
  for input_ids, segment_ids in examples:
    assert len(input_ids) == len(segment_ids) <= L
    _split(input_ids, segment_ids)


def test_no_example_crosses_a_document_and_no_token_is_lost(packed):
  documents, examples = packed
  stream = []
  for input_ids, segment_ids in examples:
    a, b = _split(input_ids, segment_ids)
    owners = {t // 10000 for t in a + b}
    assert len(owners) == 1, f"example mixes documents {owners}"
    stream += a + b
  # Tail carry-over keeps every token, in order.
  assert stream == [t for doc in documents for sentence in doc for t in sentence]


def test_single_segment_and_short_target_rates(packed):
  documents, examples = packed
  # Only full examples: a document's last example is short and often one segment anyway.
  last_of_doc = {i for i in range(len(examples) - 1)
                 if examples[i][0][1] // 10000 != examples[i + 1][0][1] // 10000}
  full = [ex for i, ex in enumerate(examples) if i not in last_of_doc][:-1]
  single = sum(1 not in segment_ids for _, segment_ids in full) / len(full)
  assert 0.07 < single < 0.14, single
  # 5% draw a target uniform in [5, L]; about 80% of those land well below L.
  short = sum(len(input_ids) < L - 35 for input_ids, _ in full) / len(full)
  assert 0.02 < short < 0.065, short
  two_segment = [ex for ex in full if 1 in ex[1]]
  assert sum(len(ids) == L for ids, _ in two_segment) / len(two_segment) > 0.8


def test_segment_a_targets_half_the_length():
  documents = _documents(100, sentence_len=(4, 4), sentences=(200, 200))
  lengths = [len(_split(*ex)[0]) for ex in pack_documents(documents, L, CLS, SEP, seed=1)
             if 1 in ex[1] and len(ex[0]) == L]
  half = (L - 3) // 2
  # A takes whole 4-token sentences up to the half mark, sometimes one beyond it.
  assert all(half - 4 <= n <= half + 4 for n in lengths)
  assert {n for n in lengths if n > half} and {n for n in lengths if n <= half}


def test_long_sentence_fills_consecutive_full_examples():
  builder = ExampleBuilder(16, CLS, SEP, random.Random(0))
  examples = builder.add_sentence(list(range(200, 1200))) + builder.end_document()
  assert sum(len(ids) - (3 if 1 in seg else 2) for ids, seg in examples) == 1000
  assert all(len(ids) <= 16 for ids, _ in examples)
  assert builder.documents == 1


def test_same_seed_same_examples_other_seed_differs():
  documents = _documents(30)
  assert list(pack_documents(documents, L, CLS, SEP, seed=5)) == \
      list(pack_documents(documents, L, CLS, SEP, seed=5))
  assert list(pack_documents(documents, L, CLS, SEP, seed=5)) != \
      list(pack_documents(documents, L, CLS, SEP, seed=6))


def test_empty_sentences_and_documents_make_nothing():
  builder = ExampleBuilder(16, CLS, SEP, random.Random(0))
  assert builder.add_sentence([]) == [] and builder.end_document() == []
  assert builder.documents == 0
