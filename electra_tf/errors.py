"""User-facing errors: one clear line naming the problem and what to do; entry points exit 2."""


class UserError(Exception):
  """Bad input or usage (wrong vocab, corrupt data, bad flag). Entry points print it, exit 2."""

  exit_code = 2


class RuntimeFailure(Exception):
  """A failure while running (disk full, lost worker). Entry points print it, exit 1."""

  exit_code = 1
