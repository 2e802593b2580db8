"""What a SavedModel serves: token-id signatures and raw-text ones with an in-graph tokenizer
(WordPiece or SentencePiece, set up by the TokenizerSpec of the vocab)."""

from __future__ import annotations

import tensorflow as tf

from electra_tf import features as F
from electra_tf import fileio
from electra_tf.data.tokenizer import make_tokenizer
from electra_tf.data.tokenizer_spec import spec_path
from electra_tf.data.vocab import Vocab
from electra_tf.serving import text as serving_text

ID_KEYS = (F.INPUT_IDS, F.INPUT_MASK, F.SEGMENT_IDS)


def _ids_spec():
  return {k: tf.TensorSpec([None, None], tf.int32, name=k) for k in ID_KEYS}


class _Serving(tf.Module):
  """Holds the Keras model, the vocab asset and the in-graph tokenizer (a tf.Module, so the
  SavedModel tracks its tf.text resources); raw text is tokenized with the vocab's spec."""

  def __init__(self, model, vocab: Vocab, max_seq_length: int):
    super().__init__()
    self.model = model
    self.vocab = tf.saved_model.Asset(vocab.path)
    if fileio.isfile(spec_path(vocab.path)):  # the settings travel with the vocab
      self.tokenizer_spec = tf.saved_model.Asset(spec_path(vocab.path))
    self.tokenizer = make_tokenizer(vocab, tf.int32)
    self.max_seq_length = max_seq_length
    self.max_positions = model.encoder.config.max_position_embeddings

  def _check_ids(self, inputs):
    seq = tf.shape(inputs[F.INPUT_IDS])[1]
    with tf.control_dependencies([tf.debugging.assert_less_equal(
        seq, self.max_positions, message="sequence longer than the model's positions")]):
      return {k: tf.identity(inputs[k]) for k in ID_KEYS}


class ClassifierServing(_Serving):
  """serving_default on ids; classify_text (and classify_text_pair) on raw strings."""

  def __init__(self, model, vocab: Vocab, max_seq_length: int, label_names):
    super().__init__(model, vocab, max_seq_length)
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

  def __init__(self, model, vocab: Vocab, config, null_threshold: float):
    super().__init__(model, vocab, config["max_seq_length"])
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


def signatures(module) -> dict:
  """{signature name: function} of a serving module, serving_default first."""
  sigs = {"serving_default": module.serve_ids}
  if hasattr(module, "serve_words"):  # a TaggerServing (serving/tag_signatures.py)
    sigs["tag_text"] = module.serve_text
    sigs["tag_words"] = module.serve_words
  elif isinstance(module, SquadServing):
    sigs["answer"] = module.serve_text
  elif isinstance(module, ClassifierServing):
    sigs["classify_text"] = module.serve_text
    sigs["classify_text_pair"] = module.serve_text_pair
  else:
    sigs["detect_text"] = module.serve_text
  return sigs
