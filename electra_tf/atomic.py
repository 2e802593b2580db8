"""Writes that never leave half a file or directory behind: temporary name, then rename."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator


def atomic_write_text(path: str, text: str) -> None:
  """Writes `text` to `path` through a temporary file so readers never see half a file."""
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
  try:
    with os.fdopen(fd, "w", encoding="utf-8") as f:
      f.write(text)
    os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the file from other users
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(OSError):
      os.remove(tmp)
    raise


@contextlib.contextmanager
def staging_dir(final_dir: str) -> Iterator[str]:
  """A temporary directory beside `final_dir`, removed unless the caller renamed it away."""
  parent = os.path.dirname(os.path.abspath(final_dir))
  os.makedirs(parent, exist_ok=True)
  tmp = os.path.join(parent, f".{os.path.basename(os.path.abspath(final_dir))}"
                             f".tmp-{uuid.uuid4().hex[:8]}")
  os.makedirs(tmp)
  try:
    yield tmp
  finally:
    shutil.rmtree(tmp, ignore_errors=True)


def replace_dir(tmp_dir: str, final_dir: str) -> None:
  """Moves a finished `tmp_dir` to `final_dir`, replacing an old one with two renames."""
  old = None
  if os.path.exists(final_dir):
    old = f"{tmp_dir}.old"
    os.rename(final_dir, old)
  os.rename(tmp_dir, final_dir)
  if old:
    shutil.rmtree(old, ignore_errors=True)


def write_dir(final_dir: str, write: Callable[[str], None]) -> str:
  """Runs `write(tmp)` on a staging directory, then puts it at `final_dir` (replacing it)."""
  with staging_dir(final_dir) as tmp:
    write(tmp)
    replace_dir(tmp, final_dir)
  return final_dir
