"""Classification data and metrics: hand-computed metric values and cross-checks against
sklearn/scipy, local files and their errors, TFDS-shaped records, movie reviews, encoding."""

import json

import numpy as np
import pytest

from electra_tf.data.tokenizer import WordPieceTokenizer
from electra_tf.data.vocab import builtin_vocab_path
from electra_tf.tasks import classification_data as data
from electra_tf.tasks import metrics


def test_metrics_by_hand():
  labels = [1, 1, 1, 0, 0, 0, 0, 1]
  preds = [1, 1, 0, 0, 0, 1, 0, 1]
  # tp 3, fn 1, fp 1, tn 3: accuracy 6/8, F1 2*3/(2*3+1+1) = 0.75,
  # MCC (3*3 - 1*1) / sqrt(4*4*4*4) = 8/16 = 0.5
  assert metrics.accuracy(labels, preds) == 0.75
  assert metrics.f1(labels, preds) == pytest.approx(0.75)
  assert metrics.matthews_corrcoef(labels, preds) == pytest.approx(0.5)
  # Spearman with ties: ranks of x [1, 2.5, 2.5, 4], of y [1, 2, 3, 4].
  x, y = [1.0, 2.0, 2.0, 3.0], [10.0, 20.0, 30.0, 40.0]
  rx, ry = np.array([1, 2.5, 2.5, 4]), np.array([1, 2, 3, 4])
  expected = np.corrcoef(rx, ry)[0, 1]
  assert metrics.spearman(x, y) == pytest.approx(expected)
  assert metrics.matthews_corrcoef([1, 1], [1, 1]) == 0.0  # undefined -> 0


def test_metrics_match_sklearn_and_scipy():
  from scipy import stats
  from sklearn import metrics as sk

  rng = np.random.default_rng(0)
  labels, preds = rng.integers(0, 2, 500), rng.integers(0, 2, 500)
  assert metrics.f1(labels, preds) == pytest.approx(sk.f1_score(labels, preds))
  assert metrics.matthews_corrcoef(labels, preds) == pytest.approx(
      sk.matthews_corrcoef(labels, preds))
  x = rng.normal(size=300)
  y = np.round(x + rng.normal(size=300), 1)  # rounding makes ties
  assert metrics.pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0])
  assert metrics.spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0])


def _write(path, text):
  path.write_text(text, encoding="utf-8")
  return str(path)


def test_tsv_csv_jsonl_and_pairs(tmp_path):
  tsv = _write(tmp_path / "t.tsv", "sentence\tlabel\nGood film.\tpos\nBad, dull.\tneg\n")
  spec = data.infer_spec(tsv, ["sentence"], "label")
  assert spec.label_names == ("neg", "pos") and spec.metrics == ("accuracy", "f1")
  assert data.read_table(tsv, spec) == [data.Example(("Good film.",), 1),
                                        data.Example(("Bad, dull.",), 0)]
  csv = _write(tmp_path / "p.csv", 'a,b,score\n"Hi, you",there,0.5\nx,y,4\n')
  spec = data.infer_spec(csv, ["a", "b"], "score", regression=True)
  assert spec.is_regression and spec.num_labels == 1
  assert data.read_table(csv, spec) == [data.Example(("Hi, you", "there"), 0.5),
                                        data.Example(("x", "y"), 4.0)]
  jsonl = _write(tmp_path / "j.jsonl", json.dumps({"text": "a", "label": 2}) + "\n"
                 + json.dumps({"text": "b", "label": 10}) + "\n")
  spec = data.infer_spec(jsonl, ["text"], "label")
  assert spec.label_names == ("2", "10")  # numeric labels sort numerically


@pytest.mark.parametrize("content,needle", [
    ("sentence\tlabel\nfine\tpos\n", "no column 'text'"),
    ("text\tlabel\nfine\tpos\nbad\tneutral\n", "line 3: unknown label 'neutral'"),
    ("text\tlabel\nfine\tpos\nonly one field\n", "line 3 has 1 fields"),
    ("", "is empty"),
])
def test_file_errors(tmp_path, content, needle):
  train = _write(tmp_path / "train.tsv", "text\tlabel\nok\tpos\nno\tneg\n")
  spec = data.infer_spec(train, ["text"], "label")
  bad = _write(tmp_path / "dev.tsv", content)
  with pytest.raises(data.DataFormatError, match=needle.replace("(", r"\(")):
    data.read_table(bad, spec)


def test_wrong_label_type_and_encoding(tmp_path):
  spec = data.TaskSpec("r", ("text",), "label", None, ("pearson",), "pearson")
  bad = _write(tmp_path / "r.tsv", "text\tlabel\nfine\thigh\n")
  with pytest.raises(data.DataFormatError, match="label 'high' is not a number"):
    data.read_table(bad, spec)
  (tmp_path / "latin.tsv").write_bytes("text\tlabel\ncaf\xe9\t1\n".encode("latin-1"))
  with pytest.raises(data.DataFormatError, match="not UTF-8"):
    data.read_table(str(tmp_path / "latin.tsv"), spec)


def test_tfds_shaped_records_and_offline_error():
  import tensorflow as tf

  spec = data.GLUE_TASKS["mrpc"]
  records = tf.data.Dataset.from_tensor_slices({
      "sentence1": [b"He left.", b"Caf\xc3\xa9 open."], "sentence2": [b"He went.", b"Shut."],
      "label": [1, -1], "idx": [0, 1]})
  examples = data.records_to_examples(records.as_numpy_iterator(), spec)
  assert examples == [data.Example(("He left.", "He went."), 1)]  # -1: unlabeled test row
  with pytest.raises(data.UserError, match="could not load glue/rte"):
    data.load_glue("rte", "validation", data_dir="/nonexistent/tfds")


def test_movie_reviews_split():
  spec, train, dev = data.movie_reviews(seed=0)
  assert spec.label_names == ("negative", "positive")
  total = len(train) + len(dev)
  assert 10_000 < total < 10_605  # sentences scored exactly 0 are dropped
  assert len(dev) == round(0.1 * total)
  positives = sum(e.label for e in train + dev)
  assert 0.4 < positives / total < 0.7
  again = data.movie_reviews(seed=0)
  assert again[2] == dev


def test_encode_pair_truncates_longest_first():
  tok = WordPieceTokenizer(builtin_vocab_path())
  spec = data.TaskSpec("p", ("a", "b"), "label", ("0", "1"), ("accuracy",), "accuracy")
  long_a = "one two three four five six seven"
  out = data.encode([data.Example((long_a, "yes no"), 1)], tok, 10, spec)
  ids = out["input_ids"][0].tolist()
  a_ids = tok.tokenize([long_a]).to_list()[0]
  b_ids = tok.tokenize(["yes no"]).to_list()[0]
  # 10 - 3 specials = 7 tokens: a is cut to 5, b keeps its 2.
  assert ids == [tok.vocab.cls_id, *a_ids[:5], tok.vocab.sep_id, *b_ids, tok.vocab.sep_id]
  assert out["segment_ids"][0].tolist() == [0] * 7 + [1] * 3
  assert out["input_mask"][0].sum() == 10 and out["label"].tolist() == [1]
