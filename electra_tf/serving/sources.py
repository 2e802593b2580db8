"""What an export starts from: an encoder from any checkpoint, or a fine-tuning run's task model."""

from __future__ import annotations

import dataclasses
from typing import Any

from electra_tf import fileio
from electra_tf.errors import UserError
from electra_tf.filenames import BEST_SUBDIR, FINETUNE_RECORD, VOCAB_NAME


@dataclasses.dataclass
class EncoderSource:
  """An encoder with the tokenization it was trained with.

  Attributes:
    encoder: the built ElectraEncoder (weights restored).
    vocab_path: its WordPiece vocab (the checkpoint's, else bert-base-uncased).
    lower_case: whether texts are lower-cased and stripped of accents before WordPiece.
  """

  encoder: Any
  vocab_path: str
  lower_case: bool


@dataclasses.dataclass
class TaskSource:
  """A fine-tuned task model (ElectraClassifier or ElectraSpanQA) and its finetune.json."""

  model: Any
  record: dict[str, Any]
  vocab_path: str

  @property
  def lower_case(self) -> bool:
    return self.record.get("lower_case", True)

  @property
  def max_seq_length(self) -> int:
    return self.record["finetune"]["max_seq_length"]

  @property
  def is_squad(self) -> bool:
    return self.record["task"].startswith("squad")


def finetuned_dir(checkpoint: str) -> str | None:
  """The fine-tuned model directory of a finetune.py --output_dir or best/ dir, else None."""
  for path in (fileio.join(checkpoint, BEST_SUBDIR), checkpoint):
    if fileio.isfile(fileio.join(path, FINETUNE_RECORD)):
      return path
  return None


def load_task(checkpoint: str, fmt: str, task: str | None = None) -> TaskSource:
  """The task model of a fine-tuning run (checked against `task` when given), or a
  UserError naming `fmt` when it has none."""
  from electra_tf.training.finetuned import load_finetuned

  model_dir = finetuned_dir(checkpoint)
  if model_dir is None:
    raise UserError(f"--format={fmt} exports the task model of a fine-tuning run, and "
                    f"{checkpoint} holds none (no {FINETUNE_RECORD}); pass a finetune.py "
                    "--output_dir or its best/ directory")
  model, record = load_finetuned(model_dir)
  if task and task != record["task"]:
    raise UserError(f"{checkpoint} was fine-tuned for {record['task']}, not {task}")
  return TaskSource(model, record, fileio.join(model_dir, VOCAB_NAME))


def load_encoder(checkpoint: str) -> EncoderSource:
  """The encoder of a fine-tuning run, or of anything electra-convert reads (a pretraining
  model_dir, a converted folder, a Hugging Face folder, a TF1 checkpoint)."""
  from electra_tf.checkpoints import converter
  from electra_tf.data.vocab import builtin_vocab_path
  from electra_tf.model.networks import standalone_discriminator

  if finetuned_dir(checkpoint) is not None:
    task = load_task(checkpoint, "")
    return EncoderSource(task.model.encoder, task.vocab_path, task.lower_case)
  loaded = converter.load(checkpoint)
  if loaded.discriminator is None:
    raise UserError(f"{checkpoint} holds no discriminator (ELECTRA's encoder) to export")
  discriminator = standalone_discriminator(loaded.discriminator)  # folds a GDES delta in
  return EncoderSource(discriminator.encoder, loaded.vocab_path or builtin_vocab_path(), True)
