"""Typed, frozen configs for the encoder, pretraining and fine-tuning; derived values live here.

Stdlib only (the commands read it before TensorFlow loads, to keep --help fast).
"""

from electra_tf.config.encoder_config import (
  ConfigError,
  EncoderConfig,
  default_num_heads,
  generator_config,
)
from electra_tf.config.finetune_config import (
  FINETUNE_TASKS,
  HEAD_INITIALIZERS,
  POOLINGS,
  TAGGING_TASKS,
  FinetuneConfig,
)
from electra_tf.config.pretrain_config import (
  EMBEDDING_SHARING,
  NONFINITE_POLICIES,
  OBJECTIVES,
  OPTIMIZERS,
  PHASE_FIELDS,
  PRECISIONS,
  RESUME_CRITICAL,
  STRATEGIES,
  PretrainConfig,
  max_predictions,
  resume_conflicts,
)

__all__ = [
    "EMBEDDING_SHARING", "FINETUNE_TASKS", "HEAD_INITIALIZERS", "POOLINGS", "NONFINITE_POLICIES",
    "OBJECTIVES", "OPTIMIZERS", "PHASE_FIELDS",
    "PRECISIONS", "RESUME_CRITICAL", "STRATEGIES", "TAGGING_TASKS", "ConfigError", "EncoderConfig",
    "FinetuneConfig", "PretrainConfig", "default_num_heads", "generator_config",
    "max_predictions", "resume_conflicts",
]
