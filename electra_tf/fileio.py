"""Files on local disk and on the file systems TensorFlow registers (gs://, ram://, s3://...).

Local paths use os and open() (fast, unchanged behaviour); a path with a scheme goes
through tf.io.gfile, imported only then, so the data tools stay quick to start. Check a
path given by a user with `check_path` before any work: an unregistered scheme is one
UserError line naming what to install.

ram://, the in-memory file system the tests use, answers by name prefix (ram://a "exists"
when ram://ab/x does) and appends to a file opened for writing; the functions here hide
both. Neither it nor an object store renames a directory (see electra_tf.atomic), and it
lists only the directories made with `makedirs`.
"""

from __future__ import annotations

import builtins
import importlib
import os
import posixpath
import re
import shutil
from collections.abc import Iterator
from typing import IO, Any

from electra_tf.errors import UserError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# The Python package whose import registers a scheme with TensorFlow, and what to install.
_GCS = ("tensorflow_io_gcs_filesystem",
        "install it with pip install 'electra_tf[gcs]' (tensorflow-io-gcs-filesystem)")
_TF_IO = ("tensorflow_io", "install it with pip install tensorflow-io")
_PROVIDERS = {"gs": _GCS, **{name: _TF_IO for name in ("s3", "hdfs", "viewfs", "az", "http",
                                                        "https")}}


def scheme(path: str) -> str | None:
  """The scheme of `path` ("gs" for gs://bucket/x), or None for a local path."""
  match = _SCHEME.match(path)
  return match.group(1).lower() if match else None


def is_remote(path: str) -> bool:
  """True for a path with a scheme, read and written through tf.io.gfile."""
  return scheme(path) is not None


def _gfile():
  import tensorflow as tf

  return tf.io.gfile


def _registered(name: str) -> bool:
  return name in _gfile().get_registered_schemes()


def check_path(path: str, flag: str = "") -> None:
  """Refuses, before any work, a path whose scheme TensorFlow has no file system for.

  Raises:
    UserError: naming the flag, the scheme and the package that provides it.
  """
  name = scheme(path)
  if name is None or _registered(name):
    return
  module, hint = _PROVIDERS.get(name, (None, None))
  if module:
    try:
      importlib.import_module(module)  # registers its schemes when installed
    except Exception:  # not installed, or not loadable here: the check below says so
      pass
  if not _registered(name):
    if hint is None:
      known = ", ".join(f"{s}://" for s in sorted(_gfile().get_registered_schemes()) if s)
      hint = f"give a local path or one on {known}"
    where = f"{flag} {path}" if flag else path
    raise UserError(f"{where}: TensorFlow has no file system for {name}://; {hint}")


def join(path: str, *parts: str) -> str:
  return posixpath.join(path, *parts) if is_remote(path) else os.path.join(path, *parts)


def _split_scheme(path: str) -> tuple[str, str]:
  match = _SCHEME.match(path)
  return path[:match.end()], path[match.end():]


def dirname(path: str) -> str:
  """The parent of `path`; for a remote path, never above its scheme's root (gs://)."""
  if not is_remote(path):
    return os.path.dirname(path)
  prefix, rest = _split_scheme(path)
  return prefix + posixpath.dirname(rest.rstrip("/"))


def basename(path: str) -> str:
  if not is_remote(path):
    return os.path.basename(path)
  return posixpath.basename(_split_scheme(path)[1].rstrip("/"))


def abspath(path: str) -> str:
  """A local path made absolute; a remote path as it is, without a trailing slash."""
  if not is_remote(path):
    return os.path.abspath(path)
  prefix, rest = _split_scheme(path)
  return prefix + rest.rstrip("/")


def exists(path: str) -> bool:
  if not is_remote(path):
    return os.path.exists(path)
  if not _gfile().exists(path):
    return False
  if scheme(path) != "ram" or not _split_scheme(path)[1].strip("/"):
    return True
  # ram:// matches by prefix (ram://ab/x makes ram://a "exist"): ask the parent's listing.
  return basename(path) in {n.rstrip("/") for n in _gfile().listdir(dirname(path))}


def isdir(path: str) -> bool:
  if is_remote(path):
    return exists(path) and _gfile().isdir(path)
  return os.path.isdir(path)


def isfile(path: str) -> bool:
  if is_remote(path):
    return exists(path) and not _gfile().isdir(path)
  return os.path.isfile(path)


def getsize(path: str) -> int:
  return _gfile().stat(path).length if is_remote(path) else os.path.getsize(path)


def getmtime(path: str) -> float:
  if is_remote(path):
    return _gfile().stat(path).mtime_nsec / 1e9
  return os.path.getmtime(path)


def makedirs(path: str) -> None:
  """Creates `path` and its parents; an existing directory is fine."""
  if is_remote(path):
    _gfile().makedirs(path)
  else:
    os.makedirs(path, exist_ok=True)


def listdir(path: str) -> list[str]:
  """The names in directory `path`, sorted."""
  if not is_remote(path):
    return sorted(os.listdir(path))
  names = {name.rstrip("/") for name in _gfile().listdir(path)}
  if scheme(path) == "ram":
    # ram:// lists, beside the real children of ram://a, pieces of the names of siblings
    # that share its prefix (ram://ab/x shows as "b"): keep the names that exist.
    names = {name for name in names if name and _gfile().exists(join(path, name))}
  return sorted(names)


def glob(pattern: str) -> list[str]:
  """The paths matching `pattern`, sorted."""
  if is_remote(pattern):
    return sorted(_gfile().glob(pattern))
  import glob as globmodule

  return sorted(globmodule.glob(pattern))


def walk(top: str) -> Iterator[tuple[str, list[str], list[str]]]:
  """(directory, subdirectory names, file names), top-down, as os.walk."""
  if not is_remote(top):
    yield from os.walk(top)
    return
  if not isdir(top):
    return
  names = listdir(top)
  dirs = [n for n in names if isdir(join(top, n))]
  yield top, dirs, [n for n in names if n not in dirs]
  for name in dirs:
    yield from walk(join(top, name))


def open(path: str, mode: str = "r") -> IO[Any]:  # noqa: A001 - the file-object opener
  """A file object; text modes read and write UTF-8."""
  if is_remote(path):
    if mode.startswith("w") and scheme(path) == "ram" and isfile(path):
      remove(path)  # ram:// appends to a file opened for writing instead of truncating it
    return _gfile().GFile(path, mode)
  if "b" in mode:
    return builtins.open(path, mode)
  return builtins.open(path, mode, encoding="utf-8")


def read_text(path: str) -> str:
  with open(path) as f:
    return f.read()


def read_bytes(path: str) -> bytes:
  with open(path, "rb") as f:
    return f.read()


def write_text(path: str, text: str) -> None:
  """Writes `path` in place (see electra_tf.atomic for writes readers may race)."""
  with open(path, "w") as f:
    f.write(text)


def remove(path: str) -> None:
  if is_remote(path):
    _gfile().remove(path)
  else:
    os.remove(path)


def rmtree(path: str) -> None:
  """Removes a directory and everything in it; a missing one is fine."""
  if not is_remote(path):
    shutil.rmtree(path, ignore_errors=True)
    return
  if not exists(path):
    return
  if scheme(path) != "ram":
    _gfile().rmtree(path)
    return
  # Bottom-up through our own listing: gfile.rmtree on ram:// trips over the phantom
  # names its listing shows (see listdir).
  import tensorflow as tf

  for directory, _, files in reversed(list(walk(path))):
    for name in files:
      _gfile().remove(join(directory, name))
    try:
      _gfile().remove(directory)
    except tf.errors.NotFoundError:
      pass


def rename(source: str, target: str, overwrite: bool = False) -> None:
  """Renames a file (on object stores a copy and a delete: the target appears whole)."""
  if is_remote(source) or is_remote(target):
    _gfile().rename(source, target, overwrite=overwrite)
  elif overwrite:
    os.replace(source, target)
  else:
    if os.path.exists(target):
      raise FileExistsError(17, "File exists", target)
    os.rename(source, target)


def copy(source: str, target: str) -> None:
  """Copies a file, replacing `target`; either may be remote."""
  if is_remote(source) or is_remote(target):
    _gfile().copy(source, target, overwrite=True)
  else:
    shutil.copyfile(source, target)
