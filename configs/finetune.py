"""Fine-tuning defaults per task and model depth (the authors' recipe)."""

from electra_tf.config import FINETUNE_TASKS, TAGGING_TASKS, ConfigError, FinetuneConfig

# Tasks the authors train longer (small dev sets that need more passes).
_LONG_TASKS = ("glue/rte", "glue/stsb")


def get(task: str, num_layers: int) -> FinetuneConfig:
  """The defaults for `task` on an encoder of `num_layers` blocks.

  LR 1e-4 and layer-wise decay 0.8, or 5e-5 and 0.9 for 24-layer (large) models; 3 epochs,
  2 for SQuAD and 10 for RTE and STS-B; sequence length 384 for SQuAD and 128 otherwise;
  tagging windows of long sentences start half a window (63 pieces) apart.
  """
  if task not in FINETUNE_TASKS:
    raise ConfigError(f"unknown task {task!r}; choose one of {list(FINETUNE_TASKS)}")
  large = num_layers >= 24
  squad = task.startswith("squad")
  return FinetuneConfig(
      task=task, max_seq_length=384 if squad else 128,
      doc_stride=63 if task in TAGGING_TASKS else 128,
      learning_rate=5e-5 if large else 1e-4, layerwise_lr_decay=0.9 if large else 0.8,
      num_train_epochs=2.0 if squad else (10.0 if task in _LONG_TASKS else 3.0))
