"""The export formats: what each writes, from which checkpoint, and the extra its tools need."""

from __future__ import annotations

import dataclasses
import importlib.util

from electra_tf import fileio
from electra_tf.errors import UserError


@dataclasses.dataclass(frozen=True)
class Format:
  """One --format of electra-export.

  Attributes:
    name: the flag value.
    extra: the package extra that installs what writing (and loading) it needs.
    needs: modules the export itself imports, checked before any work.
    what: one line for --help.
  """

  name: str
  extra: str | None
  needs: tuple[str, ...]
  what: str


FORMATS = {f.name: f for f in (
    Format("saved_model", None, (), "a versioned SavedModel for TF Serving (the default)"),
    Format("tfhub", "tfhub", (), "TF Hub preprocessor + encoder SavedModels"),
    Format("onnx", "onnx", ("tf2onnx", "onnx"), "an ONNX model (encoder or task model)"),
    Format("tflite", "tflite", (), "float and int8 TFLite task models with their vocab"),
    Format("keras_hub", "keras-hub", ("h5py",), "a keras-hub ElectraBackbone preset directory"),
)}


def get(name: str) -> Format:
  """The Format called `name`, after checking that its tools are installed.

  Raises:
    UserError: an unknown format, or a missing module (naming the extra to install).
  """
  if name not in FORMATS:
    raise UserError(f"unknown --format={name}; choose one of {', '.join(FORMATS)}")
  fmt = FORMATS[name]
  missing = [m for m in fmt.needs if importlib.util.find_spec(m) is None]
  if missing:
    raise UserError(f"--format={name} needs {', '.join(missing)}, which is not installed; "
                    f"pip install 'electra_tf[{fmt.extra}]'")
  return fmt


def check_new_dir(path: str, overwrite: bool) -> None:
  """Refuses an existing, non-empty output directory unless `overwrite`."""
  if fileio.isdir(path) and fileio.listdir(path) and not overwrite:
    raise UserError(f"--export_dir {path} already exists; remove it or pass --overwrite")
