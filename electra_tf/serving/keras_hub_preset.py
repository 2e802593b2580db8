"""keras-hub preset directories: an encoder that keras_hub.models.ElectraBackbone.from_preset
and ElectraTokenizer.from_preset load, written without Keras 3 (json + h5py).

  config.json                    ElectraBackbone's class and constructor arguments
  metadata.json                  versions and parameter count
  model.weights.h5               the weights, in Keras 3's layout for the backbone
  tokenizer.json                 ElectraTokenizer's class and arguments
  assets/tokenizer/vocabulary.txt

The tokenizer's lowercase, strip_accents and split_on_cjk are the vocab's TokenizerSpec.
keras-hub's ElectraTokenizer is WordPiece only: a SentencePiece vocab is refused. Its text
handling is not BERT's in every detail (docs/exports.md has the measured differences).

Two differences from our encoder, both keras-hub's:
- ElectraBackbone's GELU is the tanh approximation; ours (the paper's, BERT's) is the exact
  erf form. Hidden states differ by what docs/exports.md measures.
- ElectraBackbone has a pooler (dense + tanh over [CLS]) that ELECTRA does not train; it is
  written as the identity, so its pooled_output is tanh of our [CLS] state.
"""

from __future__ import annotations

import json
import os

import numpy as np

from electra_tf import atomic, fileio
from electra_tf.checkpoints import names
from electra_tf.data.tokenizer_spec import WORDPIECE
from electra_tf.errors import UserError
from electra_tf.serving.sources import EncoderSource

CONFIG_FILE = "config.json"
METADATA_FILE = "metadata.json"
WEIGHTS_FILE = "model.weights.h5"
TOKENIZER_FILE = "tokenizer.json"
VOCAB_FILE = os.path.join("assets", "tokenizer", "vocabulary.txt")
KERAS_VERSION = "3.15.1"  # the Keras and keras-hub these presets were tested with
KERAS_HUB_VERSION = "0.32.0"

# Our canonical (TF1) names -> the backbone's layer paths in model.weights.h5. Keras 3 names
# a functional model's layers by class and order (dense, dense_1, ...), not by their names.
_EMBEDDINGS = {
    "word_embeddings": "reversible_embedding/vars/0",
    "position_embeddings": "position_embedding/vars/0",
    "token_type_embeddings": "embedding/vars/0",
    "LayerNorm/gamma": "layer_normalization/vars/0",
    "LayerNorm/beta": "layer_normalization/vars/1",
}
_BLOCK = {
    "attention/self/query": "_self_attention_layer/query_dense",
    "attention/self/key": "_self_attention_layer/key_dense",
    "attention/self/value": "_self_attention_layer/value_dense",
    "attention/output/dense": "_self_attention_layer/output_dense",
    "attention/output/LayerNorm": "_self_attention_layer_norm",
    "intermediate/dense": "_feedforward_intermediate_dense",
    "output/dense": "_feedforward_output_dense",
    "output/LayerNorm": "_feedforward_layer_norm",
}
_LEAF = {"kernel": "0", "gamma": "0", "bias": "1", "beta": "1"}


def _keras_path(name: str) -> str:
  """model.weights.h5 path of the canonical tensor `name` (see names.encoder_bindings)."""
  scope = names.SCOPES["discriminator"]
  if name.startswith(names.EMBEDDINGS + "/"):
    return "layers/" + _EMBEDDINGS[name[len(names.EMBEDDINGS) + 1:]]
  if name.startswith(f"{scope}/embeddings_project/"):
    return f"layers/dense/vars/{_LEAF[name.rsplit('/', 1)[1]]}"
  layer, rest = name[len(f"{scope}/encoder/layer_"):].split("/", 1)
  part, leaf = rest.rsplit("/", 1)
  block = "transformer_encoder" + (f"_{layer}" if layer != "0" else "")
  return f"layers/{block}/{_BLOCK[part]}/vars/{_LEAF[leaf]}"


def _class(name: str, module: str, config: dict, dtype: str) -> dict:
  policy = {"module": "keras", "class_name": "DTypePolicy", "config": {"name": dtype},
            "registered_name": None}
  return {"module": f"keras_hub.src.models.electra.{module}", "class_name": name,
          "config": {"trainable": True, "dtype": policy, **config},
          "registered_name": f"keras_hub>{name}"}


def write_weights(source: EncoderSource, path: str) -> int:
  """model.weights.h5 of `source.encoder` in ElectraBackbone's layout; returns the number of
  parameters written (the pooler's included)."""
  import h5py

  config = source.encoder.config
  tensors = {_keras_path(b.name): np.asarray(b.variable.numpy(), np.float32)
             for b in names.encoder_bindings(source.encoder, "discriminator")}
  pooler = "dense_1" if config.embedding_size != config.hidden_size else "dense"
  tensors[f"layers/{pooler}/vars/0"] = np.eye(config.hidden_size, dtype=np.float32)
  tensors[f"layers/{pooler}/vars/1"] = np.zeros(config.hidden_size, np.float32)
  with h5py.File(path, "w") as f:
    for key, value in sorted(tensors.items()):
      f.create_dataset(key, data=value)
  return sum(v.size for v in tensors.values())


def tokenizer_config(source: EncoderSource) -> dict:
  """ElectraTokenizer's tokenizer.json entry for `source`'s vocab and spec.

  Raises:
    UserError: a SentencePiece vocab, which keras-hub's ElectraTokenizer cannot hold.
  """
  spec = source.vocab.spec
  if spec.kind != WORDPIECE:
    raise UserError(
        f"--format=keras_hub: keras-hub's ElectraTokenizer is WordPiece only and this model's "
        f"vocab is {spec.kind} ({source.vocab.path}); export it with --format=onnx or "
        "--format=saved_model, or pretrain with a WordPiece vocab")
  return _class("ElectraTokenizer", "electra_tokenizer", {
      "name": "electra_tokenizer", "config_file": TOKENIZER_FILE, "vocabulary": None,
      "sequence_length": None, "lowercase": spec.lower_case,
      "strip_accents": spec.strip_accents, "split": True, "split_on_cjk": spec.split_cjk,
      "suffix_indicator": "##", "oov_token": "[UNK]", "special_tokens": None,
      "special_tokens_in_strings": False}, "int32")


def export(source: EncoderSource, export_dir: str) -> str:
  """Writes a preset directory for `source` into `export_dir`, all or nothing."""
  tokenizer = tokenizer_config(source)  # refuses a SentencePiece vocab before any work
  config = source.encoder.config
  backbone = _class("ElectraBackbone", "electra_backbone", {
      "name": "electra_backbone", "vocab_size": config.vocab_size,
      "num_layers": config.num_layers, "num_heads": config.num_heads,
      "hidden_dim": config.hidden_size, "embedding_dim": config.embedding_size,
      "intermediate_dim": config.intermediate_size, "dropout": config.dropout_rate,
      "max_sequence_length": config.max_position_embeddings,
      "num_segments": config.type_vocab_size}, "float32")

  def write(tmp: str) -> None:
    count = write_weights(source, os.path.join(tmp, WEIGHTS_FILE))
    metadata = {"keras_version": KERAS_VERSION, "keras_hub_version": KERAS_HUB_VERSION,
                "parameter_count": int(count), "tasks": [], "exported_by": "electra_tf"}
    for name, value in ((CONFIG_FILE, backbone), (TOKENIZER_FILE, tokenizer),
                        (METADATA_FILE, metadata)):
      fileio.write_text(os.path.join(tmp, name), json.dumps(value, indent=4))
    fileio.makedirs(os.path.dirname(os.path.join(tmp, VOCAB_FILE)))
    fileio.copy(source.vocab.path, os.path.join(tmp, VOCAB_FILE))

  return atomic.write_dir(export_dir, write, CONFIG_FILE)
