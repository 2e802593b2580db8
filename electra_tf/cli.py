"""What every entry point shares: one `error:` line and an exit code instead of a traceback."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator

from electra_tf import fileio
from electra_tf.errors import RuntimeFailure, UserError, tf_error_line


def _one_line(text: str) -> str:
  return " ".join(str(text).split())


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
  """UserError -> exit 2, RuntimeFailure and OSError -> exit 1, each as one stderr line."""
  try:
    yield
  except (UserError, RuntimeFailure) as exc:
    print(f"error: {_one_line(exc)}", file=sys.stderr)
    sys.exit(exc.exit_code)
  except OSError as exc:
    print(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
    sys.exit(1)


def check_output_dir(path: str, flag: str) -> None:
  """Refuses, before any work, an output directory that cannot be created; creates nothing.

  Checks that `path` is not a file, that no parent of it is a file, and that its nearest
  existing directory accepts a new entry (a temporary directory, removed at once). This
  also catches what permission bits do not stop as root, such as paths under /proc. A
  remote path (gs://) needs a file system registered for its scheme and must not be a
  file; TF reports other errors when writing.

  Raises:
    UserError: naming `flag`, the path and why it cannot be written.
  """
  if fileio.is_remote(path):
    fileio.check_path(path, flag)
    import tensorflow as tf

    try:
      is_file = fileio.exists(path) and not fileio.isdir(path)
    except tf.errors.OpError as exc:  # no such bucket, no credentials, no network
      raise UserError(f"{flag} {path} cannot be reached ({tf_error_line(exc)}); check the "
                      "path and your access to it") from None
    if is_file:
      raise UserError(f"{flag} {path} is a file; give a directory")
    return
  path = os.path.abspath(os.path.expanduser(path))  # a local path from here on
  if os.path.exists(path) and not os.path.isdir(path):
    raise UserError(f"{flag} {path} is a file; give a directory")
  existing = path
  while not os.path.exists(existing):
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing):
    raise UserError(f"{flag} {path} cannot be created: {existing} is a file, not a "
                    "directory; choose another path")
  try:
    os.rmdir(tempfile.mkdtemp(prefix=".write-check-", dir=existing))
  except OSError as exc:
    raise UserError(f"{flag} {path} cannot be created: nothing can be written in {existing} "
                    f"({exc.strerror}); choose another path") from None


def check_input_paths(values: dict[str, str | None]) -> None:
  """Refuses, before any work, an input path (or comma-separated paths) of a flag whose
  scheme TensorFlow has no file system for (fileio.check_path)."""
  for flag, value in values.items():
    for path in (value or "").split(","):
      if path.strip():
        fileio.check_path(path.strip(), flag)


def flags_parser(flag_values):
  """An absl `flags_parser` that reports bad flags, and arguments that are not flags, in one
  line with exit code 2."""
  from absl import flags

  def parse(argv):
    try:
      rest = flag_values(argv)
    except flags.Error as exc:
      print(f"error: {_one_line(exc)}", file=sys.stderr)
      sys.exit(2)
    if len(rest) > 1:
      print(f"error: unexpected arguments {rest[1:]}; every setting is a --flag=value",
            file=sys.stderr)
      sys.exit(2)
    return rest

  return parse


def run_command(main, module_name: str) -> None:
  """Runs an absl `main` defined in the command module `module_name`, as a console script,
  `python -m`, or a thin script in a checkout (pretrain.py, finetune.py) alike.

  Whichever file started the process, `--help` shows that module's docstring and flags, and
  flag or argument errors are one `error:` line with exit code 2.
  """
  from absl import app, flags

  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # our error line should be all of stderr
  module = sys.modules[module_name]
  launcher = sys.modules["__main__"]
  if launcher is not module:
    launcher.__doc__ = module.__doc__  # absl prints the __main__ docstring as the usage
    # absl's --help lists the flags of the module named by sys.argv[0].
    for flag in flags.FLAGS.get_flags_for_module(module_name):
      flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
  app.run(main, flags_parser=flags_parser(flags.FLAGS))
