"""What an export starts from: an encoder from any checkpoint, or a fine-tuning run's task model,
each with its vocab and the TokenizerSpec it was trained with."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from electra_tf import fileio
from electra_tf.data.tokenizer_spec import WORDPIECE, TokenizerSpec
from electra_tf.data.vocab import Vocab, find_vocab_file, load_vocab, recorded_spec
from electra_tf.errors import UserError
from electra_tf.filenames import BEST_SUBDIR, FINETUNE_RECORD


@dataclasses.dataclass
class EncoderSource:
  """An encoder with the tokenization it was trained with.

  Attributes:
    encoder: the built ElectraEncoder (weights restored).
    vocab: its vocab (the checkpoint's, else bert-base-uncased) with its TokenizerSpec.
  """

  encoder: Any
  vocab: Vocab


@dataclasses.dataclass
class TaskSource:
  """A fine-tuned task model (ElectraClassifier, ElectraSpanQA or ElectraTagger), its
  finetune.json and its vocab."""

  model: Any
  record: dict[str, Any]
  vocab: Vocab

  @property
  def max_seq_length(self) -> int:
    return self.record["finetune"]["max_seq_length"]

  @property
  def is_squad(self) -> bool:
    return self.record["task"].startswith("squad")

  @property
  def is_tagging(self) -> bool:
    from electra_tf.config import TAGGING_TASKS

    return self.record["task"] in TAGGING_TASKS


def finetuned_dir(checkpoint: str) -> str | None:
  """The fine-tuned model directory of a finetune.py --output_dir or best/ dir, else None."""
  for path in (fileio.join(checkpoint, BEST_SUBDIR), checkpoint):
    if fileio.isfile(fileio.join(path, FINETUNE_RECORD)):
      return path
  return None


def finetuned_vocab(model_dir: str, record: dict[str, Any], stream=None) -> Vocab:
  """The vocab of a fine-tuned model directory with its spec: the one written beside it, else
  (a directory from before specs) the spec of finetune.json's "lower_case", said in one
  line on `stream` (stderr), else inferred from the tokens."""
  path = find_vocab_file(model_dir)
  if path is None:
    raise UserError(f"{model_dir} holds no vocab.txt or spm.model; re-run fine-tuning or "
                    "copy the vocab it was trained with into it")
  if recorded_spec(path) is None and isinstance(record.get("lower_case"), bool):
    spec = TokenizerSpec.create(WORDPIECE, lower_case=record["lower_case"])
    print(f"no tokenizer settings beside {path}: using {FINETUNE_RECORD}'s "
          f"lower_case={record['lower_case']} ({spec.describe()})", file=stream or sys.stderr)
    return load_vocab(path, spec)
  return load_vocab(path)


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
  return TaskSource(model, record, finetuned_vocab(model_dir, record))


def checkpoint_vocab(loaded) -> Vocab:
  """The vocab of what converter.load read (its spec from the sidecar, a Hugging Face
  tokenizer_config.json, or inferred), else the built-in bert-base-uncased."""
  from electra_tf.data.vocab import builtin_vocab_path

  vocab = getattr(loaded, "vocab", None)
  if isinstance(vocab, Vocab):
    return vocab
  return load_vocab(loaded.vocab_path or builtin_vocab_path())


def load_encoder(checkpoint: str) -> EncoderSource:
  """The encoder of a fine-tuning run, or of anything electra-convert reads (a pretraining
  model_dir, a converted folder, a Hugging Face folder, a TF1 checkpoint)."""
  from electra_tf.checkpoints import converter
  from electra_tf.model.networks import standalone_discriminator

  if finetuned_dir(checkpoint) is not None:
    task = load_task(checkpoint, "")
    return EncoderSource(task.model.encoder, task.vocab)
  loaded = converter.load(checkpoint)
  if loaded.discriminator is None:
    raise UserError(f"{checkpoint} holds no discriminator (ELECTRA's encoder) to export")
  discriminator = standalone_discriminator(loaded.discriminator)  # folds a GDES delta in
  return EncoderSource(discriminator.encoder, checkpoint_vocab(loaded))
