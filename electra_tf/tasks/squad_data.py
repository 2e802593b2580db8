"""SQuAD 1.1/2.0: read the JSON, split contexts into windows of token ids with char offsets."""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Sequence

import numpy as np

from electra_tf import fileio
from electra_tf.data.tokenizer import WordPieceTokenizer
from electra_tf.errors import UserError


class SquadFormatError(UserError):
  """A SQuAD file is not valid SQuAD JSON; the message names the file and the question."""


@dataclasses.dataclass(frozen=True)
class SquadExample:
  """One question on one context.

  Attributes:
    qas_id: the question id.
    question, context: the texts, as in the file.
    answers: every gold answer text (dev sets have several).
    answer_start: character offset of the first answer in `context` (-1 if none).
    is_impossible: SQuAD 2.0 question without an answer.
    title: the article's title (to pair questions with other paragraphs of one article).
  """

  qas_id: str
  question: str
  context: str
  answers: tuple[str, ...]
  answer_start: int
  is_impossible: bool
  title: str = ""


@dataclasses.dataclass
class ReadReport:
  num_questions: int
  num_skipped: int
  skipped_ids: list[str]


def _field(obj, key, kind, where):
  if not isinstance(obj, dict) or key not in obj:
    raise SquadFormatError(f"{where} has no {key!r}")
  value = obj[key]
  if kind is int and isinstance(value, bool) or not isinstance(value, kind):
    raise SquadFormatError(f"{where}: {key!r} must be {kind.__name__}, "
                           f"got {type(value).__name__}")
  return value


def _answer_at_offset(context: str, text: str, start: int) -> bool:
  if 0 <= start and context[start:start + len(text)] == text:
    return True
  # Some files differ only in whitespace between the answer and the context.
  return " ".join(context[start:start + len(text) + 5].split()).startswith(" ".join(text.split()))


def read_squad(path: str, *, is_training: bool, version_2: bool | None = None
               ) -> tuple[list[SquadExample], ReadReport]:
  """Examples of a SQuAD JSON file, in file order.

  Args:
    path: train-v1.1.json, dev-v2.0.json, ...
    is_training: training examples need one answer found at its offset; those whose answer
      is not are skipped and counted in the report rather than failing the run.
    version_2: allow unanswerable questions; None detects it from `is_impossible` keys.

  Raises:
    SquadFormatError: the file is not SQuAD JSON (the message names the question id).
  """
  try:
    fileio.check_path(path)
    if fileio.isdir(path):
      raise SquadFormatError(f"{path} is a directory; pass the SQuAD JSON file inside it")
    if not fileio.exists(path):
      raise SquadFormatError(f"{path} does not exist")
    dataset = json.loads(fileio.read_text(path))
  except UnicodeDecodeError as exc:
    raise SquadFormatError(f"{path} is not UTF-8 (byte {exc.start})") from None
  except json.JSONDecodeError as exc:
    raise SquadFormatError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
  articles = _field(dataset, "data", list, path)
  examples, skipped, total = [], [], 0
  for a, article in enumerate(articles):
    title = article.get("title", str(a)) if isinstance(article, dict) else ""
    for p, paragraph in enumerate(_field(article, "paragraphs", list, f"{path} article {a}")):
      where = f"{path} article {a} paragraph {p}"
      context = _field(paragraph, "context", str, where)
      for qa in _field(paragraph, "qas", list, where):
        qid = str(qa.get("id", "?")) if isinstance(qa, dict) else "?"
        here = f"{path} question {qid}"
        _field(qa, "id", str, f"{where} question")
        question = _field(qa, "question", str, here)
        impossible = bool(qa.get("is_impossible", False))
        if impossible and version_2 is False:
          raise SquadFormatError(f"{here} is unanswerable (SQuAD 2.0); use --task=squad_v2.0")
        answers = [] if impossible else _field(qa, "answers", list, here)
        texts, starts = [], []
        for answer in answers:
          texts.append(_field(answer, "text", str, f"{here} answer"))
          starts.append(_field(answer, "answer_start", int, f"{here} answer"))
        total += 1
        if is_training and not impossible:
          if not texts or not _answer_at_offset(context, texts[0], starts[0]):
            skipped.append(qid)
            continue
        examples.append(SquadExample(qid, question, context, tuple(texts),
                                     starts[0] if starts else -1, impossible, title))
  return examples, ReadReport(total, len(skipped), skipped)


def make_unanswerable(examples: Sequence[SquadExample], *, fraction: float, seed: int
                      ) -> list[SquadExample]:
  """SQuAD 2.0-style data from 1.1: a `fraction` of the questions get another paragraph of
  the same article as context and become unanswerable (ids get a "-unanswerable" suffix).

  Such questions are easier than SQuAD 2.0's adversarial ones: scores are not comparable
  with the official benchmark.
  """
  rng = random.Random(seed)
  by_title: dict[str, list[str]] = {}
  for e in examples:
    contexts = by_title.setdefault(e.title, [])
    if e.context not in contexts:
      contexts.append(e.context)
  out = []
  for e in examples:
    others = [c for c in by_title[e.title] if c != e.context]
    if others and rng.random() < fraction:
      out.append(dataclasses.replace(e, qas_id=f"{e.qas_id}-unanswerable",
                                     context=rng.choice(others), answers=(), answer_start=-1,
                                     is_impossible=True))
    else:
      out.append(e)
  return out


def to_squad_json(examples: Sequence[SquadExample], version: str = "v2.0") -> dict:
  """A SQuAD-format dict of `examples` (one paragraph per example), e.g. for scoring."""
  paragraphs = [{"context": e.context, "qas": [{
      "id": e.qas_id, "question": e.question, "is_impossible": e.is_impossible,
      "answers": [{"text": t, "answer_start": e.answer_start if i == 0 else -1}
                  for i, t in enumerate(e.answers)]}]} for e in examples]
  return {"version": version, "data": [{"title": "examples", "paragraphs": paragraphs}]}


def char_offsets(text: str, byte_offsets: np.ndarray) -> np.ndarray:
  """UTF-8 byte offsets into `text` -> character offsets."""
  widths = np.fromiter((len(ch.encode("utf-8")) for ch in text), np.int64, len(text))
  char_of_byte = np.zeros(int(widths.sum()) + 1, np.int64)
  char_of_byte[np.cumsum(widths)] = 1
  char_of_byte = np.cumsum(char_of_byte)
  return char_of_byte[np.asarray(byte_offsets, np.int64)]


@dataclasses.dataclass
class SquadFeature:
  """One window of one example, as the model sees it.

  Attributes:
    unique_id: the feature's id (the model's outputs carry it back).
    example_index: index of its example in the list given to `convert_examples`.
    window_index: which window of the example's context this is.
    input_ids, input_mask, segment_ids: [CLS] question [SEP] window [SEP], padded (None when
      read back from the cache: only the TFRecord holds them).
    token_char_starts, token_char_ends: character span in the context of each position's
      token, -1 for question, special and padding positions.
    token_is_max_context: whether this window gives the token its most central position.
    start_position, end_position: answer tokens; 0/0 ([CLS]) if the answer is not here.
    is_impossible: no answer in this window (or at all).
  """

  unique_id: int
  example_index: int
  window_index: int
  input_ids: list[int] | None
  input_mask: list[int] | None
  segment_ids: list[int] | None
  token_char_starts: list[int]
  token_char_ends: list[int]
  token_is_max_context: list[bool]
  start_position: int = 0
  end_position: int = 0
  is_impossible: bool = False


def _windows(num_tokens: int, window: int, stride: int) -> list[tuple[int, int]]:
  """(start, length) of the context windows: each starts `stride` after the previous."""
  spans, start = [], 0
  while True:
    length = min(window, num_tokens - start)
    spans.append((start, length))
    if start + length >= num_tokens:
      return spans
    start += min(length, stride)


def _max_context(spans: list[tuple[int, int]], span_index: int, position: int) -> bool:
  """Whether window `span_index` is the one where token `position` has most context."""
  best, best_index = None, None
  for i, (start, length) in enumerate(spans):
    if not start <= position < start + length:
      continue
    score = min(position - start, start + length - 1 - position) + 0.01 * length
    if best is None or score > best:
      best, best_index = score, i
  return best_index == span_index


def _tokenize_with_char_offsets(tokenizer: WordPieceTokenizer, texts: list[str],
                                batch_size: int = 512):
  """[(ids, char starts, char ends)] per text, tokenized in batches with tf.text."""
  out = []
  for i in range(0, len(texts), batch_size):
    chunk = texts[i:i + batch_size]
    ids, starts, ends = tokenizer.tokenize_with_offsets(chunk)
    for text, t, s, e in zip(chunk, ids.to_list(), starts.to_list(), ends.to_list()):
      out.append((t, char_offsets(text, s).tolist(), char_offsets(text, e).tolist()))
  return out


def convert_examples(examples: Sequence[SquadExample], tokenizer: WordPieceTokenizer, *,
                     max_seq_length: int = 384, doc_stride: int = 128,
                     max_query_length: int = 64, is_training: bool) -> list[SquadFeature]:
  """Windows of [CLS] question [SEP] context [SEP] with token-level answer positions.

  Each context is tokenized once with tf.text offsets; an answer's character span maps to
  the tokens that overlap it, and token spans map back to characters of the original text.
  """
  vocab = tokenizer.vocab
  contexts = list(dict.fromkeys(e.context for e in examples))
  context_tokens = dict(zip(contexts, _tokenize_with_char_offsets(tokenizer, contexts)))
  questions = tokenizer.tokenize([e.question for e in examples]).to_list() if examples else []
  features = []
  for index, (example, query) in enumerate(zip(examples, questions)):
    query = query[:max_query_length]
    ids, starts, ends = context_tokens[example.context]
    answer = None
    if is_training and not example.is_impossible:
      begin = example.answer_start
      finish = begin + len(example.answers[0])
      covered = [i for i in range(len(ids)) if ends[i] > begin and starts[i] < finish]
      if covered:
        answer = (covered[0], covered[-1])
    window = max_seq_length - len(query) - 3
    if window <= 0:
      raise UserError(f"max_seq_length {max_seq_length} leaves no room for the context of "
                      f"question {example.qas_id}")
    spans = _windows(len(ids), window, doc_stride)
    for w, (start, length) in enumerate(spans):
      offset = len(query) + 2
      tokens = [vocab.cls_id, *query, vocab.sep_id, *ids[start:start + length], vocab.sep_id]
      n = len(tokens)
      pad = max_seq_length - n
      char_starts = [-1] * max_seq_length
      char_ends = [-1] * max_seq_length
      max_context = [False] * max_seq_length
      for j in range(length):
        char_starts[offset + j] = starts[start + j]
        char_ends[offset + j] = ends[start + j]
        max_context[offset + j] = _max_context(spans, w, start + j)
      start_position = end_position = 0
      inside = answer is not None and start <= answer[0] and answer[1] < start + length
      if inside:
        start_position, end_position = answer[0] - start + offset, answer[1] - start + offset
      features.append(SquadFeature(
          unique_id=1_000_000_000 + len(features), example_index=index, window_index=w,
          input_ids=tokens + [0] * pad, input_mask=[1] * n + [0] * pad,
          segment_ids=[0] * offset + [1] * (length + 1) + [0] * pad,
          token_char_starts=char_starts, token_char_ends=char_ends,
          token_is_max_context=max_context, start_position=start_position,
          end_position=end_position, is_impossible=example.is_impossible or not inside))
  return features
