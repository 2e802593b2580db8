"""Versioned SavedModels for TF Serving: token-id and raw-text signatures, warmup requests."""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid

import tensorflow as tf

from electra_tf import features as F
from electra_tf.data.tokenizer import WordPieceTokenizer
from electra_tf.errors import UserError
from electra_tf.export import serving_text

WARMUP_NAME = "tf_serving_warmup_requests"
ID_KEYS = (F.INPUT_IDS, F.INPUT_MASK, F.SEGMENT_IDS)


def _ids_spec():
  return {k: tf.TensorSpec([None, None], tf.int32, name=k) for k in ID_KEYS}


class _Serving(tf.Module):
  """Holds the Keras model, the vocab asset and the in-graph tokenizer."""

  def __init__(self, model, vocab_path: str, lower_case: bool, max_seq_length: int):
    super().__init__()
    self.model = model
    self.vocab = tf.saved_model.Asset(vocab_path)
    self.tokenizer = WordPieceTokenizer(vocab_path, lower_case=lower_case, dtype=tf.int32)
    self._fast = self.tokenizer._tokenizer  # a tracked tf.text resource
    self.max_seq_length = max_seq_length
    self.max_positions = model.encoder.config.max_position_embeddings

  def _check_ids(self, inputs):
    seq = tf.shape(inputs[F.INPUT_IDS])[1]
    with tf.control_dependencies([tf.debugging.assert_less_equal(
        seq, self.max_positions, message="sequence longer than the model's positions")]):
      return {k: tf.identity(inputs[k]) for k in ID_KEYS}


class ClassifierServing(_Serving):
  """serving_default on ids; classify_text (and classify_text_pair) on raw strings."""

  def __init__(self, model, vocab_path, lower_case, max_seq_length, label_names):
    super().__init__(model, vocab_path, lower_case, max_seq_length)
    self.label_names = tf.constant(list(label_names or []), tf.string)
    self.regression = not label_names

  def _outputs(self, inputs):
    out = self.model(inputs, training=False)
    if self.regression:
      return {"predictions": out["predictions"], "logits": out["logits"]}
    best = tf.argmax(out["probabilities"], -1, output_type=tf.int32)
    return {"logits": out["logits"], "probabilities": out["probabilities"], "class_ids": best,
            "labels": tf.gather(self.label_names, best)}

  @tf.function(input_signature=[_ids_spec()])
  def serve_ids(self, inputs):
    return self._outputs(self._check_ids(inputs))

  def _text(self, texts):
    vocab = self.tokenizer.vocab
    return self._outputs(serving_text.pack_sentences(
        self.tokenizer, texts, self.max_seq_length, vocab.cls_id, vocab.sep_id))

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
  def serve_text(self, text):
    return self._text([text])

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                tf.TensorSpec([None], tf.string, name="text_b")])
  def serve_text_pair(self, text_a, text_b):
    return self._text([text_a, text_b])


class SquadServing(_Serving):
  """serving_default on ids (logits); answer on raw question/context strings."""

  def __init__(self, model, vocab_path, lower_case, config, null_threshold: float):
    super().__init__(model, vocab_path, lower_case, config["max_seq_length"])
    self.config = dict(config)
    self.null_threshold = null_threshold

  @tf.function(input_signature=[_ids_spec()])
  def serve_ids(self, inputs):
    out = self.model(self._check_ids(inputs), training=False)
    return {k: v for k, v in out.items()}

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="question"),
                                tf.TensorSpec([None], tf.string, name="context")])
  def serve_text(self, question, context):
    c, vocab = self.config, self.tokenizer.vocab
    windows = serving_text.SquadWindows(
        self.tokenizer, question, context, max_seq_length=c["max_seq_length"],
        doc_stride=c["doc_stride"], max_query_length=c["max_query_length"],
        cls_id=vocab.cls_id, sep_id=vocab.sep_id)
    out = self.model(windows.inputs, training=False)
    spans = serving_text.best_spans(windows, out, n_best_size=c["n_best_size"],
                                    max_answer_length=c["max_answer_length"])
    found = spans["char_start"] >= 0
    if "impossible_logit" in out:
      odds = tf.math.unsorted_segment_min(out["impossible_logit"], windows.example,
                                          windows.num_examples)
    else:
      odds = spans["null_score"] - tf.where(found, spans["score"], -1e4)
    answered = found
    if c.get("version_2"):
      answered = found & ~(odds > self.null_threshold)
    length = tf.where(answered, spans["char_end"] - spans["char_start"], 0)
    start = tf.where(answered, spans["char_start"], 0)
    answer = tf.strings.substr(context, tf.cast(start, tf.int32), tf.cast(length, tf.int32),
                               unit="UTF8_CHAR")
    return {"answer": answer, "start": tf.where(answered, spans["char_start"], -1),
            "end": tf.where(answered, spans["char_end"], -1),
            "score": tf.where(found, spans["score"], 0.0), "no_answer_odds": odds}


class PretrainingServing(_Serving):
  """The discriminator: replaced-token probabilities and the encoder's hidden states."""

  def _outputs(self, inputs):
    hidden = self.model.encoder(inputs, training=False)
    logits = self.model.head(hidden)
    return {"replaced_probability": tf.sigmoid(logits), "replaced_logits": logits,
            "hidden_states": tf.cast(hidden, tf.float32)}

  @tf.function(input_signature=[_ids_spec()])
  def serve_ids(self, inputs):
    return self._outputs(self._check_ids(inputs))

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
  def serve_text(self, text):
    vocab = self.tokenizer.vocab
    inputs = serving_text.pack_sentences(self.tokenizer, [text], self.max_seq_length,
                                         vocab.cls_id, vocab.sep_id)
    return {**self._outputs(inputs), **inputs}


def next_version(export_dir: str) -> int:
  """One more than the highest integer version directory in `export_dir` (1 if none)."""
  versions = [int(d) for d in os.listdir(export_dir) if re.fullmatch(r"\d+", d)] \
      if os.path.isdir(export_dir) else []
  return max(versions, default=0) + 1


def _signatures(module) -> dict:
  sigs = {"serving_default": module.serve_ids}
  if isinstance(module, SquadServing):
    sigs["answer"] = module.serve_text
  elif isinstance(module, ClassifierServing):
    sigs["classify_text"] = module.serve_text
    sigs["classify_text_pair"] = module.serve_text_pair
  else:
    sigs["detect_text"] = module.serve_text
  return sigs


def warmup_inputs(module) -> dict[str, dict]:
  """{signature: example inputs (numpy-able)} replayed by TF Serving at load time."""
  L = min(module.max_seq_length, 128)
  ids = [[module.tokenizer.vocab.cls_id] + [1000] * (L - 2) + [module.tokenizer.vocab.sep_id]]
  requests = {"serving_default": {F.INPUT_IDS: ids, F.INPUT_MASK: [[1] * L],
                                  F.SEGMENT_IDS: [[0] * L]}}
  if isinstance(module, SquadServing):
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
        dtype = tf.string if isinstance(value[0], str) else tf.int32
        request.inputs[key].CopyFrom(tf.make_tensor_proto(value, dtype=dtype))
      log = prediction_log_pb2.PredictionLog(
          predict_log=prediction_log_pb2.PredictLog(request=request))
      writer.write(log.SerializeToString())


def save(module, export_dir: str) -> str:
  """Writes `module` as `export_dir/<next version>/`, complete or not at all."""
  os.makedirs(export_dir, exist_ok=True)
  tmp = os.path.join(export_dir, f".tmp-{uuid.uuid4().hex[:8]}")
  try:
    tf.saved_model.save(module, tmp, signatures=_signatures(module))
    os.makedirs(os.path.join(tmp, "assets.extra"))
    write_warmup(os.path.join(tmp, "assets.extra", WARMUP_NAME), warmup_inputs(module))
    version = next_version(export_dir)
    final = os.path.join(export_dir, str(version))
    os.rename(tmp, final)  # fails rather than replace a version made meanwhile
    return final
  finally:
    shutil.rmtree(tmp, ignore_errors=True)


def serving_module(checkpoint: str, task: str):
  """The serving module of a fine-tuned model directory (or output_dir), or for
  task "pretraining" of any checkpoint convert.load reads."""
  if task == "pretraining":
    from electra_tf.data.vocab import builtin_vocab_path
    from electra_tf.export import convert

    loaded = convert.load(checkpoint)
    if loaded.discriminator is None:
      raise UserError(f"{checkpoint} holds no discriminator to export for pretraining")
    vocab = loaded.vocab_path or builtin_vocab_path()
    return PretrainingServing(loaded.discriminator, vocab, True, 128)
  from electra_tf.training.finetuning import BEST_SUBDIR, load_finetuned

  model_dir = os.path.join(checkpoint, BEST_SUBDIR)  # an output_dir holds its best model there
  if not os.path.isdir(model_dir):
    model_dir = checkpoint
  model, record = load_finetuned(model_dir)
  if task and task != record["task"]:
    raise UserError(f"{checkpoint} was fine-tuned for {record['task']}, not {task}")
  path = os.path.join(model_dir, "vocab.txt")
  config = record["finetune"]
  lower_case = record.get("lower_case", True)
  if record["task"].startswith("squad"):
    threshold = (record.get("eval") or {}).get("best_f1_thresh", 0.0)
    return SquadServing(model, path, lower_case,
                        {**config, "version_2": record["task"] == "squad_v2.0"}, threshold)
  return ClassifierServing(model, path, lower_case, config["max_seq_length"],
                           record["spec"]["label_names"])


def export(checkpoint: str, task: str | None, export_dir: str) -> str:
  """Exports a new version of `checkpoint` to `export_dir`; returns its directory."""
  return save(serving_module(checkpoint, task), export_dir)


def export_finetuned(best_dir: str, export_dir: str) -> str:
  return export(best_dir, None, export_dir)


def describe(path: str) -> str:
  """A short JSON description of an exported SavedModel's signatures (for the CLI)."""
  loaded = tf.saved_model.load(path)
  return json.dumps({name: sorted(fn.structured_outputs)
                     for name, fn in loaded.signatures.items()}, indent=1)
