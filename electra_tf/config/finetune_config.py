"""FinetuneConfig: the hyperparameters of one fine-tuning run."""

from __future__ import annotations

import dataclasses
from typing import Any

from electra_tf.config.encoder_config import ConfigError, check_keys, check_positive
from electra_tf.config.pretrain_config import PRECISIONS

# Token tagging: "tagging" on the user's files, the others on data from requirements-data.txt.
TAGGING_TASKS = ("tagging", "hironsan_ner", "peoples_daily_pos", "wnut16_ner")
FINETUNE_TASKS = ("squad_v1.1", "squad_v2.0", "classification", "movie_reviews", "glue/cola",
                  "glue/sst2", "glue/mrpc", "glue/stsb", "glue/qqp", "glue/mnli", "glue/qnli",
                  "glue/rte", *TAGGING_TASKS)
# How fine-tuning heads draw their kernels (FinetuneConfig.head_initializer).
HEAD_INITIALIZERS = ("truncated_normal", "normal")
# What the classification head reads (FinetuneConfig.pooling).
POOLINGS = ("cls", "mean")


@dataclasses.dataclass(frozen=True)
class FinetuneConfig:
  """Hyperparameters of one fine-tuning run (the authors' recipe by default).

  Args:
    task: one of FINETUNE_TASKS.
    max_seq_length: tokens per example ([CLS] ... [SEP] included).
    doc_stride, max_query_length: SQuAD windowing; doc_stride is also the word pieces
      between the starts of a long sentence's windows in tagging.
    learning_rate: peak LR; warmup over `warmup_fraction` of the steps, then linear decay to 0.
    layerwise_lr_decay: layer i of N (0-based) trains at LR * decay ** (N - i), the embeddings
      at decay ** (N + 1) and the task head at the full LR. `authors_layer_decay` multiplies
      every encoder factor by one more `decay`, as the authors' code does (their top layer
      gets decay ** 2).
    weight_decay: decoupled AdamW decay (not on LayerNorm or biases).
    adam_bias_correction: Adam's bias correction (off, as in the authors' code).
    num_train_epochs, batch_size, eval_batch_size, seed: run control.
    dropout_rate: dropout in the encoder and before the classifier.
    joint_end_head: the authors' end head conditioned on the start (top `beam_size` starts).
    answerable_classifier: SQuAD 2.0 answerability head with loss weight `answerable_weight`.
    n_best_size, max_answer_length: SQuAD post-processing.
    head_initializer: how task-head kernels are drawn, with the encoder's initializer_range
      as stddev: "truncated_normal" (the authors') or "normal" (transformers').
    pooling: what the classification head reads: "cls", the [CLS] hidden state (the
      authors'), or "mean", the mean of the last layer over the real tokens.
  """

  task: str = "squad_v1.1"
  max_seq_length: int = 384
  doc_stride: int = 128
  max_query_length: int = 64
  learning_rate: float = 1e-4
  layerwise_lr_decay: float = 0.8
  authors_layer_decay: bool = False
  weight_decay: float = 0.01
  adam_bias_correction: bool = False  # the authors' AdamW has none; torch's AdamW has it
  warmup_fraction: float = 0.1
  num_train_epochs: float = 3.0
  batch_size: int = 32
  eval_batch_size: int = 64
  seed: int = 0
  dropout_rate: float = 0.1
  clip_norm: float = 1.0
  joint_end_head: bool = False
  beam_size: int = 20
  answerable_classifier: bool = True
  answerable_weight: float = 0.5
  n_best_size: int = 20
  max_answer_length: int = 30
  precision: str = "float32"
  log_steps: int = 50
  head_initializer: str = "truncated_normal"
  pooling: str = "cls"

  def __post_init__(self):
    if self.task not in FINETUNE_TASKS:
      raise ConfigError(f"unknown task {self.task!r}; choose one of {list(FINETUNE_TASKS)}")
    check_positive(self, "max_seq_length", "doc_stride", "max_query_length", "learning_rate",
              "num_train_epochs", "batch_size", "eval_batch_size", "beam_size", "n_best_size",
              "max_answer_length", "log_steps")
    if not 0.0 < self.layerwise_lr_decay <= 1.0:
      raise ConfigError(f"layerwise_lr_decay must be in (0, 1], got {self.layerwise_lr_decay}")
    if not 0.0 <= self.warmup_fraction < 1.0:
      raise ConfigError(f"warmup_fraction must be in [0, 1), got {self.warmup_fraction}")
    if not 0.0 <= self.dropout_rate < 1.0:
      raise ConfigError(f"dropout_rate must be in [0, 1), got {self.dropout_rate}")
    if self.precision not in PRECISIONS:
      raise ConfigError(f"unknown precision {self.precision!r}; choose one of {list(PRECISIONS)}")
    if self.head_initializer not in HEAD_INITIALIZERS:
      raise ConfigError(f"unknown head_initializer {self.head_initializer!r}; choose one of "
                        f"{list(HEAD_INITIALIZERS)}")
    if self.pooling not in POOLINGS:
      raise ConfigError(f"unknown pooling {self.pooling!r}; choose one of {list(POOLINGS)}")
    if self.is_tagging and self.doc_stride > self.max_seq_length - 2:
      raise ConfigError(f"doc_stride {self.doc_stride} is more than the {self.max_seq_length - 2} "
                        f"word pieces a window of max_seq_length {self.max_seq_length} holds; "
                        f"lower it (tagging windows start doc_stride pieces apart)")
    if self.is_squad and self.max_query_length + 3 >= self.max_seq_length:
      raise ConfigError(f"max_seq_length {self.max_seq_length} leaves no room for the context "
                        f"after a {self.max_query_length}-token question; raise it")

  @property
  def is_squad(self) -> bool:
    return self.task.startswith("squad")

  @property
  def is_tagging(self) -> bool:
    return self.task in TAGGING_TASKS

  @property
  def version_2(self) -> bool:
    return self.task == "squad_v2.0"

  def replace(self, **changes: Any) -> FinetuneConfig:
    return FinetuneConfig.from_dict({**self.to_dict(), **changes})

  @classmethod
  def from_dict(cls, values: dict[str, Any]) -> FinetuneConfig:
    check_keys(cls, values)
    return cls(**values)

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)
