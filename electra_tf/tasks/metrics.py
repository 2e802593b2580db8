"""GLUE metrics in numpy: accuracy, binary F1, Matthews correlation, Pearson and Spearman."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def accuracy(labels, preds) -> float:
  labels, preds = np.asarray(labels), np.asarray(preds)
  return float(np.mean(labels == preds)) if labels.size else 0.0


def f1(labels, preds) -> float:
  """Binary F1 of the positive class 1 (0 when there is no true or predicted positive)."""
  labels, preds = np.asarray(labels) == 1, np.asarray(preds) == 1
  tp = float(np.sum(labels & preds))
  denominator = float(np.sum(labels) + np.sum(preds))
  return 2.0 * tp / denominator if denominator else 0.0


def matthews_corrcoef(labels, preds) -> float:
  """Matthews correlation of binary labels (CoLA's metric); 0 when undefined."""
  labels, preds = np.asarray(labels) == 1, np.asarray(preds) == 1
  tp = float(np.sum(labels & preds))
  tn = float(np.sum(~labels & ~preds))
  fp = float(np.sum(~labels & preds))
  fn = float(np.sum(labels & ~preds))
  denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
  return float((tp * tn - fp * fn) / denominator) if denominator else 0.0


def pearson(x, y) -> float:
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  x, y = x - x.mean(), y - y.mean()
  denominator = np.sqrt(np.sum(x * x) * np.sum(y * y))
  return float(np.sum(x * y) / denominator) if denominator else 0.0


def _ranks(x: np.ndarray) -> np.ndarray:
  """1-based ranks, ties sharing their average rank."""
  order = np.argsort(x, kind="mergesort")
  ranks = np.empty(len(x), np.float64)
  sorted_x = x[order]
  start = 0
  for end in range(1, len(x) + 1):
    if end == len(x) or sorted_x[end] != sorted_x[start]:
      ranks[order[start:end]] = (start + end + 1) / 2.0  # mean of ranks start+1 .. end
      start = end
  return ranks


def spearman(x, y) -> float:
  return pearson(_ranks(np.asarray(x, np.float64)), _ranks(np.asarray(y, np.float64)))


METRICS = {"accuracy": accuracy, "f1": f1, "mcc": matthews_corrcoef, "pearson": pearson,
           "spearman": spearman}


def compute(names: Sequence[str], labels, predictions) -> dict[str, float]:
  """{name: value} for each metric name in METRICS."""
  unknown = [n for n in names if n not in METRICS]
  if unknown:
    raise ValueError(f"unknown metric(s) {unknown}; known: {sorted(METRICS)}")
  return {name: METRICS[name](labels, predictions) for name in names}
