"""User-facing errors: one clear line naming the problem and what to do; entry points exit 2."""

from __future__ import annotations

import dataclasses
import re
from typing import Any


class UserError(Exception):
  """Bad input or usage (wrong vocab, corrupt data, bad flag). Entry points print it, exit 2."""

  exit_code = 2


class RuntimeFailure(Exception):
  """A failure while running (disk full, lost worker). Entry points print it, exit 1."""

  exit_code = 1


# JSON types a dataclass field of each annotation accepts (ints are valid floats).
_JSON_TYPES = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,)}


def check_field_types(cls: type, values: Any, where: str,
                      display: dict[str, str] | None = None) -> None:
  """Refuses JSON `values` whose int/float/str/bool fields of dataclass `cls` have another
  type, naming the field, so that a hand-edited config fails with its name instead of a
  comparison error deep inside. Unknown keys and other field types are left to `cls`.

  Args:
    cls: the dataclass `values` will be given to.
    values: what was read from JSON.
    where: the file (and part of it) for the message.
    display: the name a field has in the file, where it differs from the field's.

  Raises:
    UserError: `values` is not an object, or a field has the wrong type.
  """
  if not isinstance(values, dict):
    raise UserError(f"{where}: expected a JSON object, got {type(values).__name__}")
  for field in dataclasses.fields(cls):
    if field.name not in values:
      continue
    value, annotation = values[field.name], str(field.type)
    optional = annotation.endswith(" | None")
    allowed = _JSON_TYPES.get(annotation.removesuffix(" | None"))
    if allowed is None or (value is None and optional):
      continue
    if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
      name = (display or {}).get(field.name, field.name)
      raise UserError(f"{where}: {name} must be {annotation}, got {value!r}")


def tf_error_line(exc: BaseException) -> str:
  """The informative first line of a TensorFlow error, without its op and function names."""
  text = getattr(exc, "message", None) or str(exc)
  text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", text)
  first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
  return re.sub(r"\s*\[Op:\w+\].*$", "", first)
