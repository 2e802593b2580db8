"""Writes that never leave half a file or directory behind.

Locally: a temporary name, then a rename. On a remote file system (gs://, ram://) a file
is still written under a temporary name and renamed (on object stores a copy: the target
appears whole). A directory cannot be renamed there, so it is built in a local staging
directory and copied into place with its completion marker, the file its readers check
(a data dir's manifest.json, an export's config.json), copied last: a directory without
its marker is an unfinished one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator

from electra_tf import fileio


def atomic_write_text(path: str, text: str) -> None:
  """Writes `text` to `path` through a temporary file so readers never see half a file."""
  atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str, data: bytes) -> None:
  """Writes `data` to `path` through a temporary file so readers never see half a file."""
  if fileio.is_remote(path):
    directory = fileio.dirname(path)
    fileio.makedirs(directory)
    tmp = fileio.join(directory, f".{fileio.basename(path)}.{uuid.uuid4().hex[:8]}.tmp")
    try:
      with fileio.open(tmp, "wb") as f:
        f.write(data)
      fileio.rename(tmp, path, overwrite=True)
    except BaseException:
      with contextlib.suppress(Exception):
        fileio.remove(tmp)
      raise
    return
  directory = os.path.dirname(os.path.abspath(path))  # a local path from here on
  os.makedirs(directory, exist_ok=True)
  fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
  try:
    with os.fdopen(fd, "wb") as f:
      f.write(data)
    os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the file from other users
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(OSError):
      os.remove(tmp)
    raise


@contextlib.contextmanager
def staging_dir(final_dir: str) -> Iterator[str]:
  """A temporary directory for building `final_dir`, removed unless the caller renamed it
  away: beside `final_dir` locally, a local temporary one for a remote `final_dir`."""
  if fileio.is_remote(final_dir):
    tmp = tempfile.mkdtemp(prefix=f"{fileio.basename(final_dir)}.tmp-")
  else:
    parent = os.path.dirname(os.path.abspath(final_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{os.path.basename(os.path.abspath(final_dir))}"
                               f".tmp-{uuid.uuid4().hex[:8]}")
    os.makedirs(tmp)
  try:
    yield tmp
  finally:
    shutil.rmtree(tmp, ignore_errors=True)  # always local (above)


def replace_dir(tmp_dir: str, final_dir: str, marker: str) -> None:
  """Moves a finished local `tmp_dir` to `final_dir`, replacing an old one.

  Locally two renames. On a remote file system the old directory's `marker` files go
  first, then the rest of it; the new files are copied with every `marker` (a file name,
  at any depth) after the other files, the top-level one last.
  """
  if fileio.is_remote(final_dir):
    _publish(tmp_dir, final_dir, marker)
    return
  old = None  # both local from here on
  if os.path.exists(final_dir):
    old = f"{tmp_dir}.old"
    os.rename(final_dir, old)
  os.rename(tmp_dir, final_dir)
  if old:
    shutil.rmtree(old, ignore_errors=True)


def _publish(local_dir: str, final_dir: str, marker: str) -> None:
  # The old markers first, top-down: from the first removal on, readers see it unfinished.
  for directory, _, names in fileio.walk(final_dir):
    if marker in names:
      fileio.remove(fileio.join(directory, marker))
  fileio.rmtree(final_dir)
  files, markers = [], []
  for directory, _, names in os.walk(local_dir):
    relative = os.path.relpath(directory, local_dir)
    parts = [] if relative == "." else relative.split(os.sep)
    fileio.makedirs(fileio.join(final_dir, *parts))
    for name in sorted(names):
      (markers if name == marker else files).append((*parts, name))
  markers.sort(key=len, reverse=True)  # nested markers before the top-level one
  for parts in files + markers:
    fileio.copy(os.path.join(local_dir, *parts), fileio.join(final_dir, *parts))


def write_dir(final_dir: str, write: Callable[[str], None], marker: str) -> str:
  """Runs `write(tmp)` on a local staging directory, then puts it at `final_dir` (replacing
  it); `marker` names the file readers check (in `final_dir` or its subdirectories),
  which `write` must create."""
  with staging_dir(final_dir) as tmp:
    write(tmp)
    if not any(marker in names for _, _, names in os.walk(tmp)):
      raise AssertionError(f"{marker} was not written in {final_dir}")
    replace_dir(tmp, final_dir, marker)
  return final_dir
