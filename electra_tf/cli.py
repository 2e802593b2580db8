"""What every entry point shares: one `error:` line and an exit code instead of a traceback."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from electra_tf.errors import RuntimeFailure, UserError


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
  """UserError -> exit 2, RuntimeFailure and OSError -> exit 1, each as one stderr line."""
  try:
    yield
  except (UserError, RuntimeFailure) as exc:
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(exc.exit_code)
  except OSError as exc:
    print(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
    sys.exit(1)


def flags_parser(flag_values):
  """An absl `flags_parser` that reports bad flags in one line with exit code 2."""
  from absl import flags

  def parse(argv):
    try:
      return flag_values(argv)
    except flags.Error as exc:
      print(f"error: {exc}", file=sys.stderr)
      sys.exit(2)

  return parse
