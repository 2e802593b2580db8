"""Word-to-piece alignment and windowing: labels on first pieces only, long sentences split
into windows and rejoined so that every word gets exactly one prediction."""

import random
import types

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.tasks.tagging_features import (
  LABEL_IDS,
  LABEL_WEIGHTS,
  encode_windows,
  window_spans,
  word_pieces,
)

CLS, SEP, UNK = 101, 102, 100


class _PieceTokenizer:
  """Splits a word into pieces of two characters (id = 1000 + code point of the first);
  a word of control characters has no pieces, as BERT's tokenizer drops them."""

  vocab = types.SimpleNamespace(cls_id=CLS, sep_id=SEP, pad_id=0, unk_id=UNK)

  def tokenize(self, words):
    return tf.ragged.constant(
        [[1000 + ord(w[i]) for i in range(0, len(w), 2)] if w.isprintable() else []
         for w in words], dtype=tf.int32, ragged_rank=1)


@pytest.mark.parametrize("n,budget,stride", [(1, 6, 3), (6, 6, 3), (7, 6, 3), (20, 6, 4),
                                             (13, 6, 6), (9, 6, 1)])
def test_windows_cover_every_piece(n, budget, stride):
  spans = window_spans(n, budget, stride)
  assert spans[0][0] == 0 and spans[-1][1] == n
  assert all(0 < end - start <= budget for start, end in spans)
  assert all(b[0] - a[0] == stride for a, b in zip(spans, spans[1:]))


def test_word_pieces_keep_every_word():
  pieces = word_pieces([["Ann", "\x07", "xy"], ["longword"]], _PieceTokenizer())
  assert pieces == [[[1065, 1110], [UNK], [1120]], [[1108, 1110, 1119, 1114]]]


def test_labels_sit_on_first_pieces_of_a_short_sentence():
  windows = encode_windows([[[5, 6], [7], [8, 9, 10]]], [[1, 2, 3]], max_seq_length=10,
                           stride=4, cls_id=CLS, sep_id=SEP)
  f = windows.features
  assert f["input_ids"][0].tolist() == [CLS, 5, 6, 7, 8, 9, 10, SEP, 0, 0]
  assert f["input_mask"][0].tolist() == [1] * 8 + [0] * 2
  assert f[LABEL_IDS][0].tolist() == [0, 1, 0, 2, 3, 0, 0, 0, 0, 0]
  assert f[LABEL_WEIGHTS][0].tolist() == [0, 1, 0, 1, 1, 0, 0, 0, 0, 0]
  assert windows.reads == [[(0, 1), (0, 3), (0, 4)]]


def test_long_sentences_give_every_word_one_read_with_the_most_context():
  rng = random.Random(3)
  sentences = [[[rng.randrange(1000, 2000) for _ in range(rng.randint(1, 3))]
                for _ in range(rng.randint(1, 30))] for _ in range(40)]
  labels = [[rng.randrange(5) for _ in s] for s in sentences]
  windows = encode_windows(sentences, labels, max_seq_length=12, stride=4, cls_id=CLS,
                           sep_id=SEP)
  f = windows.features
  assert len(windows) > len(sentences)  # some sentences needed several windows
  for s, (words, reads) in enumerate(zip(sentences, windows.reads)):
    assert len(reads) == len(words)  # exactly one read per word
    for w, (window, position) in enumerate(reads):
      assert windows.sentence_of[window] == s
      assert f["input_ids"][window, position] == words[w][0]  # its first piece
      assert f[LABEL_WEIGHTS][window, position] == 1.0
      assert f[LABEL_IDS][window, position] == labels[s][w]
      # Read from the window where its shorter side of context is longest.
      offset = sum(len(x) for x in words[:w])
      spans = window_spans(sum(len(x) for x in words), 10, 4)
      first_window = int(np.nonzero(windows.sentence_of == s)[0][0])
      scores = [min(offset - a, b - 1 - offset) + 0.01 * (b - a) if a <= offset < b else -1
                for a, b in spans]
      assert window - first_window == int(np.argmax(scores))
  # Predictions read back per word, in order.
  per_position = np.arange(f["input_ids"].size).reshape(f["input_ids"].shape)
  gathered = windows.gather(per_position)
  assert [len(g) for g in gathered] == [len(s) for s in sentences]


def test_bad_strides_are_refused():
  with pytest.raises(ValueError, match="stride 11"):
    encode_windows([[[1]]], None, max_seq_length=12, stride=11, cls_id=CLS, sep_id=SEP)
