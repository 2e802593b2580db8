"""What the hostile-input tests share: running a command and checking what it left behind."""

import json
import os
import shutil

from testing_utils import run_command

# One document of plain English, one sentence a line.
TEXT = "The quick brown fox jumps over the dog.\n" * 40


def run(command, *args, timeout=300):
  return run_command("build_data" if command == "build" else command, *args, timeout=timeout)


def assert_no_temporaries(directory):
  leftovers = [f for f in os.listdir(directory) if ".tmp" in f or ".write-check" in f]
  assert not leftovers, leftovers


def assert_nothing_written(path):
  """`path` was not created, and no temporary name was left beside it."""
  path = str(path)
  assert not os.path.exists(path), os.listdir(path) if os.path.isdir(path) else path
  assert_no_temporaries(os.path.dirname(path))


def flip_bytes(path, count=16):
  """Corrupts `count` bytes in the middle of a file, keeping its size."""
  data = bytearray(open(path, "rb").read())
  for i in range(len(data) // 2, len(data) // 2 + count):
    data[i] ^= 0xFF
  open(path, "wb").write(bytes(data))


def truncate_half(path):
  with open(path, "r+b") as f:
    f.truncate(os.path.getsize(path) // 2)


def edit_json(path, edit):
  with open(path, encoding="utf-8") as f:
    values = json.load(f)
  values = edit(values) or values
  with open(path, "w", encoding="utf-8") as f:
    json.dump(values, f)


def copy(src, dst):
  shutil.copytree(src, dst)
  return dst


def ckpt_data(directory):
  return os.path.join(directory, "ckpt.data-00000-of-00001")
