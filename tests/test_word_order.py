"""bench/quality/word_order.py's shuffle and AUC: the probe is only as good as these two."""

import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench", "quality"))

import word_order  # noqa: E402

from electra_tf import features as F  # noqa: E402


def _batch():
  ids = np.array([[2, 10, 11, 12, 13, 14, 3, 0], [2, 20, 21, 22, 3, 0, 0, 0]], np.int32)
  mask = (ids > 0).astype(np.int32)
  positions = np.array([[2, 5], [3, 0]], np.int32)
  weights = np.array([[1.0, 1.0], [1.0, 0.0]], np.float32)
  masked = ids.copy()
  masked[0, 2] = masked[0, 5] = masked[1, 3] = 4  # [MASK]
  return {F.INPUT_IDS: ids, F.INPUT_MASK: mask, F.SEGMENT_IDS: np.zeros_like(ids),
          F.MASKED_INPUT_IDS: masked, F.MASKED_LM_POSITIONS: positions,
          F.MASKED_LM_IDS: np.array([[11, 14], [22, 0]], np.int32),
          F.MASKED_LM_WEIGHTS: weights}


def test_shuffle_keeps_the_ends_the_bag_and_where_each_target_is():
  batch = _batch()
  out = word_order.shuffled(batch, np.random.default_rng(3))
  for row in range(2):
    n = batch[F.INPUT_MASK][row].sum()
    ids, new = batch[F.INPUT_IDS][row], out[F.INPUT_IDS][row]
    assert new[0] == 2 and new[n - 1] == 3 and (new[n:] == 0).all()
    assert sorted(new[1:n - 1]) == sorted(ids[1:n - 1])
    real = batch[F.MASKED_LM_WEIGHTS][row] > 0
    moved = out[F.MASKED_LM_POSITIONS][row][real]
    # The target is still under each masked position, and the [MASK] moved with it.
    np.testing.assert_array_equal(new[moved], batch[F.MASKED_LM_IDS][row][real])
    assert (out[F.MASKED_INPUT_IDS][row][moved] == 4).all()
    assert (out[F.MASKED_INPUT_IDS][row] == 4).sum() == real.sum()
  assert not np.array_equal(out[F.INPUT_IDS][0], batch[F.INPUT_IDS][0])
  # The padding slot keeps position 0.
  assert out[F.MASKED_LM_POSITIONS][1][1] == 0
  np.testing.assert_array_equal(out[F.MASKED_LM_IDS], batch[F.MASKED_LM_IDS])


def test_auc():
  labels = np.array([0, 0, 1, 1])
  assert word_order.auc(np.array([0.1, 0.2, 0.3, 0.4]), labels) == 1.0
  assert word_order.auc(np.array([0.4, 0.3, 0.2, 0.1]), labels) == 0.0
  assert word_order.auc(np.array([0.1, 0.3, 0.2, 0.4]), labels) == 0.75
  assert word_order.auc(np.ones(4), labels) == 0.5  # ties count a half
