"""SQuAD post-processing: n-best span search over windows, no-answer odds, official scoring."""

from __future__ import annotations

import collections
import dataclasses
import json
from collections.abc import Sequence

import numpy as np

from electra_tf import atomic, fileio
from electra_tf.tasks.squad_data import SquadExample, SquadFeature


@dataclasses.dataclass
class RawResult:
  """The model's outputs for one feature.

  Attributes:
    unique_id: the feature's id.
    start_logits: [L].
    end_logits: [L], or [K, L] (joint head: row k is conditioned on start_top_index[k]).
    start_top_index: [K] starts the joint head scored, else None.
    impossible_logit: the answerability classifier's logit (> 0: no answer), else None.
  """

  unique_id: int
  start_logits: np.ndarray
  end_logits: np.ndarray
  start_top_index: np.ndarray | None = None
  impossible_logit: float | None = None


def _top(values: np.ndarray, n: int) -> list[int]:
  return [int(i) for i in np.argsort(-values, kind="stable")[:n]]


def _spans(feature: SquadFeature, result: RawResult, n_best: int, max_answer_length: int):
  """[(score, start logit, end logit, start, end)] of the valid spans of one window."""
  starts = feature.token_char_starts
  pairs = []
  if result.start_top_index is None:
    for s in _top(result.start_logits, n_best):
      for e in _top(result.end_logits, n_best):
        pairs.append((s, e, float(result.end_logits[e])))
  else:
    for k, s in enumerate(result.start_top_index[:n_best]):
      for e in _top(result.end_logits[k], n_best):
        pairs.append((int(s), e, float(result.end_logits[k][e])))
  spans = []
  for s, e, end_logit in pairs:
    if starts[s] < 0 or starts[e] < 0 or not feature.token_is_max_context[s]:
      continue  # outside the context, or better judged in another window
    if e < s or e - s + 1 > max_answer_length:
      continue
    start_logit = float(result.start_logits[s])
    spans.append((start_logit + end_logit, start_logit, end_logit, s, e))
  return spans


def _softmax(scores: list[float]) -> np.ndarray:
  x = np.exp(np.asarray(scores, np.float64) - max(scores))
  return x / x.sum()


def postprocess(examples: Sequence[SquadExample], features: Sequence[SquadFeature],
                results: Sequence[RawResult], *, n_best_size: int = 20,
                max_answer_length: int = 30, version_2: bool = False
                ) -> tuple[dict[str, str], dict[str, list[dict]], dict[str, float]]:
  """Best answer per question, merged over its windows.

  Returns:
    predictions {qas_id: answer text cut from the original context}; the n-best lists
    {qas_id: [{text, probability, start_logit, end_logit, char_start, char_end}]}; and for
    SQuAD 2.0 the no-answer odds {qas_id: float} (higher: more likely unanswerable): the
    lowest answerability-classifier logit over the windows, or else the lowest null score
    ([CLS] start + end) minus the best span's score.
  """
  by_id = {r.unique_id: r for r in results}
  windows = collections.defaultdict(list)
  for f in features:
    if f.unique_id in by_id:
      windows[f.example_index].append(f)
  predictions, nbest_out, null_odds = {}, {}, {}
  for index, example in enumerate(examples):
    candidates, null_scores, classifier = [], [], []
    for f in windows.get(index, []):
      result = by_id[f.unique_id]
      for score, sl, el, s, e in _spans(f, result, n_best_size, max_answer_length):
        candidates.append((score, sl, el, f.token_char_starts[s], f.token_char_ends[e]))
      end_cls = result.end_logits[0] if result.end_logits.ndim == 1 else None
      if end_cls is not None:
        null_scores.append(float(result.start_logits[0] + end_cls))
      if result.impossible_logit is not None:
        classifier.append(result.impossible_logit)
    candidates.sort(key=lambda c: -c[0])
    seen, best = set(), []
    for score, sl, el, cs, ce in candidates:
      text = example.context[cs:ce]
      if text in seen:
        continue
      seen.add(text)
      best.append({"text": text, "start_logit": sl, "end_logit": el, "char_start": cs,
                   "char_end": ce, "score": score})
      if len(best) == n_best_size:
        break
    if best:
      for entry, p in zip(best, _softmax([b["score"] for b in best])):
        entry["probability"] = float(p)
    predictions[example.qas_id] = best[0]["text"] if best else ""
    nbest_out[example.qas_id] = best
    if version_2:
      best_score = best[0]["score"] if best else -1e4
      if classifier:
        null_odds[example.qas_id] = float(min(classifier))
      elif null_scores:
        null_odds[example.qas_id] = float(min(null_scores) - best_score)
      else:
        null_odds[example.qas_id] = 0.0
  return predictions, nbest_out, null_odds


def apply_null_threshold(predictions: dict[str, str], null_odds: dict[str, float],
                         threshold: float) -> dict[str, str]:
  """Predictions with "" wherever the no-answer odds exceed `threshold`."""
  return {q: ("" if null_odds.get(q, -np.inf) > threshold else text)
          for q, text in predictions.items()}


def _restrict(dataset: list[dict], qas_ids: set[str]) -> list[dict]:
  """The articles of `dataset` holding only the questions in `qas_ids`."""
  out = []
  for article in dataset:
    paragraphs = []
    for p in article["paragraphs"]:
      qas = [qa for qa in p["qas"] if qa["id"] in qas_ids]
      if qas:
        paragraphs.append({**p, "qas": qas})
    if paragraphs:
      out.append({**article, "paragraphs": paragraphs})
  return out


def evaluate(dataset_path: str, predictions: dict[str, str], *, version_2: bool,
             null_odds: dict[str, float] | None = None,
             qas_ids: Sequence[str] | None = None) -> dict[str, float]:
  """EM/F1 (0-100) from the official SQuAD scripts shipped in tf-models-official.

  v1.1 gives exact_match and f1. v2.0 gives exact and f1 at threshold 0 of the no-answer
  odds, best_exact / best_f1 at the threshold the official script picks on this set, and
  that best_f1_thresh; plus HasAns_/NoAns_ breakdowns.
  """
  from official.nlp.tools import squad_evaluate_v1_1, squad_evaluate_v2_0

  dataset = json.loads(fileio.read_text(dataset_path))["data"]
  dataset = _restrict(dataset, set(qas_ids if qas_ids is not None else predictions))
  if not version_2:
    scores = squad_evaluate_v1_1.evaluate(dataset, predictions)  # fractions, unlike v2.0's
    return {"exact_match": 100.0 * scores["exact_match"], "f1": 100.0 * scores["final_f1"]}
  odds = null_odds if null_odds is not None else {q: 0.0 for q in predictions}
  thresholded = apply_null_threshold(predictions, odds, 0.0)
  scores = squad_evaluate_v2_0.evaluate(dataset, thresholded, odds)
  # The best threshold search needs the raw span predictions, not thresholded ones.
  best = squad_evaluate_v2_0.evaluate(dataset, predictions, odds)
  out = {"exact": scores["exact"], "f1": scores["f1"], "best_exact": best["final_exact"],
         "best_exact_thresh": best["final_exact_thresh"], "best_f1": best["final_f1"],
         "best_f1_thresh": best["final_f1_thresh"]}
  out.update({k: v for k, v in scores.items() if k.startswith(("HasAns_", "NoAns_"))
              and not k.endswith("total")})
  return {k: float(v) for k, v in out.items()}


def write_predictions(output_dir: str, predictions: dict[str, str],
                      nbest: dict[str, list[dict]] | None = None,
                      null_odds: dict[str, float] | None = None) -> None:
  """predictions.json (the official format), nbest_predictions.json, null_odds.json."""
  atomic.atomic_write_text(fileio.join(output_dir, "predictions.json"),
                           json.dumps(predictions, indent=1))
  if nbest is not None:
    atomic.atomic_write_text(fileio.join(output_dir, "nbest_predictions.json"),
                             json.dumps(nbest, indent=1))
  if null_odds is not None:
    atomic.atomic_write_text(fileio.join(output_dir, "null_odds.json"),
                             json.dumps(null_odds, indent=1))
