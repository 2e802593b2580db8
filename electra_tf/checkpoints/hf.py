"""Hugging Face ELECTRA / BERT folders: read into canonical tensors, write from them."""

from __future__ import annotations

import io
import json
import os

import numpy as np

from electra_tf import fileio
from electra_tf.checkpoints import hf_tokenizer, names
from electra_tf.checkpoints.source import Source, as_float32, find_vocab, pretrain_config
from electra_tf.config import ConfigError, EncoderConfig
from electra_tf.data.vocab import Vocab
from electra_tf.errors import UserError, check_field_types

CONFIG_NAME = "config.json"  # Hugging Face's name, not ours (filenames.CONFIG_NAME)
SAFETENSORS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
TORCH_BIN = "pytorch_model.bin"
MODEL_TYPES = ("electra", "bert")
# Config values our encoder implements; anything else would load but compute another function.
# "gelu" and "gelu_python" are both the exact erf form.
_SUPPORTED = {"hidden_act": ("gelu", "gelu_python"), "position_embedding_type": ("absolute",),
              "is_decoder": (False,), "add_cross_attention": (False,)}


def is_hf_folder(path: str) -> bool:
  """A folder with a config.json that names a model_type (any architecture)."""
  config = fileio.join(path, CONFIG_NAME)
  if not fileio.isfile(config):
    return False
  try:
    return "model_type" in json.loads(fileio.read_text(config))
  except (OSError, ValueError):
    return False


def read_config(path: str) -> dict:
  """config.json of an HF folder, checked to be ELECTRA or BERT with supported options."""
  file = fileio.join(path, CONFIG_NAME)
  try:
    config = json.loads(fileio.read_text(file))
  except (OSError, ValueError) as exc:
    raise UserError(f"cannot read {file}: {exc}") from exc
  model_type = config.get("model_type")
  if model_type not in MODEL_TYPES:
    archs = ", ".join(config.get("architectures") or []) or "no architectures listed"
    raise UserError(f"{path} holds a {model_type!r} model ({archs}); only ELECTRA and BERT "
                    "checkpoints (model_type electra or bert) can be converted")
  for key, allowed in _SUPPORTED.items():
    value = config.get(key, allowed[0])
    if value not in allowed:
      raise UserError(f"{path}: {key}={value!r} is not supported (only {allowed[0]!r}); "
                      "this encoder implements post-LayerNorm BERT blocks with exact GELU "
                      "and absolute positions")
  return config


def _read_safetensors(file: str) -> dict[str, np.ndarray]:
  # ml_dtypes (a TensorFlow dependency) teaches numpy bfloat16, common in newer checkpoints.
  import ml_dtypes  # noqa: F401
  from safetensors import SafetensorError
  from safetensors.numpy import load, load_file

  try:
    return load(fileio.read_bytes(file)) if fileio.is_remote(file) else load_file(file)
  except (OSError, SafetensorError) as exc:
    raise UserError(f"cannot read {file}: {exc}") from exc


def _read_torch_bin(file: str) -> dict[str, np.ndarray]:
  try:
    import torch
  except ImportError as exc:
    raise UserError(f"{file} is a PyTorch pickle, which needs torch to read; install torch or "
                    f"save the model with safetensors ({SAFETENSORS})") from exc
  try:
    source = io.BytesIO(fileio.read_bytes(file)) if fileio.is_remote(file) else file
    state = torch.load(source, map_location="cpu", weights_only=True)
  except Exception as exc:  # torch raises many types for a bad pickle
    raise UserError(f"cannot read {file}: {exc}") from exc
  return {k: v.float().numpy() if v.is_floating_point() else v.numpy()
          for k, v in state.items()}


def read_weights(path: str) -> dict[str, np.ndarray]:
  """All tensors of an HF folder: safetensors (single or sharded), else pytorch_model.bin."""
  single = fileio.join(path, SAFETENSORS)
  if fileio.isfile(single):
    return _read_safetensors(single)
  index = fileio.join(path, SAFETENSORS_INDEX)
  if fileio.isfile(index):
    shards = sorted(set(json.loads(fileio.read_text(index))["weight_map"].values()))
    out = {}
    for shard in shards:
      out.update(_read_safetensors(fileio.join(path, shard)))
    return out
  if fileio.isfile(fileio.join(path, TORCH_BIN)):
    return _read_torch_bin(fileio.join(path, TORCH_BIN))
  raise UserError(f"{path} has a config.json but no weights ({SAFETENSORS} or {TORCH_BIN})")


# EncoderConfig field -> (HF config key, default or None when required).
_HF_KEYS = {
    "vocab_size": ("vocab_size", None), "hidden_size": ("hidden_size", None),
    "num_layers": ("num_hidden_layers", None), "num_heads": ("num_attention_heads", None),
    "intermediate_size": ("intermediate_size", None),
    "embedding_size": ("embedding_size", 128),
    "max_position_embeddings": ("max_position_embeddings", 512),
    "type_vocab_size": ("type_vocab_size", 2), "dropout_rate": ("hidden_dropout_prob", 0.1),
    "attention_dropout_rate": ("attention_probs_dropout_prob", 0.1),
    "initializer_range": ("initializer_range", 0.02), "layer_norm_eps": ("layer_norm_eps", 1e-12),
}


def encoder_config(config: dict, where: str = CONFIG_NAME) -> EncoderConfig:
  """Our EncoderConfig for an HF ElectraConfig / BertConfig dict (BERT: E = H).

  Raises:
    KeyError: a required size is missing.
    UserError: a value has the wrong type (named by its HF key, in `where`).
  """
  if config["model_type"] == "bert":
    config = {**config, "embedding_size": config["hidden_size"]}
  values = {field: config[key] if default is None else config.get(key, default)
            for field, (key, default) in _HF_KEYS.items()}
  check_field_types(EncoderConfig, values, where,
                    display={field: key for field, (key, _) in _HF_KEYS.items()})
  try:
    return EncoderConfig(**values)
  except ConfigError as exc:  # name the value as the file does
    field, rest = str(exc).split(" ", 1)
    raise ConfigError(f"{_HF_KEYS.get(field, (field,))[0]} {rest}") from None


def _check_tied_head(path: str, config: dict, weights: dict, tensors: dict) -> None:
  """Our generator always ties its output layer to the word embeddings; refuse an untied one."""
  head = weights.get("generator_lm_head.weight")
  word = tensors.get(f"{names.EMBEDDINGS}/word_embeddings")
  if head is None or word is None:
    return
  if head.shape != word.shape or not np.allclose(head, word, atol=1e-6):
    tie = config.get("tie_word_embeddings", True)
    raise UserError(f"{path}: generator_lm_head.weight differs from the word embeddings "
                    f"(tie_word_embeddings={tie}); only generators with a tied output layer "
                    "are supported")


def read_hf(path: str) -> Source:
  """Read an HF ELECTRA or BERT folder.

  Which network it is comes from the tensors: generator heads make an ElectraForMaskedLM
  a generator; everything else (ElectraForPreTraining, ElectraModel, BertModel, BertFor*)
  is read as a discriminator, whose head may be absent.
  """
  config = read_config(path)
  model_type = config["model_type"]
  weights = read_weights(path)
  prefix = f"{model_type}."
  if not any(k.startswith(prefix) for k in weights):
    prefix = ""  # ElectraModel / BertModel saved on their own carry no prefix
  is_generator = model_type == "electra" and any(
      k.startswith(("generator_predictions.", "generator_lm_head.")) for k in weights)
  network = "generator" if is_generator else "discriminator"
  tensors, source_names, extra = {}, {}, 0
  for key, value in weights.items():
    local = key[len(prefix):] if prefix and key.startswith(prefix) else key
    mapped = names.hf_to_canonical(local, network)
    if mapped is None:
      extra += key != "generator_lm_head.weight"  # checked below, not ignored
      continue
    name, transpose = mapped
    array = as_float32(key, value)
    tensors[name] = np.ascontiguousarray(array.T) if transpose else array
    source_names[name] = key
  if f"{names.EMBEDDINGS}/word_embeddings" not in tensors:
    raise UserError(f"{path} has no {prefix}embeddings.word_embeddings.weight tensor: its "
                    f"weights are not an {model_type.upper()} encoder")
  _check_tied_head(path, config, weights, tensors)
  try:
    encoder = encoder_config(config, fileio.join(path, CONFIG_NAME))
  except (ConfigError, KeyError) as exc:
    raise UserError(f"{fileio.join(path, CONFIG_NAME)}: {exc}") from exc
  if is_generator:
    model_config = pretrain_config(encoder, encoder, objective="mlm")
  else:
    model_config = pretrain_config(encoder)
  vocab_path, notes = find_vocab(path), []
  if vocab_path is None:
    vocab_path = hf_tokenizer.wordpiece_from_tokenizer_json(path)
    if vocab_path:
      notes.append(f"the vocab came from {hf_tokenizer.TOKENIZER_JSON} (no vocab.txt)")
  return Source("hf", path, model_config, has_generator=is_generator,
                has_discriminator=not is_generator, tensors=tensors, names=source_names,
                extra=extra, vocab_path=vocab_path, notes=notes,
                rename=lambda name: _hf_name(name, prefix))


def _hf_name(name: str, prefix: str) -> str:
  """The name a canonical tensor has (or would have had) in this folder."""
  hf_name, _ = names.canonical_to_hf(name)
  if hf_name.startswith("electra."):
    return prefix + hf_name[len("electra."):]
  return hf_name


def hf_config(encoder: EncoderConfig, architecture: str) -> dict:
  """config.json for an HF Electra* model of `encoder`'s sizes."""
  return {
      "architectures": [architecture], "model_type": "electra",
      "vocab_size": encoder.vocab_size, "embedding_size": encoder.embedding_size,
      "hidden_size": encoder.hidden_size, "num_hidden_layers": encoder.num_layers,
      "num_attention_heads": encoder.num_heads, "intermediate_size": encoder.intermediate_size,
      "hidden_act": "gelu", "hidden_dropout_prob": encoder.dropout_rate,
      "attention_probs_dropout_prob": encoder.attention_dropout_rate,
      "max_position_embeddings": encoder.max_position_embeddings,
      "type_vocab_size": encoder.type_vocab_size,
      "initializer_range": encoder.initializer_range, "layer_norm_eps": encoder.layer_norm_eps,
      "position_embedding_type": "absolute", "pad_token_id": 0,
      "summary_type": "first", "summary_use_proj": True, "summary_activation": "gelu",
      "summary_last_dropout": 0.1, "tie_word_embeddings": True,
  }


def write_hf_folder(directory: str, tensors: dict[str, np.ndarray], encoder: EncoderConfig,
                    network: str, vocab: Vocab | None) -> None:
  """Write one HF folder (config.json + model.safetensors [+ tokenizer files]) from canonical
  tensors.

  Args:
    directory: a new, empty folder.
    tensors: canonical tensors of this network (and the shared embeddings).
    encoder: this network's sizes.
    network: "discriminator" (ElectraForPreTraining) or "generator" (ElectraForMaskedLM).
    vocab: when given, its tokenizer files (`hf_tokenizer.write_hf_tokenizer`: vocab.txt or
      spm.model with tokenizer_config.json from its spec), so that AutoTokenizer gives our ids.
  """
  from safetensors.numpy import save_file

  own = (names.EMBEDDINGS + "/", names.SCOPES[network] + "/", names.HEADS[network] + "/")
  state = {}
  # A generator's own tables (generator/embeddings/...) come after, and replace, the
  # shared ones.
  for name, array in sorted(tensors.items(), key=lambda item: item[0].startswith("generator/")):
    if name.startswith(own):
      hf_name, transpose = names.canonical_to_hf(name)
      state[hf_name] = np.ascontiguousarray(array.T if transpose else array)
  if network == "generator":
    # A copy of the tied matrix: transformers re-ties it, and loaders that do not tie still
    # find the output layer.
    state["generator_lm_head.weight"] = state["electra.embeddings.word_embeddings.weight"]
  architecture = "ElectraForMaskedLM" if network == "generator" else "ElectraForPreTraining"
  # `directory` is in the converter's local staging dir (electra_tf.atomic.write_dir).
  os.makedirs(directory)
  save_file(state, os.path.join(directory, SAFETENSORS), metadata={"format": "pt"})
  fileio.write_text(os.path.join(directory, CONFIG_NAME),
                    json.dumps(hf_config(encoder, architecture), indent=2, sort_keys=True))
  if vocab is not None:
    hf_tokenizer.write_hf_tokenizer(vocab, directory,
                                    max_length=encoder.max_position_embeddings)
