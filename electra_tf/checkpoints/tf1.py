"""The authors' TF1 checkpoints (name-based, e.g. electra_small/model.ckpt-1000000): read.

They hold no head count: it comes from `num_heads`, else a config.json / bert_config.json
beside the checkpoint (`num_attention_heads`; a generator's from generator_config.json),
else the authors' rule heads = max(1, H // 64), which their code applies to every model
size and always to the generator. Dropout, the initializer range and the LayerNorm epsilon
come from the same file when it has them, else they are the authors' constants (0.1, 0.02,
1e-12).
"""

from __future__ import annotations

import json
import re

import tensorflow as tf

from electra_tf import fileio
from electra_tf.checkpoints import names
from electra_tf.checkpoints.source import Source, as_float32, find_vocab, pretrain_config
from electra_tf.config import ConfigError, EncoderConfig, default_num_heads
from electra_tf.errors import UserError, check_field_types, tf_error_line
from electra_tf.filenames import BERT_CONFIG_NAME, GENERATOR_CONFIG_NAME

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
# Where the main encoder's head count may be written beside a checkpoint, first found wins.
CONFIG_NAMES = ("config.json", BERT_CONFIG_NAME, "electra_config.json")


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
    if fileio.isfile(prefix + ".index"):
      # Read as the prefix it is: load_checkpoint asks isdir first, which ram:// answers
      # True for any prefix of a file name.
      return tf.compat.v1.train.NewCheckpointReader(prefix)
    return tf.train.load_checkpoint(prefix)
  except READ_ERRORS as exc:
    raise checkpoint_error(prefix, exc) from exc


# EncoderConfig field -> its key in a bert_config.json beside the checkpoint. The sizes come
# from the tensors; these are what the tensors do not record.
JSON_KEYS = {"num_heads": "num_attention_heads", "dropout_rate": "hidden_dropout_prob",
             "attention_dropout_rate": "attention_probs_dropout_prob",
             "initializer_range": "initializer_range", "layer_norm_eps": "layer_norm_eps"}


def _neighbour_config(prefix: str, hidden: int, file_names: tuple[str, ...]) -> dict:
  """EncoderConfig values from the first of `file_names` beside the checkpoint that has
  num_attention_heads (the others of JSON_KEYS are optional), else {}."""
  for name in file_names:
    file = fileio.join(fileio.dirname(fileio.abspath(prefix)), name)
    if not fileio.isfile(file):
      continue
    try:
      config = json.loads(fileio.read_text(file))
    except (OSError, ValueError) as exc:
      raise UserError(f"cannot read {file}: {exc}") from exc
    if not isinstance(config, dict) or "num_attention_heads" not in config:
      continue
    if config.get("hidden_size", hidden) != hidden:
      raise UserError(f"{file} has hidden_size {config['hidden_size']} but the checkpoint has "
                      f"{hidden}; it describes another model (pass --num_heads instead)")
    values = {field: config[key] for field, key in JSON_KEYS.items() if key in config}
    check_field_types(EncoderConfig, values, file, display=JSON_KEYS)
    return values
  return {}


def _encoder_config(shapes: dict, scope: str, sizes: dict, values: dict) -> EncoderConfig:
  """The encoder under `scope`: its sizes read from its tensor shapes, `sizes` (the
  embeddings'), and `values` from a config file (default heads: the authors' rule)."""
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
    return EncoderConfig(**{"num_heads": default_num_heads(hidden), **sizes, **values},
                         hidden_size=hidden, num_layers=len(layers),
                         intermediate_size=intermediate)
  except ConfigError as exc:
    raise UserError(f"the {scope}/ encoder of the checkpoint: {exc}") from exc


def _shape(shapes: dict, name: str) -> list[int]:
  if name not in shapes:
    raise UserError(f"the checkpoint is missing the tensor {name}")
  return shapes[name]


def _sharing(shapes: dict) -> tuple[bool, str]:
  """(MLM only, embedding_sharing) of an authors'-layout checkpoint, from its scopes.

  Their flags: a generator head without a discriminator head or generator/ encoder is the
  BERT baseline (electra_objective=False); both heads and no generator/ encoder is one
  encoder for both networks (untied_generator=False); generator/embeddings/ beside a
  generator/ encoder is untied_generator_embeddings=True; otherwise the embeddings are tied.
  """
  def has(prefix: str) -> bool:
    return any(k.startswith(prefix) for k in shapes)

  generator_encoder = has("generator/encoder/")
  generator_head, discriminator_head = has("generator_predictions/"), has(
      "discriminator_predictions/")
  if generator_head and not generator_encoder:
    return not discriminator_head, "all" if discriminator_head else "tied"
  untied = generator_encoder and f"{names.GENERATOR_EMBEDDINGS}/word_embeddings" in shapes
  return False, "none" if untied else "tied"


def read_tf1(prefix: str, num_heads: int | None = None) -> Source:
  """Read an authors'-layout checkpoint (discriminator, and generator when present).

  BERT checkpoints (`bert/...`) read as a discriminator encoder. A checkpoint with a
  generator head but neither `generator/` encoder nor discriminator head is the authors'
  MLM baseline: its `electra/` encoder is read as the generator. How the networks share
  weights follows the scopes (see `_sharing`). Head counts and the other JSON_KEYS come
  from `num_heads`, a bert_config.json (for the generator, generator_config.json) beside
  the checkpoint, else the authors' rule and constants.
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
  mlm_only, sharing = _sharing(shapes)
  has_generator = mlm_only or sharing == "all" or any(
      k.startswith("generator/encoder/") for k in shapes)
  # Source name -> canonical name.
  canonical = {}
  for key in shapes:
    name = f"electra/{key[len(main) + 1:]}" if key.startswith(f"{main}/") else key
    if mlm_only and not name.startswith("electra/embeddings/"):
      name = re.sub(r"^electra/", "generator/", name)
    if names.is_canonical(name):
      canonical[key] = name
  vocab, embedding = _shape(shapes, f"{main}/embeddings/word_embeddings")
  sizes = {"vocab_size": vocab, "embedding_size": embedding,
           "max_position_embeddings": _shape(shapes, f"{main}/embeddings/position_embeddings")[0],
           "type_vocab_size": _shape(shapes, f"{main}/embeddings/token_type_embeddings")[0]}
  if sharing == "none":
    own = _shape(shapes, f"{names.GENERATOR_EMBEDDINGS}/word_embeddings")
    if own != [vocab, embedding]:
      raise UserError(f"{prefix}: the generator's own word embeddings are {own} but the "
                      f"discriminator's {[vocab, embedding]}; both networks need one "
                      "embedding size")
  hidden = _shape(shapes, f"{main}/encoder/layer_0/attention/self/query/kernel")[1]
  values = _neighbour_config(prefix, hidden, CONFIG_NAMES)
  if num_heads:
    values["num_heads"] = num_heads
  main_config = _encoder_config(shapes, main, sizes, values)
  if mlm_only:
    config = pretrain_config(main_config, main_config, objective="mlm")
  elif sharing == "all":
    config = pretrain_config(main_config, main_config, embedding_sharing="all")
  elif has_generator:
    hidden = _shape(shapes, "generator/encoder/layer_0/attention/self/query/kernel")[1]
    generator = _encoder_config(shapes, "generator", sizes, _neighbour_config(
        prefix, hidden, (GENERATOR_CONFIG_NAME,)))
    config = pretrain_config(main_config, generator, embedding_sharing=sharing)
  else:
    config = pretrain_config(main_config)
  try:
    tensors = {name: as_float32(key, reader.get_tensor(key)) for key, name in canonical.items()}
  except READ_ERRORS as exc:
    raise checkpoint_error(prefix, exc) from exc
  source_names = {name: key for key, name in canonical.items()}
  return Source("tf1", prefix, config, has_generator=has_generator,
                has_discriminator=not mlm_only, tensors=tensors, names=source_names,
                extra=len(shapes) - len(canonical),
                vocab_path=find_vocab(fileio.dirname(fileio.abspath(prefix))),
                rename=lambda name: _tf1_name(name, main, mlm_only))


def _tf1_name(name: str, main: str, mlm_only: bool) -> str:
  """The checkpoint's name for a canonical tensor it lacks."""
  if mlm_only and name.startswith("generator/"):
    return f"{main}/{name[len('generator/'):]}"
  return re.sub(r"^electra/", f"{main}/", name)

