"""ONNX export: onnxruntime on the exported files gives our encoder's states and our task
models' logits (classification, SQuAD with both heads) on real text within 1e-4."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from export_runs import real_inputs

from electra_tf.serving import exporters, onnx_export

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("tf2onnx")


def _run(path, inputs):
  session = ort.InferenceSession(os.path.join(path, onnx_export.MODEL_NAME),
                                 providers=["CPUExecutionProvider"])
  assert [i.name for i in session.get_inputs()] == ["input_ids", "input_mask", "segment_ids"]
  names = [o.name for o in session.get_outputs()]
  return dict(zip(names, session.run(None, inputs)))


@pytest.mark.parametrize("name", ["movies", "squad1", "squad2"])
def test_task_models_match_keras(tiny_runs, tmp_path, name):
  model, run_dir = tiny_runs[name]
  out = str(tmp_path / "onnx")
  exporters.export("onnx", os.path.dirname(run_dir), None, out)  # the run's task model
  meta = json.load(open(os.path.join(out, "export.json")))
  assert os.path.isfile(os.path.join(out, meta["vocab"]))
  inputs = real_inputs(name)
  got = _run(out, inputs)
  want = model({k: tf.constant(v) for k, v in inputs.items()}, training=False)
  assert sorted(got) == sorted(meta["outputs"])
  for key in meta["outputs"]:
    diff = np.abs(got[key] - want[key].numpy()).max()
    assert diff < 1e-4, (name, key, diff)
  # Any batch size and sequence length: the first 20 positions of two examples.
  short = {k: v[:2, :20] for k, v in inputs.items()}
  want = model({k: tf.constant(v) for k, v in short.items()}, training=False)
  got = _run(out, short)
  key = meta["outputs"][0]
  assert np.abs(got[key] - want[key].numpy()).max() < 1e-4


def test_encoder_of_a_pretrained_checkpoint(tiny_runs, tmp_path):
  disc, path = tiny_runs["disc"]
  out = str(tmp_path / "onnx")
  exporters.export("onnx", path, None, out)  # not fine-tuned: its encoder
  inputs = real_inputs("movies")
  got = _run(out, inputs)
  want = disc.encoder({k: tf.constant(v) for k, v in inputs.items()}, training=False).numpy()
  assert np.abs(got["sequence_output"] - want).max() < 1e-4
  assert np.abs(got["pooled_output"] - want[:, 0]).max() < 1e-4


def _documented_lines(root) -> str:
  """docs/exports.md's ONNX example, as written, with its export_dir pointed at `root`."""
  import re

  from testing_utils import ROOT

  with open(os.path.join(ROOT, "docs", "exports.md"), encoding="utf-8") as f:
    blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
  block = next(b for b in blocks if "AutoTokenizer.from_pretrained(export_dir)" in b)
  assert 'export_dir = "onnx/sst2"\n' in block
  return block.replace('export_dir = "onnx/sst2"', f"export_dir = {str(root)!r}")


def _sentencepiece_run(root):
  """A tiny classifier fine-tuned-format dir with a SentencePiece vocab learned on reviews."""
  import dataclasses
  import io

  import tf_keras
  from export_runs import RUNS, TINY

  from electra_tf.data.tokenizer_spec import TokenizerSpec
  from electra_tf.data.vocab_learning import learn_vocab
  from electra_tf.model.finetune_models import build_finetune_model, model_for_task
  from electra_tf.tasks import classification_data
  from electra_tf.training.finetuned import save_finetuned

  _, train, _ = classification_data.movie_reviews(seed=0)
  (root / "text.txt").write_text("\n".join(e.texts[0] for e in train[:1500]) + "\n")
  vocab = learn_vocab(str(root / "text.txt"), 600,
                      TokenizerSpec.create("sentencepiece", lower_case=True),
                      output_path=str(root / "spm.model"), stream=io.StringIO())
  tf_keras.utils.set_random_seed(0)
  config, encoder = RUNS["movies"], dataclasses.replace(TINY, vocab_size=vocab.size)
  model = build_finetune_model(model_for_task(config, encoder, 2))
  record = {"task": config.task, "encoder": encoder.to_dict(), "finetune": config.to_dict(),
            "spec": dataclasses.asdict(classification_data.MOVIE_REVIEWS)}
  return model, save_finetuned(model, record, vocab, str(root / "run" / "best"))


@pytest.mark.parametrize("kind", ["wordpiece", "sentencepiece"])
def test_documented_transformers_tokenizer_lines(tiny_runs, tmp_path, kind):
  """The docs' lines run as written: AutoTokenizer.from_pretrained(export_dir) on the
  export's tokenizer files gives our tokenizer's ids, and onnxruntime on them the Keras
  model's probabilities."""
  pytest.importorskip("transformers")
  from electra_tf.data.tokenizer import make_tokenizer
  from electra_tf.serving import sources, text

  model, run_dir = tiny_runs["movies"] if kind == "wordpiece" else _sentencepiece_run(tmp_path)
  out = tmp_path / "onnx"
  exporters.export("onnx", run_dir, None, str(out))
  assert json.load(open(out / "export.json"))["tokenizer"]["kind"] == kind
  scope = {}
  exec(compile(_documented_lines(out), "docs/exports.md", "exec"), scope)
  batch = scope["batch"]
  vocab = sources.load_task(run_dir, "onnx").vocab
  assert vocab.spec.kind == kind
  texts = ["a warm, funny film", "a dull one"]
  ours = text.pack_sentences(make_tokenizer(vocab), [tf.constant(texts)],
                             batch["input_ids"].shape[1], vocab.cls_id, vocab.sep_id)
  np.testing.assert_array_equal(batch["input_ids"], ours["input_ids"].numpy())
  np.testing.assert_array_equal(batch["attention_mask"], ours["input_mask"].numpy())
  np.testing.assert_array_equal(batch["token_type_ids"], ours["segment_ids"].numpy())
  want = model(ours, training=False)["probabilities"].numpy()
  assert np.abs(scope["probabilities"] - want).max() < 1e-4
