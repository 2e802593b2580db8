"""Words to word-piece windows and back: the first piece of each word carries its label, a
sentence longer than the model's input is split into overlapping windows, and each word's
prediction is read from the window where it has the most context."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from electra_tf import features as F

LABEL_IDS = "label_ids"
LABEL_WEIGHTS = "label_weights"
_TOKENIZE_BATCH = 8192  # words per tokenizer call: bounded memory on large files


def word_pieces(sentences: Sequence[Sequence[str]], tokenizer) -> list[list[list[int]]]:
  """Piece ids of every word, each word tokenized on its own; a word the tokenizer drops
  entirely (only control characters, say) becomes one [UNK], so that it keeps a position.

  Args:
    sentences: the words of each sentence.
    tokenizer: has `tokenize(list of str) -> RaggedTensor [words, (pieces)]` and `vocab`.

  Returns:
    [sentence][word] -> list of piece ids.
  """
  words = [w for sentence in sentences for w in sentence]
  flat: list[list[int]] = []
  for i in range(0, len(words), _TOKENIZE_BATCH):
    flat += tokenizer.tokenize(words[i:i + _TOKENIZE_BATCH]).to_list()
  unk = tokenizer.vocab.unk_id
  out, start = [], 0
  for sentence in sentences:
    out.append([pieces or [unk] for pieces in flat[start:start + len(sentence)]])
    start += len(sentence)
  return out


def window_spans(num_pieces: int, budget: int, stride: int) -> list[tuple[int, int]]:
  """[start, end) piece ranges of at most `budget` pieces, starting `stride` apart, that
  together cover all `num_pieces` (one range for a short sentence)."""
  spans, start = [], 0
  while True:
    end = min(num_pieces, start + budget)
    spans.append((start, end))
    if end == num_pieces:
      return spans
    start += stride


@dataclasses.dataclass
class Windows:
  """Encoded windows of some sentences and where to read each word's prediction.

  Attributes:
    features: int32 [N, L] `input_ids`, `input_mask`, `segment_ids`, `label_ids` (the label
      index at each word's first piece, 0 elsewhere) and float32 [N, L] `label_weights`
      (1 at first pieces, 0 at other pieces, [CLS], [SEP] and padding).
    sentence_of: int [N], the sentence each window comes from.
    reads: [sentence][word] -> (window, position) of the word's prediction.
  """

  features: dict[str, np.ndarray]
  sentence_of: np.ndarray
  reads: list[list[tuple[int, int]]]

  def __len__(self) -> int:
    return len(self.sentence_of)

  def gather(self, per_position: np.ndarray) -> list[np.ndarray]:
    """Per sentence, the values [words, ...] at each word's read position of a
    [N, L, ...] array (predicted label indices, say)."""
    return [np.asarray([per_position[w, p] for w, p in sentence]) for sentence in self.reads]


def encode_windows(pieces: Sequence[Sequence[Sequence[int]]],
                   labels: Sequence[Sequence[int]] | None, max_seq_length: int, stride: int,
                   cls_id: int, sep_id: int, pad_id: int = 0) -> Windows:
  """[CLS] pieces [SEP] windows of every sentence, with the word labels on first pieces.

  A word belongs to each window holding its first piece; it is read from the one where the
  fewer of its left and right neighbouring pieces is largest (SQuAD's "max context" rule).

  Args:
    pieces: [sentence][word] -> piece ids (see word_pieces).
    labels: [sentence][word] -> label index, or None (all 0: prediction only).
    max_seq_length: L, so a window holds L - 2 pieces.
    stride: pieces between the starts of a sentence's windows (1 to L - 2).
  """
  budget = max_seq_length - 2
  if not 1 <= stride <= budget:
    raise ValueError(f"stride {stride} must be in [1, {budget}] for max_seq_length "
                     f"{max_seq_length}")
  rows, sentence_of, reads = [], [], []
  for s, words in enumerate(pieces):
    flat = [p for word in words for p in word]
    firsts = np.cumsum([0] + [len(word) for word in words[:-1]])
    word_labels = labels[s] if labels is not None else [0] * len(words)
    best = [(-1.0, -1, -1)] * len(words)  # (score, window, position)
    for start, end in window_spans(len(flat), budget, stride):
      window = len(rows)
      label_ids = np.zeros(max_seq_length, np.int32)
      weights = np.zeros(max_seq_length, np.float32)
      for w in np.nonzero((firsts >= start) & (firsts < end))[0]:
        position = int(firsts[w]) - start + 1  # after [CLS]
        label_ids[position], weights[position] = word_labels[w], 1.0
        score = min(firsts[w] - start, end - 1 - firsts[w]) + 0.01 * (end - start)
        if score > best[w][0]:
          best[w] = (score, window, position)
      rows.append(([cls_id, *flat[start:end], sep_id], label_ids, weights))
      sentence_of.append(s)
    reads.append([(window, position) for _, window, position in best])
  n = len(rows)
  ids = np.full((n, max_seq_length), pad_id, np.int32)
  mask = np.zeros((n, max_seq_length), np.int32)
  for i, (tokens, _, _) in enumerate(rows):
    ids[i, :len(tokens)] = tokens
    mask[i, :len(tokens)] = 1
  features = {
      F.INPUT_IDS: ids, F.INPUT_MASK: mask, F.SEGMENT_IDS: np.zeros_like(ids),
      LABEL_IDS: np.stack([r[1] for r in rows]) if n else np.zeros((0, max_seq_length), np.int32),
      LABEL_WEIGHTS: (np.stack([r[2] for r in rows]) if n
                      else np.zeros((0, max_seq_length), np.float32)),
  }
  return Windows(features, np.asarray(sentence_of, np.int64), reads)
