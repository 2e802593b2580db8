"""Our own checkpoints: converted folders, pretraining model_dirs, discriminator exports.

All three are object-based TF2 checkpoints. Converted folders and pretraining checkpoints
share the object paths `model/generator/...` and `model/discriminator/...` (a pretraining
checkpoint is `Checkpoint(model=ElectraPretrainer, optimizer=...)`), so one restore reads
both and skips the optimizer. A discriminator export is `Checkpoint(model=discriminator)`.
"""

from __future__ import annotations

import json
import os

import tensorflow as tf

from electra_tf import atomic, fileio
from electra_tf.checkpoints import names
from electra_tf.checkpoints.source import Source, find_vocab, pretrain_config
from electra_tf.checkpoints.tf1 import (
  OBJECT_GRAPH_KEY,
  READ_ERRORS,
  checkpoint_error,
  open_checkpoint,
)
from electra_tf.config import ConfigError, EncoderConfig, PretrainConfig
from electra_tf.data.vocab import Vocab, copy_vocab
from electra_tf.errors import UserError, check_field_types
from electra_tf.filenames import (
  CHECKPOINT_SUBDIR,
  CKPT_NAME,
  CONFIG_NAME,
  DISCRIMINATOR_SUBDIR,
)
from electra_tf.model import networks


def _read_json(file: str) -> dict:
  try:
    return json.loads(fileio.read_text(file))
  except (OSError, ValueError, tf.errors.OpError) as exc:
    raise UserError(f"cannot read {file}: {exc}") from exc


def _config_from_json(file: str, values: dict) -> tuple[PretrainConfig, bool]:
  """(config, is_discriminator_export) from one of our config.json files."""
  try:
    if "pretrain" in values:
      pretrain = values["pretrain"]
      check_field_types(PretrainConfig, pretrain, f"{file} pretrain")
      for key in ("model", "generator"):
        if pretrain.get(key) is not None:
          check_field_types(EncoderConfig, pretrain[key], f"{file} pretrain.{key}")
      return PretrainConfig.from_dict(pretrain), False
    check_field_types(EncoderConfig, values["encoder"], f"{file} encoder")
    return pretrain_config(EncoderConfig.from_dict(values["encoder"])), True
  except (KeyError, TypeError, ConfigError) as exc:
    raise UserError(f"{file} is not a valid electra_tf config ({exc})") from exc


def is_native_config(values: dict) -> bool:
  return isinstance(values, dict) and ("pretrain" in values or "encoder" in values)


def locate(path: str) -> tuple[str, str, str] | None:
  """(kind, checkpoint prefix, config.json) of one of our formats at `path`, else None."""
  config_file = fileio.join(path, CONFIG_NAME)
  if fileio.isdir(path) and fileio.isfile(config_file):
    values = _read_json(config_file)
    if not is_native_config(values):
      return None
    if "encoder" in values:
      return "discriminator_export", fileio.join(path, CKPT_NAME), config_file
    if fileio.isfile(fileio.join(path, CKPT_NAME + ".index")):
      return "converted", fileio.join(path, CKPT_NAME), config_file
    latest = tf.train.latest_checkpoint(fileio.join(path, CHECKPOINT_SUBDIR))
    if latest:
      return "model_dir", latest, config_file
    export = fileio.join(path, DISCRIMINATOR_SUBDIR)
    if fileio.isfile(fileio.join(export, CONFIG_NAME)):
      return locate(export)
    raise UserError(f"{path} is a pretraining model_dir with no checkpoint yet "
                    f"({CHECKPOINT_SUBDIR}/ is empty)")
  if fileio.isfile(path + ".index") and _is_object_based(path):
    # A prefix such as model_dir/checkpoints/ckpt-1000: its config is beside it or one up.
    here = fileio.dirname(fileio.abspath(path))
    for directory in (here, fileio.dirname(here)):
      file = fileio.join(directory, CONFIG_NAME)
      if fileio.isfile(file) and is_native_config(_read_json(file)):
        kind = "discriminator_export" if "encoder" in _read_json(file) else "model_dir"
        return kind, path, file
    raise UserError(f"{path} is a TF2 checkpoint without an electra_tf config.json beside it "
                    "or in its parent folder; its sizes are unknown")
  return None


def _is_object_based(prefix: str) -> bool:
  """TF2 object-based (ours) rather than name-based (the authors' TF1 Saver)."""
  try:
    return OBJECT_GRAPH_KEY in open_checkpoint(prefix).get_variable_to_shape_map()
  except (*READ_ERRORS, UserError):
    return False  # the TF1 reader reports what is wrong with it


def _restore(root: tf.train.Checkpoint, prefix: str) -> None:
  """Restore every variable of `root` from `prefix`, ignoring whatever else it holds."""
  try:
    status = root.read(prefix)
    status.expect_partial()
    status.assert_existing_objects_matched()
  except AssertionError as exc:
    raise UserError(f"{prefix} does not hold all weights of its config.json's model: "
                    f"{str(exc).splitlines()[0]}") from exc
  except READ_ERRORS as exc:
    raise checkpoint_error(prefix, exc) from exc


def read_native(path: str, kind: str, prefix: str, config_file: str) -> Source:
  """Build the networks of the config beside `prefix` and restore them from it."""
  config, is_export = _config_from_json(config_file, _read_json(config_file))
  try:
    keys = sorted(k for k in open_checkpoint(prefix).get_variable_to_shape_map()
                  if k != OBJECT_GRAPH_KEY)
  except READ_ERRORS as exc:
    raise checkpoint_error(prefix, exc) from exc
  if is_export and any(k.startswith("model/head/output_bias/") for k in keys):
    # An MLM-objective run exports its generator (the only encoder it has) for fine-tuning.
    config = config.replace(objective="mlm")
    generator, discriminator = networks.Generator(config.model), None
    generator(networks.dummy_inputs())
    root = tf.train.Checkpoint(model=generator)
  elif is_export:
    generator, discriminator = None, networks.Discriminator(config.model)
    discriminator(networks.dummy_inputs())
    root = tf.train.Checkpoint(model=discriminator)
  else:
    generator, discriminator = networks.build_networks(config)
    if not any(k.startswith("model/generator/") for k in keys):
      generator = None
    if not any(k.startswith("model/discriminator/") for k in keys):
      discriminator = None
    if generator is None and discriminator is None:
      raise UserError(f"{prefix} holds no model/generator or model/discriminator weights")
    root = tf.train.Checkpoint(model=tf.train.Checkpoint(
        **{k: v for k, v in (("generator", generator), ("discriminator", discriminator))
           if v is not None}))
  _restore(root, prefix)
  tensors = names.extract(generator, discriminator)
  directory = fileio.dirname(fileio.abspath(config_file))
  vocab = find_vocab(directory, fileio.join(directory, DISCRIMINATOR_SUBDIR))
  return Source(kind, path, config, has_generator=generator is not None,
                has_discriminator=discriminator is not None, tensors=tensors,
                extra=max(0, len(keys) - len(tensors)), vocab_path=vocab,
                networks=(generator, discriminator))


def save_discriminator(discriminator, vocab: Vocab | str | None, out_dir: str) -> str:
  """Write a discriminator export: `Checkpoint(model=discriminator)`, its encoder config and
  the vocab with its tokenizer spec, for fine-tuning (an MLM run passes its generator, the
  only encoder it has).

  The directory appears complete or not at all (electra_tf.atomic; config.json is its
  marker), replacing an older export.
  """
  def write(tmp: str) -> None:
    tf.train.Checkpoint(model=discriminator).write(os.path.join(tmp, CKPT_NAME))
    fileio.write_text(os.path.join(tmp, CONFIG_NAME), json.dumps(
        {"encoder": discriminator.config.to_dict()}, indent=2, sort_keys=True))
    if vocab:
      copy_vocab(vocab, tmp)

  atomic.write_dir(out_dir, write, marker=CONFIG_NAME)
  return out_dir
