"""Warmup requests that TF Serving replays when it loads a model (assets.extra)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from electra_tf import features as F
from electra_tf.serving.signatures import ClassifierServing, SquadServing

WARMUP_NAME = "tf_serving_warmup_requests"  # TF Serving's file name


def warmup_inputs(module) -> dict[str, dict]:
  """{signature: example inputs (numpy-able)} replayed by TF Serving at load time."""
  L = min(module.max_seq_length, 128)
  vocab = module.tokenizer.vocab
  token = min(1000, vocab.size - 1)  # any ordinary token; small learned vocabs have few
  ids = [[vocab.cls_id] + [token] * (L - 2) + [vocab.sep_id]]
  requests = {"serving_default": {F.INPUT_IDS: ids, F.INPUT_MASK: [[1] * L],
                                  F.SEGMENT_IDS: [[0] * L]}}
  if hasattr(module, "serve_words"):  # a tagger (serving/tag_signatures.py)
    requests["tag_text"] = {"text": ["Ann Smith flew from Paris to Tokyo on Monday."]}
    requests["tag_words"] = {"words": [["Ann", "Smith", "flew", "to", "Tokyo", ""]],
                             "num_words": [5]}
  elif isinstance(module, SquadServing):
    requests["answer"] = {"question": ["Which river flows through Paris?"],
                          "context": ["Paris lies on the Seine, a river of northern France."]}
  elif isinstance(module, ClassifierServing):
    requests["classify_text"] = {"text": ["A warm, funny and moving film."]}
    requests["classify_text_pair"] = {"text_a": ["A man plays."], "text_b": ["Someone plays."]}
  else:
    requests["detect_text"] = {"text": ["The quick brown fox jumps over the lazy dog."]}
  return requests


def write_warmup(path: str, requests: dict[str, dict], model_name: str = "model") -> None:
  """TFRecord of PredictionLog protos (TF Serving's assets.extra warmup format)."""
  from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

  with tf.io.TFRecordWriter(path) as writer:
    for signature, inputs in requests.items():
      request = predict_pb2.PredictRequest(
          model_spec=model_pb2.ModelSpec(name=model_name, signature_name=signature))
      for key, value in inputs.items():
        dtype = tf.string if np.asarray(value).dtype.kind in "SU" else tf.int32
        request.inputs[key].CopyFrom(tf.make_tensor_proto(value, dtype=dtype))
      log = prediction_log_pb2.PredictionLog(
          predict_log=prediction_log_pb2.PredictLog(request=request))
      writer.write(log.SerializeToString())
