"""Pretraining presets, one file each: tiny (tests/demo), small, base, large."""

import importlib

from electra_tf.config import ConfigError, PretrainConfig

NAMES = ("tiny", "small", "base", "large")


def get(name: str) -> PretrainConfig:
  """The preset `name`; an unknown name raises ConfigError listing the valid ones."""
  if name not in NAMES:
    raise ConfigError(f"unknown model_size {name!r}; choose one of {list(NAMES)}")
  return importlib.import_module(f"configs.{name}").CONFIG
