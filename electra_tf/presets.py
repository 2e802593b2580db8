"""Presets by name (configs/<name>.py) or by the path of a user's own preset file.

A preset is a Python file that defines `CONFIG`, a PretrainConfig; configs/finetune.py
defines `get(task, num_layers)`, the fine-tuning defaults. The files are read by path, as
big_vision reads its configs, never imported as a package: configs/ in a checkout is the one
copy, and an installed package carries the same files as electra_tf/configs/
(pyproject.toml maps them there).

Example:
  >>> get("tiny").model.hidden_size
  64
  >>> get("my_presets/tiny_wide.py")  # a copy of configs/tiny.py, edited
"""

from __future__ import annotations

import importlib.util
import os
import types

from electra_tf.config import ConfigError, FinetuneConfig, PretrainConfig

NAMES = ("demo", "tiny", "small", "base", "large")
_FINETUNE_FILE = "finetune.py"
_modules: dict[str, types.ModuleType] = {}


def directory() -> str:
  """The directory holding the presets: electra_tf/configs when installed, else configs/."""
  package = os.path.dirname(os.path.abspath(__file__))  # the installed package: local
  for candidate in (os.path.join(package, "configs"),
                    os.path.join(os.path.dirname(package), "configs")):
    if os.path.isfile(os.path.join(candidate, _FINETUNE_FILE)):
      return candidate
  raise ConfigError(f"the presets are missing: no configs/ beside {package}; reinstall "
                    "electra_tf or restore configs/ in the checkout")


def is_file(name_or_path: str) -> bool:
  """Whether a --model_size value names a preset file rather than a preset."""
  return name_or_path.endswith(".py") or os.sep in name_or_path


def run_name(name_or_path: str) -> str:
  """The preset's name, or its file's name without .py (default run directories use it)."""
  if is_file(name_or_path):
    return os.path.splitext(os.path.basename(name_or_path))[0]
  return name_or_path


def _load(path: str) -> types.ModuleType:
  """The module of the preset file at `path`, executed once per process."""
  if "://" in path:  # Python imports local files only; the paths below are local
    raise ConfigError(f"the preset file {path} is not on local disk; copy it there (a preset "
                      "is Python, imported by this process)")
  path = os.path.abspath(path)
  if path not in _modules:
    if not os.path.isfile(path):
      raise ConfigError(f"the preset file {path} does not exist")
    name = f"electra_tf_preset_{run_name(path)}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    try:
      spec.loader.exec_module(module)
    except ConfigError as exc:
      raise ConfigError(f"{path}: {exc}") from exc
    except Exception as exc:  # a user's file may raise anything; name it in one line
      raise ConfigError(f"{path} failed to load: {type(exc).__name__}: {exc}") from exc
    _modules[path] = module
  return _modules[path]


def get(name_or_path: str) -> PretrainConfig:
  """The pretraining preset `name_or_path`: one of NAMES, or a preset file's path.

  Raises:
    ConfigError: an unknown name, a missing or failing file, or no CONFIG in it.
  """
  if is_file(name_or_path):
    path = name_or_path
  elif name_or_path in NAMES:
    path = os.path.join(directory(), f"{name_or_path}.py")
  else:
    raise ConfigError(f"unknown model_size {name_or_path!r}; choose one of {list(NAMES)} "
                      "or give the path of a preset file")
  config = getattr(_load(path), "CONFIG", None)
  if not isinstance(config, PretrainConfig):
    raise ConfigError(f"{path} defines no CONFIG = PretrainConfig(...); copy one of "
                      f"{directory()}/{{{','.join(NAMES)}}}.py")
  return config


def finetune(task: str, num_layers: int) -> FinetuneConfig:
  """The fine-tuning defaults (configs/finetune.py) for `task` on `num_layers` blocks."""
  return _load(os.path.join(directory(), _FINETUNE_FILE)).get(task, num_layers)
