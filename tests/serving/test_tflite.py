"""TFLite export: LiteRT's interpreter on the exported float models gives our task models'
logits on real text within 1e-3; the int8 (dynamic-range) models load and stay close."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from export_runs import real_inputs

from electra_tf.serving import exporters, tflite_export

litert = pytest.importorskip("ai_edge_litert.interpreter")


def _run(path, inputs):
  """Outputs of the serving_default signature, one example at a time (a phone's batch)."""
  runner = litert.Interpreter(model_path=path).get_signature_runner("serving_default")
  rows = [runner(**{k: v[i:i + 1] for k, v in inputs.items()})
          for i in range(len(inputs["input_ids"]))]
  return {k: np.concatenate([r[k] for r in rows]) for k in rows[0]}


# SQuAD with the joint end head and the answerability classifier: every output kind (the
# plain head's two logits are a subset; tests/serving/test_onnx.py converts it).
@pytest.mark.parametrize("name", ["movies", "squad2"])
def test_float_and_int8_models(tiny_runs, tmp_path, name):
  model, run_dir = tiny_runs[name]
  out = str(tmp_path / "tflite")
  exporters.export("tflite", run_dir, None, out)  # as electra-export runs it
  meta = json.load(open(os.path.join(out, "export.json")))
  assert sorted(os.listdir(out)) == sorted(
      ["export.json", "vocab.txt", "vocab.tokenizer.json", "tokenizer_config.json",
       "special_tokens_map.json", tflite_export.FLOAT_NAME, tflite_export.INT8_NAME])
  assert meta["tokenizer"]["lower_case"] is True and "lower_case" not in meta
  inputs = real_inputs(name, n=4)
  want = model({k: tf.constant(v) for k, v in inputs.items()}, training=False)
  got = _run(os.path.join(out, meta["models"]["float32"]), inputs)
  assert sorted(got) == sorted(meta["outputs"])
  for key in meta["outputs"]:
    diff = np.abs(got[key] - want[key].numpy()).max()
    assert diff < 1e-3, (name, key, diff)
  quantized = _run(os.path.join(out, meta["models"]["int8"]), inputs)
  key = meta["outputs"][0]
  assert np.abs(quantized[key] - want[key].numpy()).max() < 0.1, "int8 logits stay close"
  assert os.path.getsize(os.path.join(out, tflite_export.INT8_NAME)) < 0.5 * os.path.getsize(
      os.path.join(out, tflite_export.FLOAT_NAME))
