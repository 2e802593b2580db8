"""Typed, frozen configs for the encoder, pretraining and fine-tuning; derived values live here."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from electra_tf.errors import UserError


class ConfigError(UserError, ValueError):
  """A config value or key is invalid; the message says which and what to do."""


def _check_keys(cls: type, values: dict[str, Any]) -> None:
  known = {f.name for f in dataclasses.fields(cls)}
  unknown = sorted(set(values) - known)
  if unknown:
    raise ConfigError(
        f"unknown {cls.__name__} key(s) {unknown}; valid keys are {sorted(known)}")


def _positive(obj: Any, *names: str) -> None:
  for name in names:
    value = getattr(obj, name)
    if value is None or value <= 0:
      raise ConfigError(f"{name} must be positive, got {value!r}")


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
  """Sizes of one transformer encoder (the discriminator or the generator).

  Args:
    vocab_size: WordPiece vocabulary size V.
    hidden_size: transformer width H.
    num_layers: number of transformer blocks.
    num_heads: attention heads; H must be divisible by it.
    intermediate_size: feed-forward width.
    embedding_size: embedding width E; E != H adds an E->H projection.
    max_position_embeddings: rows of the position table.
    type_vocab_size: number of segment ids.
    dropout_rate: hidden dropout.
    attention_dropout_rate: dropout on attention probabilities.
    initializer_range: stddev of the truncated-normal initializer.
    layer_norm_eps: LayerNorm epsilon.
  """

  vocab_size: int = 30522
  hidden_size: int = 256
  num_layers: int = 12
  num_heads: int = 4
  intermediate_size: int = 1024
  embedding_size: int = 128
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  dropout_rate: float = 0.1
  attention_dropout_rate: float = 0.1
  initializer_range: float = 0.02
  layer_norm_eps: float = 1e-12

  def __post_init__(self):
    _positive(self, "vocab_size", "hidden_size", "num_layers", "num_heads",
              "intermediate_size", "embedding_size", "max_position_embeddings",
              "type_vocab_size")
    if self.hidden_size % self.num_heads:
      raise ConfigError(
          f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}; "
          "choose a head count that divides the hidden size")
    for name in ("dropout_rate", "attention_dropout_rate"):
      if not 0.0 <= getattr(self, name) < 1.0:
        raise ConfigError(f"{name} must be in [0, 1), got {getattr(self, name)!r}")

  @classmethod
  def from_dict(cls, values: dict[str, Any]) -> EncoderConfig:
    _check_keys(cls, values)
    return cls(**values)

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


def default_num_heads(hidden_size: int) -> int:
  """The authors' rule, one head per 64 hidden units (at least one), lowered to a divisor.

  The authors' code would build a broken block when H // 64 does not divide H (e.g. a
  194-wide generator of a 776-wide model); the nearest smaller divisor keeps it valid.
  """
  heads = max(1, hidden_size // 64)
  while hidden_size % heads:
    heads -= 1
  return heads


def generator_config(disc: EncoderConfig, fraction: float) -> EncoderConfig:
  """The generator's encoder: `fraction` of the discriminator's width, same depth and E."""
  if not 0.0 < fraction <= 1.0:
    raise ConfigError(f"generator_fraction must be in (0, 1], got {fraction!r}")
  hidden = max(1, int(round(disc.hidden_size * fraction)))
  if fraction == 1.0:
    return disc
  return dataclasses.replace(
      disc, hidden_size=hidden, num_heads=default_num_heads(hidden),
      intermediate_size=4 * hidden)


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
  batch_size: int = 128  # global
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
    _positive(self, "max_seq_length", "batch_size", "num_train_steps", "learning_rate",
              "steps_per_execution", "checkpoint_steps", "keep_checkpoints", "log_steps",
              "max_predictions_per_seq", "temperature")
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
  def has_discriminator(self) -> bool:
    """Whether a second network (the one fine-tuned) trains beside the generator."""
    return self.objective != "mlm"

  @property
  def tokens_per_step(self) -> int:
    return self.batch_size * self.max_seq_length

  def replace(self, **changes: Any) -> PretrainConfig:
    """A copy with `changes`; model.* keys may be given as `model={...}` or dotted."""
    _check_keys(type(self), {k for k in changes if "." not in k})
    model_changes = {k.split(".", 1)[1]: v for k, v in changes.items() if k.startswith("model.")}
    bad = [k for k in changes if "." in k and not k.startswith("model.")]
    if bad:
      raise ConfigError(f"unknown config key(s) {bad}; only model.<field> may be dotted")
    top = {k: v for k, v in changes.items() if "." not in k}
    model = self.model
    if model_changes:
      _check_keys(EncoderConfig, model_changes)
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
    _check_keys(cls, values)
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


def resume_conflicts(saved: PretrainConfig, current: PretrainConfig) -> list[str]:
  """Names of the settings that differ in a way that forbids resuming."""
  old, new = saved.to_dict(), current.to_dict()
  return [k for k in RESUME_CRITICAL if old[k] != new[k]]



FINETUNE_TASKS = ("squad_v1.1", "squad_v2.0", "classification", "movie_reviews", "glue/cola",
                  "glue/sst2",
                  "glue/mrpc", "glue/stsb", "glue/qqp", "glue/mnli", "glue/qnli", "glue/rte")


# How fine-tuning heads draw their kernels (FinetuneConfig.head_initializer).
HEAD_INITIALIZERS = ("truncated_normal", "normal")


@dataclasses.dataclass(frozen=True)
class FinetuneConfig:
  """Hyperparameters of one fine-tuning run (ELECTRA_SPEC section 3 and 5).

  Args:
    task: one of FINETUNE_TASKS.
    max_seq_length: tokens per example ([CLS] ... [SEP] included).
    doc_stride, max_query_length: SQuAD windowing.
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

  def __post_init__(self):
    if self.task not in FINETUNE_TASKS:
      raise ConfigError(f"unknown task {self.task!r}; choose one of {list(FINETUNE_TASKS)}")
    _positive(self, "max_seq_length", "doc_stride", "max_query_length", "learning_rate",
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
    if self.is_squad and self.max_query_length + 3 >= self.max_seq_length:
      raise ConfigError(f"max_seq_length {self.max_seq_length} leaves no room for the context "
                        f"after a {self.max_query_length}-token question; raise it")

  @property
  def is_squad(self) -> bool:
    return self.task.startswith("squad")

  @property
  def version_2(self) -> bool:
    return self.task == "squad_v2.0"

  def replace(self, **changes: Any) -> FinetuneConfig:
    return FinetuneConfig.from_dict({**self.to_dict(), **changes})

  @classmethod
  def from_dict(cls, values: dict[str, Any]) -> FinetuneConfig:
    _check_keys(cls, values)
    return cls(**values)

  def to_dict(self) -> dict[str, Any]:
    return dataclasses.asdict(self)
