"""Packs the sentences of one document into [CLS] A [SEP] B [SEP] pretraining examples.

The rules follow the authors' ExampleBuilder (google-research/electra,
build_pretraining_dataset.py):

- sentences of one document accumulate until they reach the target length; a document's
  end flushes what is left, so no example spans two documents;
- 10% of examples are a single segment; otherwise segment A takes sentences up to
  (target - 3) // 2 tokens (a sentence crossing that mark joins A half of the time);
- after each example, the next target is max_seq_length, or with probability 5% a random
  length in [5, max_seq_length].

Two changes: tokens cut off by the max_seq_length trim (the tail of the last sentence) are
carried into the next example of the same document instead of being dropped, so long
sentences, and lines with no sentence breaks at all, are used in full; and once segment B
has begun, later sentences stay in B, so an example always reads in text order.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

SINGLE_SEGMENT_PROB = 0.1
SHORT_TARGET_PROB = 0.05
MIN_TARGET_LENGTH = 5


class ExampleBuilder:
  """Turns a stream of tokenized sentences and document ends into packed examples.

  Args:
    max_seq_length: L, the length of every example including [CLS] and [SEP]s.
    cls_id: id of [CLS].
    sep_id: id of [SEP].
    rng: the source of randomness (seed it for reproducible data).

  Example:
    >>> builder = ExampleBuilder(8, cls_id=101, sep_id=102, rng=random.Random(0))
    >>> builder.add_sentence([1, 2, 3]) + builder.add_sentence([4, 5, 6, 7, 8])
    [([101, 1, 2, 3, 102, 4, 5, 102], [0, 0, 0, 0, 0, 1, 1, 1])]
    >>> builder.end_document()  # [6, 7, 8] did not fit: carried over, then flushed
    [([101, 6, 7, 8, 102], [0, 0, 0, 0, 0])]

  Each example is (input_ids, segment_ids), unpadded, at most max_seq_length long.
  """

  def __init__(self, max_seq_length: int, cls_id: int, sep_id: int, rng: random.Random):
    if max_seq_length < MIN_TARGET_LENGTH + 3:
      raise ValueError(f"max_seq_length must be at least {MIN_TARGET_LENGTH + 3}")
    self.max_seq_length = max_seq_length
    self.cls_id = cls_id
    self.sep_id = sep_id
    self.rng = rng
    self.documents = 0  # documents that contributed at least one token
    self._sentences: list[list[int]] = []
    self._length = 0
    self._target = max_seq_length
    self._document_has_tokens = False

  def add_sentence(self, token_ids: Sequence[int]) -> list[tuple[list[int], list[int]]]:
    """Adds one sentence of the current document; returns the examples it completes."""
    if not token_ids:
      return []
    # Bounding sentence length keeps the carried-over tail (and list copies) small.
    examples = []
    for start in range(0, len(token_ids), self.max_seq_length):
      piece = list(token_ids[start:start + self.max_seq_length])
      self._sentences.append(piece)
      self._length += len(piece)
      self._document_has_tokens = True
      while self._length >= self._target:
        examples.append(self._create_example())
    return examples

  def end_document(self) -> list[tuple[list[int], list[int]]]:
    """Ends the current document: flushes its remaining sentences as examples."""
    examples = []
    while self._sentences:
      examples.append(self._create_example())
    if self._document_has_tokens:
      self.documents += 1
      self._document_has_tokens = False
    return examples

  def _create_example(self) -> tuple[list[int], list[int]]:
    if self.rng.random() < SINGLE_SEGMENT_PROB:
      first_target = float("inf")
    else:
      first_target = (self._target - 3) // 2  # 3 = [CLS] and two [SEP]s, not yet added
    first: list[int] = []
    second: list[int] = []
    for sentence in self._sentences:
      # The authors' rule, except that once B has begun everything goes to B: theirs let a
      # short later sentence jump back into A, scrambling the text order.
      if not second and (not first or len(first) + len(sentence) < first_target or
                         (len(first) < first_target and self.rng.random() < 0.5)):
        first += sentence
      else:
        second += sentence
    kept_first = first[:self.max_seq_length - 2]
    second_room = max(0, self.max_seq_length - len(kept_first) - 3)
    # What the trims cut is always a tail of first+second: carry it over, in order.
    leftover = first[len(kept_first):] + second[second_room:]
    kept_second = second[:second_room]

    self._sentences = [leftover] if leftover else []
    self._length = len(leftover)
    if self.rng.random() < SHORT_TARGET_PROB:
      self._target = self.rng.randint(MIN_TARGET_LENGTH, self.max_seq_length)
    else:
      self._target = self.max_seq_length

    input_ids = [self.cls_id, *kept_first, self.sep_id]
    segment_ids = [0] * len(input_ids)
    if kept_second:
      input_ids += [*kept_second, self.sep_id]
      segment_ids += [1] * (len(kept_second) + 1)
    return input_ids, segment_ids


def pack_documents(documents: Sequence[Sequence[Sequence[int]]], max_seq_length: int,
                   cls_id: int, sep_id: int, seed: int = 0
                   ) -> Iterator[tuple[list[int], list[int]]]:
  """Packs already-tokenized documents (lists of sentences of ids) into examples."""
  builder = ExampleBuilder(max_seq_length, cls_id, sep_id, random.Random(seed))
  for document in documents:
    for sentence in document:
      yield from builder.add_sentence(sentence)
    yield from builder.end_document()
