"""Local tables for classification: .tsv and .csv with a header row, and .jsonl, read with
checks that name the file and line of what is wrong."""

from __future__ import annotations

import csv
import io
import json
import os

from electra_tf import fileio
from electra_tf.errors import UserError


class DataFormatError(UserError):
  """A classification file is unreadable or lacks what the task needs; names file and row."""


def read_rows(path: str) -> tuple[list[str], list[tuple[int, dict]]]:
  """(columns, [(line number, row dict)]) of a .tsv, .csv or .jsonl file."""
  fileio.check_path(path)
  if fileio.isdir(path):
    raise DataFormatError(f"{path} is a directory; pass the .tsv, .csv or .jsonl file")
  if not fileio.isfile(path):
    raise DataFormatError(f"{path} does not exist")
  raw = fileio.read_bytes(path)
  if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
    raise DataFormatError(f"{path} is UTF-16 (it starts with a UTF-16 byte-order mark); "
                          "convert it, e.g. with iconv -f UTF-16 -t UTF-8")
  if b"\0" in raw:
    line = raw.count(b"\n", 0, raw.index(b"\0")) + 1
    raise DataFormatError(f"{path} line {line} holds a NUL byte; this looks like a binary "
                          "file, give UTF-8 text")
  try:
    text = raw.decode("utf-8-sig")
  except UnicodeDecodeError as exc:
    raise DataFormatError(f"{path} is not UTF-8 (byte {exc.start}); convert it, e.g. with "
                          f"iconv -t UTF-8") from exc
  if not text.strip():
    raise DataFormatError(f"{path} is empty" + (" (only whitespace)" if text else ""))
  ext = os.path.splitext(path)[1].lower()
  if ext in (".jsonl", ".json"):
    rows, columns = [], []
    # Only newlines end a line: str.splitlines() would also cut at U+2028, U+0085 and other
    # separators that JSON strings may hold unescaped.
    for number, line in enumerate(text.split("\n"), 1):
      if not line.strip():
        continue
      try:
        row = json.loads(line)
      except json.JSONDecodeError as exc:
        raise DataFormatError(f"{path} line {number} is not JSON: {exc.msg}") from exc
      if not isinstance(row, dict):
        raise DataFormatError(f"{path} line {number} is not a JSON object")
      columns += [k for k in row if k not in columns]
      rows.append((number, row))
    return columns, rows
  if ext not in (".tsv", ".csv"):
    raise DataFormatError(f"{path}: unknown file type {ext!r}; use .tsv, .csv or .jsonl")
  # One field may be as long as the file (a 10 MB review is text, just long; the tokenizer
  # keeps what fits), above csv's default limit of 128 KB.
  csv.field_size_limit(max(csv.field_size_limit(), len(text)))
  reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t" if ext == ".tsv" else ",")
  lines = [(n, r) for n, r in enumerate(reader, 1) if r]
  columns = lines[0][1]
  rows = []
  for number, values in lines[1:]:
    if len(values) != len(columns):
      raise DataFormatError(f"{path} line {number} has {len(values)} fields but the header "
                            f"has {len(columns)}")
    rows.append((number, dict(zip(columns, values))))
  return columns, rows
