"""The encoder's sizes (EncoderConfig), the derived generator, and the config error."""

from __future__ import annotations

import dataclasses
from typing import Any

from electra_tf.errors import UserError


class ConfigError(UserError, ValueError):
  """A config value or key is invalid; the message says which and what to do."""


def check_keys(cls: type, values: dict[str, Any]) -> None:
  known = {f.name for f in dataclasses.fields(cls)}
  unknown = sorted(set(values) - known)
  if unknown:
    raise ConfigError(
        f"unknown {cls.__name__} key(s) {unknown}; valid keys are {sorted(known)}")


def check_positive(obj: Any, *names: str) -> None:
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
    check_positive(self, "vocab_size", "hidden_size", "num_layers", "num_heads",
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
    check_keys(cls, values)
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
