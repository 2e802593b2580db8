"""PretrainConfig: everything that defines a pretraining run, and what may change on resume."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from electra_tf.config.encoder_config import (
  ConfigError,
  EncoderConfig,
  check_keys,
  check_positive,
  generator_config,
)


def max_predictions(mask_prob: float, max_seq_length: int) -> int:
  """Static number of masked slots per sequence, as in the authors' code."""
  return max(1, int((mask_prob + 0.005) * max_seq_length))


OPTIMIZERS = ("adamw", "lamb")
# What the networks learn (docs/objectives.md): replaced-token detection over every token
# ("electra") or over the masked positions only ("electra_15"); masked-LM on generator
# samples at the masked positions ("replace_mlm") or on every token with a copy mechanism
# ("all_tokens_mlm"); or BERT's masked-LM on [MASK]ed input ("mlm").
OBJECTIVES = ("electra", "electra_15", "replace_mlm", "all_tokens_mlm", "mlm")
# How the generator and the discriminator share weights: the embeddings ("tied"), nothing
# ("none"), every weight ("all"; equal sizes), or gradient-disentangled embeddings ("gdes").
EMBEDDING_SHARING = ("tied", "none", "all", "gdes")
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")
NONFINITE_POLICIES = ("stop", "skip")


@dataclasses.dataclass(frozen=True)
class PretrainConfig:
  """Everything that defines a pretraining run (sizes, objective, optimiser, data).

  The generator's sizes are derived from the discriminator's unless `generator`
  is given explicitly (as when importing a released checkpoint).
  """

  model: EncoderConfig = dataclasses.field(default_factory=EncoderConfig)
  generator: EncoderConfig | None = None
  generator_fraction: float = 0.25
  objective: str = "electra"
  embedding_sharing: str = "tied"
  # > 0: the paper's two-stage training. The generator trains alone (MLM) for this many
  # steps; the discriminator then starts from the generator's weights and trains with the
  # generator frozen. Needs a generator of the discriminator's size and no sharing.
  two_stage_steps: int = 0
  # Data and masking.
  max_seq_length: int = 128
  mask_prob: float = 0.15
  max_predictions_per_seq: int | None = None
  mask_token_rate: float = 0.85  # of the chosen tokens, this share becomes [MASK]
  random_token_rate: float = 0.0  # and this share a random token (BERT: 0.8 / 0.1)
  # Loss and sampling.
  gen_weight: float = 1.0
  disc_weight: float = 50.0
  temperature: float = 1.0
  disallow_correct: bool = False
  # Optimisation.
  batch_size: int = 128  # global: the examples of one optimizer update
  # Each replica's share of the batch runs as this many micro-batches, one after another,
  # whose gradients add up to one update: the same update in less memory (docs/pretraining.md).
  gradient_accumulation_steps: int = 1
  num_train_steps: int = 1_000_000
  warmup_steps: int = 10_000
  learning_rate: float = 5e-4
  optimizer: str = "adamw"
  weight_decay: float = 0.01
  beta_1: float = 0.9
  beta_2: float = 0.999
  epsilon: float = 1e-6
  adam_bias_correction: bool = False  # the authors' AdamW has none
  clip_norm: float = 1.0
  # Running.
  seed: int = 0
  # Data order, masking, sampling and dropout as a function of (seed, step) only, and the
  # input position restored on resume: a killed and resumed run ends as an uninterrupted one.
  deterministic: bool = False
  # A non-finite loss or gradient never reaches the weights; "stop" then ends the run
  # (exit 1, last good checkpoint kept), "skip" drops that step's update and goes on.
  on_nonfinite: str = "stop"
  precision: str = "float32"
  steps_per_execution: int = 100
  checkpoint_steps: int = 1000
  keep_checkpoints: int = 5
  log_steps: int = 100

  def __post_init__(self):
    if isinstance(self.model, dict):
      object.__setattr__(self, "model", EncoderConfig.from_dict(self.model))
    if isinstance(self.generator, dict):
      object.__setattr__(self, "generator", EncoderConfig.from_dict(self.generator))
    if self.generator is None:
      object.__setattr__(self, "generator",
                         generator_config(self.model, self.generator_fraction))
    if self.max_predictions_per_seq is None:
      object.__setattr__(self, "max_predictions_per_seq",
                         max_predictions(self.mask_prob, self.max_seq_length))
    self._validate()

  def _validate(self):
    check_positive(self, "max_seq_length", "batch_size", "num_train_steps", "learning_rate",
              "steps_per_execution", "gradient_accumulation_steps", "checkpoint_steps",
              "keep_checkpoints", "log_steps", "max_predictions_per_seq", "temperature")
    for name, allowed in (("optimizer", OPTIMIZERS), ("objective", OBJECTIVES),
                          ("embedding_sharing", EMBEDDING_SHARING),
                          ("precision", PRECISIONS), ("on_nonfinite", NONFINITE_POLICIES)):
      if getattr(self, name) not in allowed:
        raise ConfigError(f"{name} must be one of {list(allowed)}, got {getattr(self, name)!r}")
    if not 0.0 < self.mask_prob < 1.0:
      raise ConfigError(f"mask_prob must be in (0, 1), got {self.mask_prob!r}")
    if not (0.0 <= self.mask_token_rate and 0.0 <= self.random_token_rate
            and self.mask_token_rate + self.random_token_rate <= 1.0):
      raise ConfigError("mask_token_rate and random_token_rate must be >= 0 and sum to <= 1")
    if self.batch_size % self.gradient_accumulation_steps:
      raise ConfigError(f"batch_size {self.batch_size} does not split into "
                        f"gradient_accumulation_steps={self.gradient_accumulation_steps} "
                        "equal micro-batches")
    if self.warmup_steps < 0:
      raise ConfigError(f"warmup_steps must be >= 0, got {self.warmup_steps}")
    if self.max_seq_length > self.model.max_position_embeddings:
      raise ConfigError(
          f"max_seq_length {self.max_seq_length} exceeds max_position_embeddings "
          f"{self.model.max_position_embeddings}")
    if self.max_predictions_per_seq > self.max_seq_length:
      raise ConfigError("max_predictions_per_seq cannot exceed max_seq_length")
    gen = self.generator
    for name in ("vocab_size", "embedding_size", "max_position_embeddings", "type_vocab_size"):
      if getattr(gen, name) != getattr(self.model, name):
        raise ConfigError(f"generator {name} must equal the discriminator's (shared embeddings)")

    self._validate_sharing()

  def _validate_sharing(self):
    same_size = self.generator == self.model
    if self.embedding_sharing == "all" and not same_size:
      raise ConfigError("embedding_sharing 'all' shares every weight, so the generator must "
                        "have the discriminator's size: set generator_fraction=1.0")
    if self.objective == "mlm" and self.embedding_sharing != "tied":
      raise ConfigError("objective 'mlm' has one network: embedding_sharing must stay 'tied'")
    if self.two_stage_steps and not 0 < self.two_stage_steps < self.num_train_steps:
      raise ConfigError(f"two_stage_steps must be in [0, num_train_steps), got "
                        f"{self.two_stage_steps}")
    if self.two_stage_steps and (self.objective not in ("electra", "electra_15")
                                 or not same_size or self.embedding_sharing != "none"):
      raise ConfigError("two-stage training starts the discriminator from the generator and "
                        "then freezes the generator: it needs objective electra or electra_15, "
                        "generator_fraction=1.0 and embedding_sharing=none")

  @property
  def tokens_per_step(self) -> int:
    return self.batch_size * self.max_seq_length

  def replace(self, **changes: Any) -> PretrainConfig:
    """A copy with `changes`; model.* keys may be given as `model={...}` or dotted."""
    check_keys(type(self), {k for k in changes if "." not in k})
    model_changes = {k.split(".", 1)[1]: v for k, v in changes.items() if k.startswith("model.")}
    bad = [k for k in changes if "." in k and not k.startswith("model.")]
    if bad:
      raise ConfigError(f"unknown config key(s) {bad}; only model.<field> may be dotted")
    top = {k: v for k, v in changes.items() if "." not in k}
    model = self.model
    if model_changes:
      check_keys(EncoderConfig, model_changes)
      model = dataclasses.replace(model, **model_changes)
    model = top.pop("model", model)
    derived = {}
    # Re-derive what depends on changed inputs unless given explicitly.
    if "generator" not in top and (model != self.model or "generator_fraction" in top):
      derived["generator"] = None
    if "max_predictions_per_seq" not in top and (
        "mask_prob" in top or "max_seq_length" in top):
      derived["max_predictions_per_seq"] = None
    values = {**self.to_dict(), **derived, **top, "model": model}
    if isinstance(values["generator"], EncoderConfig):
      values["generator"] = values["generator"].to_dict()
    return PretrainConfig.from_dict({**values, "model": model.to_dict()})

  @classmethod
  def from_dict(cls, values: dict[str, Any]) -> PretrainConfig:
    check_keys(cls, values)
    return cls(**values)

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)

  def to_json(self) -> str:
    return json.dumps(self.to_dict(), indent=2, sort_keys=True)

  @classmethod
  def from_json(cls, text: str) -> PretrainConfig:
    return cls.from_dict(json.loads(text))


# Fields whose change makes a checkpoint in model_dir unusable or a resume meaningless.
RESUME_CRITICAL = ("model", "generator", "objective", "embedding_sharing", "two_stage_steps",
                   "max_seq_length", "optimizer", "max_predictions_per_seq", "batch_size")
# The resume-critical fields a new phase of the run may change (training/phases.py: e.g. 128
# tokens, then 512). The weights keep their shapes: positions come from max_position_embeddings.
PHASE_FIELDS = ("max_seq_length", "max_predictions_per_seq", "batch_size")


def resume_conflicts(saved: PretrainConfig, current: PretrainConfig) -> list[str]:
  """Names of the settings that differ in a way that forbids resuming."""
  old, new = saved.to_dict(), current.to_dict()
  return [k for k in RESUME_CRITICAL if old[k] != new[k]]
