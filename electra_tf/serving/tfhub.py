"""TF Hub text-encoder SavedModels: a preprocessor and an encoder, as TF Hub's BERT pairs are.

The pair follows TF Hub's "Text embeddings with Transformer encoders" API, so code written
for the BERT and ELECTRA models on TF Hub (and Model Garden's tutorials) runs on ours:

  preprocessor(strings [B]) -> int32 input_word_ids, input_mask, input_type_ids [B, 128]
  preprocessor.tokenize(strings) -> ragged [B, (words), (pieces)]
  preprocessor.bert_pack_inputs([tokens_a, tokens_b], seq_length=L) -> the three inputs
  encoder(inputs, training) -> pooled_output [B, H], sequence_output [B, L, H],
      encoder_outputs (num_layers x [B, L, H]), default (= pooled_output)

ELECTRA has no pooler (its fine-tuning heads read [CLS] directly), so pooled_output is the
final hidden state of [CLS]: sequence_output[:, 0], without BERT's dense + tanh.

Example:
  >>> import tensorflow_hub as hub
  >>> import tensorflow_text  # registers the preprocessor's ops
  >>> preprocess = hub.KerasLayer("hub/preprocessor")
  >>> encoder = hub.KerasLayer("hub/encoder", trainable=True)
  >>> encoder(preprocess(tf.constant(["A fine film."])))["pooled_output"]  # [1, H]
"""

from __future__ import annotations

import os

import tensorflow as tf

from electra_tf import atomic
from electra_tf import features as F
from electra_tf.serving.sources import EncoderSource

PREPROCESSOR_SUBDIR = "preprocessor"
ENCODER_SUBDIR = "encoder"
DEFAULT_SEQ_LENGTH = 128  # what TF Hub's BERT preprocessors pack to by default
# TF Hub's input names -> ours.
HUB_INPUTS = {"input_word_ids": F.INPUT_IDS, "input_mask": F.INPUT_MASK,
              "input_type_ids": F.SEGMENT_IDS}


class HubEncoder(tf.train.Checkpoint):
  """The encoder as a reusable SavedModel (TF Hub's __call__, variables, trainable_variables
  and regularization_losses), so `hub.KerasLayer(path, trainable=True)` fine-tunes it.

  A tf.train.Checkpoint, as Model Garden's wrappers are: a plain trackable whose attributes
  are saved as they are (tf.Module's own `variables` property would shadow the API's).
  """

  def __init__(self, source: EncoderSource):
    super().__init__()
    self.encoder = source.encoder
    self.vocab_file = tf.saved_model.Asset(source.vocab_path)
    self.do_lower_case = tf.Variable(source.lower_case, trainable=False)
    self.variables = list(self.encoder.variables)
    self.trainable_variables = list(self.encoder.trainable_variables)
    self.regularization_losses = []  # the encoder has none; the API wants the list
    spec = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in HUB_INPUTS}
    for training in (False, True):
      self.__call__.get_concrete_function(spec, training=training)

  @tf.function
  def __call__(self, inputs, training=False):
    sequence, hidden = self.encoder({ours: inputs[hub] for hub, ours in HUB_INPUTS.items()},
                                    training=training, output_hidden_states=True)
    pooled = sequence[:, 0]  # [CLS]'s final state: ELECTRA has no pooler
    return {"pooled_output": pooled, "default": pooled, "sequence_output": sequence,
            "encoder_outputs": hidden[1:]}


def write_preprocessor(vocab_path: str, lower_case: bool, path: str,
                       seq_length: int = DEFAULT_SEQ_LENGTH) -> None:
  """Model Garden's TF Hub preprocessor (BertTokenizer + BertPackInputs) over `vocab_path`."""
  from official.nlp.tools import export_tfhub_lib

  model = export_tfhub_lib.create_preprocessing(
      vocab_file=vocab_path, do_lower_case=lower_case, tokenize_with_offsets=False,
      default_seq_length=seq_length)
  model.save(path, include_optimizer=False, save_format="tf")


def write_encoder(source: EncoderSource, path: str) -> None:
  """The HubEncoder, with a serving_default signature for TF Serving and saved_model_cli
  (signatures cannot return lists: encoder_outputs become encoder_outputs_<layer>)."""
  module = HubEncoder(source)

  @tf.function(input_signature=[{name: tf.TensorSpec([None, None], tf.int32, name=name)
                                 for name in HUB_INPUTS}])
  def serve(inputs):
    out = module(inputs, training=False)
    layers = {f"encoder_outputs_{i}": h for i, h in enumerate(out.pop("encoder_outputs"))}
    return {**out, **layers}

  tf.saved_model.save(module, path, signatures={"serving_default": serve})


def export(source: EncoderSource, export_dir: str, seq_length: int = DEFAULT_SEQ_LENGTH) -> str:
  """Writes export_dir/preprocessor and export_dir/encoder, both or neither."""

  def write(tmp: str) -> None:
    write_preprocessor(source.vocab_path, source.lower_case,
                       os.path.join(tmp, PREPROCESSOR_SUBDIR), seq_length)
    write_encoder(source, os.path.join(tmp, ENCODER_SUBDIR))

  return atomic.write_dir(export_dir, write, "saved_model.pb")
