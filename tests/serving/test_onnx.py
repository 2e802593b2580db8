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
