"""The n-best span search on hand-made logits, and EM/F1 through the official scripts against
hand-computed values (v1.1 and v2.0 with its no-answer threshold)."""

import json

import numpy as np
import pytest

from electra_tf.tasks.squad_data import SquadExample, SquadFeature
from electra_tf.tasks.squad_postprocess import (
  RawResult,
  apply_null_threshold,
  evaluate,
  postprocess,
)

CONTEXT = "alpha beta gamma delta epsilon"
#          0     6    11    17    23        (character starts of the five words)
STARTS = [0, 6, 11, 17, 23]
ENDS = [5, 10, 16, 22, 30]
L = 10  # [CLS] q [SEP] w0..w4 [SEP] pad  -> context words at positions 3..7


def _feature(uid=1, window=0, max_context=None, example_index=0):
  starts, ends = [-1] * L, [-1] * L
  starts[3:8], ends[3:8] = STARTS, ENDS
  is_max = [False] * L
  for p in range(3, 8):
    is_max[p] = True if max_context is None else max_context[p - 3]
  return SquadFeature(uid, example_index, window, None, None, None, starts, ends, is_max)


def _logits(peaks: dict[int, float]) -> np.ndarray:
  x = np.full(L, -10.0, np.float32)
  for pos, value in peaks.items():
    x[pos] = value
  return x


EXAMPLE = SquadExample("q", "?", CONTEXT, ("gamma",), 11, False)


def test_best_span_and_its_probability():
  result = RawResult(1, _logits({5: 3.0, 4: 1.0}), _logits({5: 2.0, 6: 1.5}))
  preds, nbest, _ = postprocess([EXAMPLE], [_feature()], [result], n_best_size=3)
  assert preds == {"q": "gamma"}
  texts = [n["text"] for n in nbest["q"]]
  # Scores: gamma 5.0, "gamma delta" 4.5, "beta gamma" 3.0; top-3 starts are 5, 4, then a
  # -10 position.
  assert texts == ["gamma", "gamma delta", "beta gamma"]
  scores = np.array([5.0, 4.5, 3.0])
  expected = np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum()
  np.testing.assert_allclose([n["probability"] for n in nbest["q"]], expected, rtol=1e-5)
  assert nbest["q"][0]["char_start"] == 11 and nbest["q"][0]["char_end"] == 16


def test_invalid_spans_are_skipped():
  # end before start, outside the context ([CLS] at 0, [SEP] at 8) and too long
  result = RawResult(1, _logits({6: 5.0, 0: 9.0, 3: 1.0}), _logits({4: 6.0, 8: 9.0, 7: 0.5}))
  preds, nbest, _ = postprocess([EXAMPLE], [_feature()], [result], max_answer_length=2)
  # start 6 -> end 7 ("delta epsilon", 5.5) beats start 3 -> end 4 ("alpha beta", 7.0)? No:
  # 1.0 + 6.0 = 7.0 > 5.5, so "alpha beta" wins; start 3 -> end 7 is 5 tokens (> 2).
  assert preds["q"] == "alpha beta"
  assert all(len(n["text"].split()) <= 2 for n in nbest["q"])
  assert not any(n["text"] == "" for n in nbest["q"])


def test_windows_merge_and_max_context_decides():
  # The same token scored in two windows: only the window where it has max context counts.
  first = _feature(1, 0, max_context=[True, True, False, False, False])
  second = _feature(2, 1, max_context=[False, False, True, True, True])
  r1 = RawResult(1, _logits({5: 9.0}), _logits({5: 9.0}))   # gamma, not max context here
  r2 = RawResult(2, _logits({6: 2.0}), _logits({6: 2.0}))   # delta
  preds, _, _ = postprocess([EXAMPLE], [first, second], [r1, r2])
  assert preds["q"] == "delta"


def test_joint_head_uses_the_start_conditioned_rows():
  end = np.full((2, L), -10.0, np.float32)
  end[0, 7] = 4.0   # start 4 (beta) -> end 7 (epsilon)
  end[1, 5] = 1.0   # start 5 (gamma) -> end 5
  result = RawResult(1, _logits({4: 2.0, 5: 3.0}), end, start_top_index=np.array([4, 5]))
  preds, nbest, _ = postprocess([EXAMPLE], [_feature()], [result], n_best_size=2)
  assert preds["q"] == "beta gamma delta epsilon"  # 2 + 4 = 6 > 3 + 1
  assert nbest["q"][1]["text"] == "gamma"


def test_null_odds_for_v2():
  result = RawResult(1, _logits({0: 4.0, 5: 3.0}), _logits({0: 2.0, 5: 2.0}))
  _, _, odds = postprocess([EXAMPLE], [_feature()], [result], version_2=True)
  assert odds["q"] == pytest.approx((4.0 + 2.0) - (3.0 + 2.0))
  with_classifier = RawResult(1, result.start_logits, result.end_logits, impossible_logit=-1.5)
  _, _, odds = postprocess([EXAMPLE], [_feature()], [with_classifier], version_2=True)
  assert odds["q"] == -1.5
  assert apply_null_threshold({"q": "gamma"}, odds, -2.0) == {"q": ""}
  assert apply_null_threshold({"q": "gamma"}, odds, -1.0) == {"q": "gamma"}


def _dataset(tmp_path, qas):
  data = {"version": "x", "data": [{"title": "t", "paragraphs": [
      {"context": CONTEXT, "qas": [{"id": q, "question": "?", "answers": [
          {"text": a, "answer_start": 0} for a in answers], "is_impossible": not answers}
          for q, answers in qas]}]}]}
  path = tmp_path / "dev.json"
  path.write_text(json.dumps(data))
  return str(path)


def test_v1_scores_by_hand(tmp_path):
  path = _dataset(tmp_path, [("a", ["gamma delta"]), ("b", ["The alpha", "beta"]),
                             ("c", ["epsilon"]), ("unscored", ["alpha"])])
  preds = {"a": "gamma", "b": "alpha", "c": "delta"}
  scores = evaluate(path, preds, version_2=False, qas_ids=["a", "b", "c"])
  # a: EM 0, F1 2*(1/1*1/2)/(1+1/2) = 2/3; b: "alpha" == normalize("The alpha") -> EM 1, F1 1;
  # c: 0 / 0. The question left out of qas_ids is not counted.
  assert scores["exact_match"] == pytest.approx(100 / 3)
  assert scores["f1"] == pytest.approx(100 * (2 / 3 + 1) / 3)


def test_v2_scores_and_best_threshold_by_hand(tmp_path):
  path = _dataset(tmp_path, [("a", ["gamma"]), ("b", []), ("c", ["delta"]), ("d", [])])
  preds = {"a": "gamma", "b": "beta", "c": "delta", "d": "alpha"}
  odds = {"a": -3.0, "b": 2.0, "c": 1.0, "d": -1.0}
  scores = evaluate(path, preds, version_2=True, null_odds=odds)
  # Threshold 0: a answered (1), b abstains (1), c abstains (0), d answers wrongly (0) -> 50.
  assert scores["exact"] == pytest.approx(50.0) and scores["f1"] == pytest.approx(50.0)
  # Threshold -3 (answer only a): a 1, b 1, c 0, d 1 = 75; threshold 1 (answer a, d, c) ties
  # at 75, and the official script keeps the first threshold that reaches the best score.
  assert scores["best_exact"] == pytest.approx(75.0)
  assert scores["best_f1_thresh"] == pytest.approx(-3.0)
  assert scores["HasAns_exact"] == pytest.approx(50.0)
