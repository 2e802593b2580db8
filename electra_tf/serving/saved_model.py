"""Versioned SavedModels for TF Serving: which module a checkpoint serves, written atomically."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import uuid

import tensorflow as tf

from electra_tf import atomic, fileio
from electra_tf.checkpoints import converter
from electra_tf.config import TAGGING_TASKS
from electra_tf.errors import UserError
from electra_tf.filenames import BEST_SUBDIR
from electra_tf.serving import sources
from electra_tf.serving.signatures import (
  ClassifierServing,
  PretrainingServing,
  ServingOptions,
  SquadServing,
  signatures,
)
from electra_tf.serving.warmup import WARMUP_NAME, warmup_inputs, write_warmup
from electra_tf.training.finetuned import load_finetuned

SAVED_MODEL_PB = "saved_model.pb"  # what TF Serving loads a version from


def next_version(export_dir: str) -> int:
  """One more than the highest integer version directory in `export_dir` (1 if none)."""
  versions = [int(d) for d in fileio.listdir(export_dir) if re.fullmatch(r"\d+", d)] \
      if fileio.isdir(export_dir) else []
  return max(versions, default=0) + 1


def save(module, export_dir: str) -> str:
  """Writes `module` as `export_dir/<next version>/`, complete or not at all.

  Locally the version is written under a hidden name and renamed. On a remote file system
  (gs://) it is written locally and copied with saved_model.pb last: TF Serving loads a
  version only once its saved_model.pb is there.
  """
  fileio.makedirs(export_dir)
  remote = fileio.is_remote(export_dir)
  tmp = (tempfile.mkdtemp(prefix="saved_model-") if remote
         else os.path.join(export_dir, f".tmp-{uuid.uuid4().hex[:8]}"))
  try:
    tf.saved_model.save(module, tmp, signatures=signatures(module))
    os.makedirs(os.path.join(tmp, "assets.extra"))  # tmp is local (above)
    write_warmup(os.path.join(tmp, "assets.extra", WARMUP_NAME), warmup_inputs(module))
    version = next_version(export_dir)
    final = fileio.join(export_dir, str(version))
    if remote:
      atomic.replace_dir(tmp, final, SAVED_MODEL_PB)
    else:
      os.rename(tmp, final)  # fails rather than replace a version made meanwhile
    return final
  finally:
    shutil.rmtree(tmp, ignore_errors=True)  # local (above)


def serving_module(checkpoint: str, task: str, options: ServingOptions | None = None):
  """The serving module of a fine-tuned model directory (or output_dir), or for
  task "pretraining" of any checkpoint converter.load reads. Its raw-text signatures
  tokenize with the vocab's TokenizerSpec."""
  if task == "pretraining":
    loaded = converter.load(checkpoint)
    if loaded.discriminator is None:
      raise UserError(f"{checkpoint} holds no discriminator to export for pretraining")
    positions = loaded.discriminator.encoder.config.max_position_embeddings
    return PretrainingServing(loaded.discriminator, sources.checkpoint_vocab(loaded),
                              min(128, positions), options)
  model_dir = fileio.join(checkpoint, BEST_SUBDIR)  # an output_dir holds its best model there
  if not fileio.isdir(model_dir):
    model_dir = checkpoint
  model, record = load_finetuned(model_dir)
  if task and task != record["task"]:
    raise UserError(f"{checkpoint} was fine-tuned for {record['task']}, not {task}")
  vocab = sources.finetuned_vocab(model_dir, record)
  config = record["finetune"]
  if record["task"] in TAGGING_TASKS:
    from electra_tf.serving.tag_signatures import TaggerServing

    return TaggerServing(model, vocab, config, record["spec"], options)
  if record["task"].startswith("squad"):
    threshold = (record.get("eval") or {}).get("best_f1_thresh", 0.0)
    return SquadServing(model, vocab, {**config, "version_2": record["task"] == "squad_v2.0"},
                        threshold, options)
  return ClassifierServing(model, vocab, config["max_seq_length"],
                           record["spec"]["label_names"], options)


def export(checkpoint: str, task: str | None, export_dir: str,
           options: ServingOptions | None = None) -> str:
  """Exports a new version of `checkpoint` to `export_dir`; returns its directory."""
  return save(serving_module(checkpoint, task, options), export_dir)


def export_finetuned(best_dir: str, export_dir: str) -> str:
  return export(best_dir, None, export_dir)


def describe(path: str) -> str:
  """A short JSON description of an exported SavedModel's signatures (for the CLI)."""
  loaded = tf.saved_model.load(path)
  return json.dumps({name: sorted(fn.structured_outputs)
                     for name, fn in loaded.signatures.items()}, indent=1)
