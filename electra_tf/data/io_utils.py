"""File helpers shared by the data tools: globbing, checked UTF-8 line reading, atomic writes."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence

from electra_tf import fileio
from electra_tf.atomic import (  # noqa: F401
    atomic_write_bytes,
    atomic_write_text,
    replace_dir,
    staging_dir,
)
from electra_tf.errors import UserError

# Lines longer than this are cut at a space (or a character boundary): a corpus with one
# 10 MB line must not need 10 MB strings all the way through tokenization.
MAX_LINE_BYTES = 1 << 16
_BLOCK_BYTES = 1 << 20
_BLANK_LINE = re.compile(rb"\n[ \t\r\f\v]*\n")
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def expand_patterns(patterns: str | Sequence[str], what: str = "--input_files") -> list[str]:
  """Expands comma-separated globs (or a list of them) to a sorted list of existing files.

  Raises:
    UserError: a pattern matches no file.
  """
  if isinstance(patterns, str):
    patterns = [p for p in patterns.split(",") if p.strip()]
  if not patterns:
    raise UserError(f"{what} is empty; give a file or a glob such as 'corpus/*.txt'")
  files = []
  for pattern in patterns:
    pattern = pattern.strip()
    fileio.check_path(pattern, what)
    pattern = pattern if fileio.is_remote(pattern) else os.path.expanduser(pattern)
    if fileio.isdir(pattern):
      raise UserError(f"{pattern} is a directory ({what}); pass a glob such as "
                      f"'{fileio.join(pattern, '*.txt')}'")
    matches = [p for p in fileio.glob(pattern) if fileio.isfile(p)]
    if not matches:
      raise UserError(f"no files match {pattern!r} ({what}); check the path or quote the glob")
    files.extend(matches)
  # Keep the first occurrence so overlapping globs do not duplicate text.
  return list(dict.fromkeys(files))


def decode_line(raw: bytes, path: str, offset: int) -> str:
  """Decodes one line of a text file, naming the file and byte offset on bad input."""
  if offset == 0 and raw.startswith(_UTF16_BOMS):
    raise UserError(f"{path} is UTF-16 (it starts with a UTF-16 byte-order mark); re-encode "
                    "it as UTF-8, e.g. with iconv -f UTF-16 -t UTF-8")
  if b"\0" in raw:
    at = offset + raw.index(b"\0")
    raise UserError(f"{path}: NUL byte at byte {at}; this looks like a binary file, "
                    "give plain UTF-8 text files only")
  try:
    return raw.decode("utf-8")
  except UnicodeDecodeError as e:
    raise UserError(f"{path}: invalid UTF-8 at byte {offset + e.start}; "
                    "re-encode the file as UTF-8") from None


def _cut_point(line: bytes, limit: int) -> int:
  """Where to cut an over-long line: the last space before `limit`, else a UTF-8 boundary."""
  space = line.rfind(b" ", limit // 2, limit)
  if space > 0:
    return space + 1
  cut = limit
  while cut > 0 and (line[cut] & 0xC0) == 0x80:  # never split a multi-byte character
    cut -= 1
  return cut or limit


def _pieces(line: bytes, at: int, limit: int) -> Iterator[tuple[int, bytes]]:
  while len(line) > limit:
    cut = _cut_point(line, limit)
    yield at, line[:cut]
    at, line = at + cut, line[cut:]
  yield at, line


def iter_raw_lines(path: str, start: int = 0, end: int | None = None,
                   max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[int, bytes]]:
  """Yields (byte offset, line without newline) for the lines starting in [start, end).

  Over-long lines come out as several consecutive pieces of at most `max_line_bytes`, so
  memory stays bounded by the block size whatever the file holds.
  """
  end = fileio.getsize(path) if end is None else end
  with fileio.open(path, "rb") as f:
    f.seek(start)
    pos, partial, partial_at = start, b"", start
    while pos < end:
      block = f.read(min(_BLOCK_BYTES, end - pos))
      if not block:
        break
      pos += len(block)
      *lines, partial = (partial + block).split(b"\n")
      for line in lines:
        yield from _pieces(line, partial_at, max_line_bytes)
        partial_at += len(line) + 1
      while len(partial) > max_line_bytes:  # a line longer than a block: emit it piecewise
        cut = _cut_point(partial, max_line_bytes)
        yield partial_at, partial[:cut]
        partial_at, partial = partial_at + cut, partial[cut:]
    if partial:
      yield from _pieces(partial, partial_at, max_line_bytes)


def document_cut(path: str, offset: int, search_bytes: int = 4 << 20) -> int:
  """The first document boundary (after a blank line) at or after `offset` in `path`.

  Falls back to the next line start when no blank line follows within `search_bytes`
  (one giant document), and to the end of the file when there is no newline at all.
  """
  size = fileio.getsize(path)
  if offset <= 0:
    return 0
  with fileio.open(path, "rb") as f:
    f.seek(offset - 1)  # include the previous byte: a boundary may start right there
    data = f.read(min(search_bytes, size - offset + 1))
  match = _BLANK_LINE.search(data)
  if match:
    return offset - 1 + match.end()
  newline = data.find(b"\n")
  return size if newline < 0 else offset + newline


def run_cli(run: Callable[[], None]) -> None:
  """Runs a CLI body: a UserError becomes one `error: ...` line on stderr and exit code 2,
  an OSError (disk full, ...) one line and exit code 1."""
  from electra_tf import cli

  try:
    with cli.one_line_errors():
      run()
  except KeyboardInterrupt:
    print("error: interrupted; nothing was written", file=sys.stderr)
    sys.exit(130)
