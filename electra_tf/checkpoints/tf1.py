"""The authors' TF1 checkpoints (name-based, e.g. electra_small/model.ckpt-1000000).

They hold no head count: it comes from `num_heads`, else a config.json / bert_config.json
beside the checkpoint (`num_attention_heads`), else the authors' rule heads = max(1, H // 64),
which their code applies to every model size and always to the generator. Dropout and the
LayerNorm epsilon are the authors' constants (0.1, 1e-12).
"""

from __future__ import annotations

import json
import os
import re

import tensorflow as tf

from electra_tf.checkpoints import names
from electra_tf.checkpoints.source import Source, as_float32, find_vocab, pretrain_config
from electra_tf.config import ConfigError, EncoderConfig, default_num_heads
from electra_tf.errors import UserError, tf_error_line

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_CONFIG_NAMES = ("config.json", "bert_config.json", "electra_config.json")


# What TensorFlow raises on a damaged checkpoint: its ops' errors, and the Python reader's
# IndexError ("Read less bytes than requested") on a truncated data file.
READ_ERRORS = (tf.errors.OpError, ValueError, IndexError)


def checkpoint_error(prefix: str, exc: BaseException) -> UserError:
  """One clear line for an error raised while reading the checkpoint at `prefix`."""
  detail = tf_error_line(exc)
  message = f"cannot read the checkpoint {prefix}: {detail}"
  if isinstance(exc, (IndexError, tf.errors.DataLossError)) or re.search(
      r"sstable|checksum|corrupt|truncat", detail, re.IGNORECASE):
    message += "; it is truncated or corrupt, copy it again or use another checkpoint"
  return UserError(message)


def open_checkpoint(prefix: str):
  """tf.train.CheckpointReader for `prefix`, or a UserError saying why it is not one."""
  try:
    return tf.train.load_checkpoint(prefix)
  except READ_ERRORS as exc:
    raise checkpoint_error(prefix, exc) from exc


def _neighbour_heads(prefix: str, hidden: int) -> int | None:
  """num_attention_heads from a config file beside the checkpoint, if one is there."""
  for name in _CONFIG_NAMES:
    file = os.path.join(os.path.dirname(os.path.abspath(prefix)), name)
    if not os.path.isfile(file):
      continue
    try:
      with open(file, encoding="utf-8") as f:
        config = json.load(f)
    except (OSError, ValueError) as exc:
      raise UserError(f"cannot read {file}: {exc}") from exc
    if not isinstance(config, dict) or "num_attention_heads" not in config:
      continue
    heads = config["num_attention_heads"]
    if not isinstance(heads, int) or isinstance(heads, bool):
      raise UserError(f"{file}: num_attention_heads must be int, got {heads!r}")
    if config.get("hidden_size", hidden) != hidden:
      raise UserError(f"{file} has hidden_size {config['hidden_size']} but the checkpoint has "
                      f"{hidden}; it describes another model (pass --num_heads instead)")
    return heads
  return None


def _encoder_config(shapes: dict, scope: str, vocab: int, embedding: int, positions: int,
                    types: int, num_heads: int | None) -> EncoderConfig:
  """Sizes of the encoder under `scope`, read from its tensor shapes."""
  pattern = re.compile(rf"^{scope}/encoder/layer_(\d+)/")
  layers = sorted({int(m.group(1)) for k in shapes if (m := pattern.match(k))})
  if layers != list(range(len(layers))) or not layers:
    missing = next(i for i in range(len(layers) + 1) if i not in layers)
    raise UserError(f"the checkpoint is missing the tensor "
                    f"{scope}/encoder/layer_{missing}/attention/self/query/kernel")
  first = f"{scope}/encoder/layer_0"
  hidden = _shape(shapes, f"{first}/attention/self/query/kernel")[1]
  intermediate = _shape(shapes, f"{first}/intermediate/dense/kernel")[1]
  try:
    return EncoderConfig(
        vocab_size=vocab, hidden_size=hidden, num_layers=len(layers),
        num_heads=num_heads or default_num_heads(hidden), intermediate_size=intermediate,
        embedding_size=embedding, max_position_embeddings=positions, type_vocab_size=types)
  except ConfigError as exc:
    raise UserError(f"the {scope}/ encoder of the checkpoint: {exc}") from exc


def _shape(shapes: dict, name: str) -> list[int]:
  if name not in shapes:
    raise UserError(f"the checkpoint is missing the tensor {name}")
  return shapes[name]


def read_tf1(prefix: str, num_heads: int | None = None) -> Source:
  """Read an authors'-layout checkpoint (discriminator, and generator when present).

  BERT checkpoints (`bert/...`) read as a discriminator encoder. A checkpoint with a
  generator head but neither `generator/` encoder nor discriminator head is the authors'
  MLM baseline: its `electra/` encoder is read as the generator.
  """
  reader = open_checkpoint(prefix)
  shapes = reader.get_variable_to_shape_map()
  if OBJECT_GRAPH_KEY in shapes:
    raise UserError(f"{prefix} is a TF2 object-based checkpoint, not the authors' TF1 layout")
  main = next((s for s in ("electra", "bert") if f"{s}/embeddings/word_embeddings" in shapes),
              None)
  if main is None:
    sample = ", ".join(sorted(shapes)[:3])
    raise UserError(f"{prefix} holds no ELECTRA or BERT tensors (no electra/embeddings/"
                    f"word_embeddings; it has e.g. {sample}); it is another architecture")
  mlm_only = (any(k.startswith("generator_predictions/") for k in shapes)
              and not any(k.startswith(("generator/encoder/", "discriminator_predictions/"))
                          for k in shapes))
  # Source name -> canonical name.
  canonical = {}
  for key in shapes:
    name = f"electra/{key[len(main) + 1:]}" if key.startswith(f"{main}/") else key
    if mlm_only and not name.startswith("electra/embeddings/"):
      name = re.sub(r"^electra/", "generator/", name)
    if names.is_canonical(name):
      canonical[key] = name
  vocab, embedding = _shape(shapes, f"{main}/embeddings/word_embeddings")
  positions = _shape(shapes, f"{main}/embeddings/position_embeddings")[0]
  types = _shape(shapes, f"{main}/embeddings/token_type_embeddings")[0]
  has_generator = mlm_only or any(k.startswith("generator/encoder/") for k in shapes)
  generator = discriminator = None
  hidden = _shape(shapes, f"{main}/encoder/layer_0/attention/self/query/kernel")[1]
  heads = num_heads or _neighbour_heads(prefix, hidden)
  if mlm_only:
    generator = _encoder_config(shapes, main, vocab, embedding, positions, types, heads)
    config = pretrain_config(generator, generator, objective="mlm")
  else:
    discriminator = _encoder_config(shapes, main, vocab, embedding, positions, types, heads)
    if has_generator:
      generator = _encoder_config(shapes, "generator", vocab, embedding, positions, types, None)
    config = pretrain_config(discriminator, generator)
  try:
    tensors = {name: as_float32(key, reader.get_tensor(key)) for key, name in canonical.items()}
  except READ_ERRORS as exc:
    raise checkpoint_error(prefix, exc) from exc
  source_names = {name: key for key, name in canonical.items()}
  return Source("tf1", prefix, config, has_generator=has_generator,
                has_discriminator=not mlm_only, tensors=tensors, names=source_names,
                extra=len(shapes) - len(canonical),
                vocab_path=find_vocab(os.path.dirname(os.path.abspath(prefix))),
                rename=lambda name: _tf1_name(name, main, mlm_only))


def _tf1_name(name: str, main: str, mlm_only: bool) -> str:
  """The checkpoint's name for a canonical tensor it lacks."""
  if mlm_only and name.startswith("generator/"):
    return f"{main}/{name[len('generator/'):]}"
  return re.sub(r"^electra/", f"{main}/", name)

