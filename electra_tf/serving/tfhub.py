"""TF Hub text-encoder SavedModels: a preprocessor and an encoder, as TF Hub's BERT pairs are.

The pair follows TF Hub's "Text embeddings with Transformer encoders" API, so code written
for the BERT and ELECTRA models on TF Hub (and Model Garden's tutorials) runs on ours:

  preprocessor(strings [B]) -> int32 input_word_ids, input_mask, input_type_ids [B, 128]
  preprocessor.tokenize(strings) -> ragged [B, (words), (pieces)] (WordPiece) or
      [B, (pieces)] (SentencePiece, as TF Hub's ALBERT preprocessors)
  preprocessor.bert_pack_inputs([tokens_a, tokens_b], seq_length=L) -> the three inputs
  encoder(inputs, training) -> pooled_output [B, H], sequence_output [B, L, H],
      encoder_outputs (num_layers x [B, L, H]), default (= pooled_output)

ELECTRA has no pooler (its fine-tuning heads read [CLS] directly), so pooled_output is the
final hidden state of [CLS]: sequence_output[:, 0], without BERT's dense + tanh.

The preprocessor tokenizes with our in-graph tokenizer and the vocab's TokenizerSpec (for
either kind), not Model Garden's BertTokenizer: that one ties accent stripping to
lower-casing and NFKC-folds the text, so it cannot give the ids of a cased-but-stripped,
uncased-but-unstripped (Korean, Japanese) or SentencePiece vocab. Packing is Model Garden's
BertPackInputs, as in TF Hub's preprocessors.

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

from electra_tf import atomic, fileio
from electra_tf import features as F
from electra_tf.data.tokenizer import make_tokenizer
from electra_tf.data.tokenizer_spec import SENTENCEPIECE, spec_path
from electra_tf.data.vocab import Vocab
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
    _add_vocab_assets(self, source.vocab)
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


def _add_vocab_assets(obj, vocab: Vocab) -> None:
  """The vocab (vocab_file, or sp_model_file as TF Hub's ALBERTs name it), its spec file and
  do_lower_case, as attributes of the SavedModel root, where TF Hub's BERTs keep them."""
  name = "sp_model_file" if vocab.spec.kind == SENTENCEPIECE else "vocab_file"
  setattr(obj, name, tf.saved_model.Asset(vocab.path))
  if fileio.isfile(spec_path(vocab.path)):
    obj.tokenizer_spec = tf.saved_model.Asset(spec_path(vocab.path))
  obj.do_lower_case = tf.Variable(vocab.spec.lower_case, trainable=False)


def _special_tokens(vocab: Vocab) -> dict[str, int]:
  """What Model Garden's tokenizers' get_special_tokens_dict() returns."""
  return {"vocab_size": vocab.size, "start_of_sequence_id": vocab.cls_id,
          "end_of_segment_id": vocab.sep_id, "padding_id": vocab.pad_id,
          "mask_id": vocab.mask_id}


class _Tokenize(tf.train.Checkpoint):
  """preprocessor.tokenize: strings [B] -> int32 ragged pieces (see the module docstring),
  with get_special_tokens_dict() as TF Hub's preprocessors have it."""

  def __init__(self, vocab: Vocab):
    super().__init__()
    self.tokenizer = make_tokenizer(vocab, tf.int32)
    specials = _special_tokens(vocab)
    self.get_special_tokens_dict = tf.train.Checkpoint()
    self.get_special_tokens_dict.__call__ = tf.function(
        lambda: {k: tf.constant(v, tf.int32) for k, v in specials.items()}, input_signature=[])

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
  def __call__(self, sentences):
    return self.pieces(sentences)

  def pieces(self, sentences):
    if self.tokenizer.spec.kind == SENTENCEPIECE:
      return self.tokenizer.tokenize(sentences)
    return self.tokenizer.tokenize_words(sentences)[0]


class HubPreprocessor(tf.train.Checkpoint):
  """TF Hub's preprocessor API over our tokenizer: callable on strings [B] (one segment,
  packed to `seq_length`), with the `tokenize` and `bert_pack_inputs` subobjects."""

  def __init__(self, vocab: Vocab, seq_length: int = DEFAULT_SEQ_LENGTH):
    from official.nlp.modeling import layers
    from official.nlp.tools.export_tfhub_lib import BertPackInputsSavedModelWrapper

    super().__init__()
    _add_vocab_assets(self, vocab)
    self.tokenize = _Tokenize(vocab)
    specials = _special_tokens(vocab)
    self.bert_pack_inputs = BertPackInputsSavedModelWrapper(layers.BertPackInputs(
        seq_length=seq_length, special_tokens_dict=specials))
    self._pack_ids = (seq_length, vocab.cls_id, vocab.sep_id, vocab.pad_id)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
  def __call__(self, sentences):
    from official.nlp.modeling import layers

    seq_length, cls_id, sep_id, pad_id = self._pack_ids
    return layers.BertPackInputs.bert_pack_inputs(
        [self.tokenize.pieces(sentences)], seq_length=seq_length,
        start_of_sequence_id=cls_id, end_of_segment_id=sep_id, padding_id=pad_id)


def write_preprocessor(vocab: Vocab, path: str, seq_length: int = DEFAULT_SEQ_LENGTH) -> None:
  """The TF Hub preprocessor of `vocab` (our tokenizer with its spec + BertPackInputs)."""
  tf.saved_model.save(HubPreprocessor(vocab, seq_length), path)


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
    write_preprocessor(source.vocab, os.path.join(tmp, PREPROCESSOR_SUBDIR), seq_length)
    write_encoder(source, os.path.join(tmp, ENCODER_SUBDIR))

  return atomic.write_dir(export_dir, write, "saved_model.pb")
