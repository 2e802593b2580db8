"""What a SavedModel serves: token-id signatures and raw-text ones with an in-graph tokenizer
(WordPiece or SentencePiece, set up by the TokenizerSpec of the vocab)."""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np
import tensorflow as tf

from electra_tf import features as F
from electra_tf import fileio
from electra_tf.data.tokenizer import make_tokenizer
from electra_tf.data.tokenizer_spec import spec_path
from electra_tf.data.vocab import Vocab
from electra_tf.errors import UserError
from electra_tf.model import fused, serving_form
from electra_tf.serving import text as serving_text

ID_KEYS = (F.INPUT_IDS, F.INPUT_MASK, F.SEGMENT_IDS)


def _ids_spec():
  return {k: tf.TensorSpec([None, None], tf.int32, name=k) for k in ID_KEYS}


SERVING_DTYPES = ("float32", "bfloat16")


@dataclasses.dataclass(frozen=True)
class ServingOptions:
  """How the signatures run (docs/serving.md, "Performance").

  Attributes:
    length_buckets: raw-text signatures pad a batch to its longest sequence when empty;
      else to the smallest of these lengths that holds it (max_seq_length is always one),
      so the model sees a few shapes only (`(max_seq_length,)` pads every batch to it).
    dtype: "bfloat16" multiplies by bfloat16 copies of the transformer blocks' kernels
      (a product's inputs and result rounded to bfloat16, its sums in float32); pays on
      CPUs with bfloat16 matrix instructions (AMX, AVX512-BF16). "float32": exact.
    jit_compile: the model runs as an XLA-compiled function (TF Serving needs
      --xla_cpu_compilation_enabled=true); each new input shape compiles once, so pair it
      with length_buckets.
  """
  length_buckets: tuple[int, ...] = ()
  dtype: str = "float32"
  jit_compile: bool = False

  def __post_init__(self):
    if self.dtype not in SERVING_DTYPES:
      raise UserError(f"unknown serving dtype {self.dtype!r}; choose one of {SERVING_DTYPES}")
    if any(int(b) < 2 for b in self.length_buckets):
      raise UserError(f"length buckets {list(self.length_buckets)} must each be 2 or more "
                      "([CLS] and [SEP])")


class _Serving(tf.Module):
  """Holds the Keras model, the vocab asset and the in-graph tokenizer (a tf.Module, so the
  SavedModel tracks its tf.text resources); raw text is tokenized with the vocab's spec.
  The model runs in the transformer blocks' serving form (fused.serving_graph)."""

  def __init__(self, model, vocab: Vocab, max_seq_length: int,
               options: ServingOptions | None = None):
    super().__init__()
    self.model = model
    self.vocab = tf.saved_model.Asset(vocab.path)
    if fileio.isfile(spec_path(vocab.path)):  # the settings travel with the vocab
      self.tokenizer_spec = tf.saved_model.Asset(spec_path(vocab.path))
    self.tokenizer = make_tokenizer(vocab, tf.int32)
    self.max_seq_length = max_seq_length
    self.max_positions = model.encoder.config.max_position_embeddings
    self.options = options or ServingOptions()
    if max_seq_length > self.max_positions:
      raise UserError(f"max_seq_length {max_seq_length} is more than the model's "
                      f"{self.max_positions} positions")
    # padded_length reads a bucket at or past max_seq_length as max_seq_length.
    self.buckets = tuple(int(b) for b in self.options.length_buckets)
    self.kernel_copies = []
    if self.options.dtype == "bfloat16":
      dtypes = {block.compute_dtype for block in model.encoder.blocks}
      if dtypes != {"float32"}:
        raise UserError(f"--serving_dtype=bfloat16 needs a float32 model; this one computes "
                        f"in {', '.join(sorted(dtypes))}")
      self.kernel_copies = [
          tf.Variable(tf.cast(tf.reshape(layer.kernel, [-1, int(np.prod(layer.bias.shape))]),
                              tf.bfloat16), trainable=False, name="bfloat16_kernel")
          for layer in self._projections()]
    if self.options.jit_compile:
      self._compiled = tf.function(self._serving_forward, jit_compile=True)

  def _projections(self) -> list:
    return [layer for block in self.model.encoder.blocks
            for layer in serving_form.projections(block)]

  def _serving_graph(self) -> contextlib.AbstractContextManager:
    """Where the model is called: its blocks trace their serving form (with the bfloat16
    kernel copies of a bfloat16 export)."""
    copies = {layer.kernel.ref(): copy
              for layer, copy in zip(self._projections(), self.kernel_copies)}
    return fused.serving_graph(copies)

  def _forward(self, inputs) -> dict:
    return self.model(inputs, training=False)

  def _serving_forward(self, inputs) -> dict:
    with self._serving_graph():
      return self._forward(inputs)

  def _run(self, inputs) -> dict:
    """The model's outputs on int32 [B, L] inputs, in its serving form (XLA-compiled with
    jit_compile)."""
    if self.options.jit_compile:
      return self._compiled(inputs)
    return self._serving_forward(inputs)

  def _check_ids(self, inputs):
    seq = tf.shape(inputs[F.INPUT_IDS])[1]
    with tf.control_dependencies([tf.debugging.assert_less_equal(
        seq, self.max_positions, message="sequence longer than the model's positions")]):
      return {k: tf.identity(inputs[k]) for k in ID_KEYS}


class ClassifierServing(_Serving):
  """serving_default on ids; classify_text (and classify_text_pair) on raw strings."""

  def __init__(self, model, vocab: Vocab, max_seq_length: int, label_names,
               options: ServingOptions | None = None):
    super().__init__(model, vocab, max_seq_length, options)
    self.label_names = tf.constant(list(label_names or []), tf.string)
    self.regression = not label_names

  def _outputs(self, inputs):
    out = self._run(inputs)
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
        self.tokenizer, texts, self.max_seq_length, vocab.cls_id, vocab.sep_id, self.buckets))

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
  def serve_text(self, text):
    return self._text([text])

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                tf.TensorSpec([None], tf.string, name="text_b")])
  def serve_text_pair(self, text_a, text_b):
    return self._text([text_a, text_b])


class SquadServing(_Serving):
  """serving_default on ids (logits); answer on raw question/context strings."""

  def __init__(self, model, vocab: Vocab, config, null_threshold: float,
               options: ServingOptions | None = None):
    super().__init__(model, vocab, config["max_seq_length"], options)
    self.config = dict(config)
    self.null_threshold = null_threshold

  @tf.function(input_signature=[_ids_spec()])
  def serve_ids(self, inputs):
    out = self._run(self._check_ids(inputs))
    return {k: v for k, v in out.items()}

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="question"),
                                tf.TensorSpec([None], tf.string, name="context")])
  def serve_text(self, question, context):
    c, vocab = self.config, self.tokenizer.vocab
    windows = serving_text.SquadWindows(
        self.tokenizer, question, context, max_seq_length=c["max_seq_length"],
        doc_stride=c["doc_stride"], max_query_length=c["max_query_length"],
        cls_id=vocab.cls_id, sep_id=vocab.sep_id, buckets=self.buckets)
    out = self._run(windows.inputs)
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

  def _forward(self, inputs):
    hidden = self.model.encoder(inputs, training=False)
    return {"hidden": hidden, "logits": self.model.head(hidden)}

  def _outputs(self, inputs):
    out = self._run(inputs)
    logits = out["logits"]
    return {"replaced_probability": tf.sigmoid(logits), "replaced_logits": logits,
            "hidden_states": tf.cast(out["hidden"], tf.float32)}

  @tf.function(input_signature=[_ids_spec()])
  def serve_ids(self, inputs):
    return self._outputs(self._check_ids(inputs))

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
  def serve_text(self, text):
    vocab = self.tokenizer.vocab
    inputs = serving_text.pack_sentences(self.tokenizer, [text], self.max_seq_length,
                                         vocab.cls_id, vocab.sep_id, self.buckets)
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
