"""A fine-tuned model directory (best/): written after the best epoch, read back to serve."""

from __future__ import annotations

import json
import os
from typing import Any

import tensorflow as tf

from electra_tf import atomic, fileio
from electra_tf.checkpoints.tf1 import READ_ERRORS, checkpoint_error
from electra_tf.config import EncoderConfig, FinetuneConfig
from electra_tf.data.vocab import Vocab, copy_vocab
from electra_tf.errors import UserError, check_field_types
from electra_tf.filenames import CKPT_NAME, FINETUNE_RECORD
from electra_tf.model.finetune_models import FinetuneModel, build_finetune_model, model_for_task


def save_finetuned(model: FinetuneModel, record: dict[str, Any], vocab: Vocab | str | None,
                   out_dir: str, artifacts: dict[str, str] | None = None) -> str:
  """Writes a fine-tuned model directory (ckpt, finetune.json, the vocab with its tokenizer
  spec, extra files).

  `record` is what finetune.json holds: "task", "encoder" and "finetune" (config dicts) and
  the task's metadata ("spec" for classification). The directory appears complete or not
  at all (electra_tf.atomic; finetune.json is its marker), replacing an older one.
  """
  def write(tmp: str) -> None:
    tf.train.Checkpoint(model=model).write(os.path.join(tmp, CKPT_NAME))
    fileio.write_text(os.path.join(tmp, FINETUNE_RECORD), json.dumps(record, indent=2))
    if vocab:
      copy_vocab(vocab, tmp)
    for name, text in (artifacts or {}).items():
      fileio.write_text(os.path.join(tmp, name), text)

  return atomic.write_dir(out_dir, write, FINETUNE_RECORD)


def load_finetuned(path: str) -> tuple[FinetuneModel, dict[str, Any]]:
  """(built model with restored weights, its finetune.json record) from a `best/` directory.

  Raises:
    UserError: `path` is not a fine-tuned model directory, or its finetune.json or
      checkpoint is damaged.
  """
  record_path = fileio.join(path, FINETUNE_RECORD)
  if not (fileio.exists(record_path) and fileio.exists(fileio.join(path, CKPT_NAME + ".index"))):
    raise UserError(f"{path} is not a fine-tuned model (no {FINETUNE_RECORD} and ckpt); pass the "
                    f"best/ directory of a finetune.py --output_dir, or --task=pretraining "
                    f"for a pretrained checkpoint")
  record, config, encoder, num_labels = _read_record(record_path)
  model = build_finetune_model(model_for_task(config, encoder, num_labels=num_labels))
  prefix = fileio.join(path, CKPT_NAME)
  try:
    status = tf.train.Checkpoint(model=model).read(prefix)
    status.expect_partial().assert_existing_objects_matched()
  except AssertionError as exc:
    raise UserError(f"{prefix} does not hold all weights of the model in {FINETUNE_RECORD}: "
                    f"{str(exc).splitlines()[0]}") from exc
  except READ_ERRORS as exc:
    raise checkpoint_error(prefix, exc) from exc
  return model, record


def _read_record(record_path: str) -> tuple[dict[str, Any], FinetuneConfig, EncoderConfig, int]:
  """(finetune.json, its configs, its label count) of a fine-tuned model, checked by field."""
  fix = "restore it or fine-tune again"
  try:
    record = json.loads(fileio.read_text(record_path))
  except (OSError, ValueError, tf.errors.OpError) as exc:
    raise UserError(f"cannot read {record_path} ({exc}); {fix}") from exc
  try:
    if not isinstance(record, dict):
      raise UserError(f"{record_path}: expected a JSON object, got {type(record).__name__}")
    if not isinstance(record.get("task"), str):
      raise UserError(f"{record_path}: task must be a string, got {record.get('task')!r}")
    check_field_types(FinetuneConfig, record.get("finetune"), f"{record_path} finetune")
    check_field_types(EncoderConfig, record.get("encoder"), f"{record_path} encoder")
    config = FinetuneConfig.from_dict(record["finetune"])
    encoder = EncoderConfig.from_dict(record["encoder"])
    spec = record.get("spec") or {}
    labels = spec.get("label_names") if isinstance(spec, dict) else spec
    if labels is not None and not (isinstance(labels, list)
                                   and all(isinstance(name, str) for name in labels)):
      raise UserError(f"{record_path}: spec.label_names must be a list of strings or null, "
                      f"got {labels!r}")
  except UserError as exc:
    raise UserError(f"{exc}; {fix}") from None
  return record, config, encoder, len(labels or ()) or 1
