"""The errors a user fixes: bad options and inputs, an unusable --embedding_model; caught by the
command line and printed as one line. And ConversionError, every error of a conversion as the
Python API raises it."""
from typing import List, Sequence


class UsageError(ValueError):
  """A bad option value, a missing input or an unusable output, found before any work."""


class ModelError(ValueError):
  """What makes --embedding_model unusable, said for the user; the launcher puts the option first."""


class ConversionError(Exception):
  """A conversion refused or failed, as beam_pipeline.convert() raises it: what the command line
  says on standard error, and its exit code.

  ``message``: the one line (what the command prints after 'error: '); ``exit_code``: 2 for what
  the user fixes (an option, the input, a full disk), 1 for a run that failed, 130 for Ctrl-C;
  ``details``: the lines the command prints after it (what became of the output, what to do,
  where the log of the run is).
  """

  def __init__(self, message: str, exit_code: int, details: Sequence[str] = ()):
    super().__init__(message, exit_code, tuple(details))
    self.message, self.exit_code, self.details = message, exit_code, tuple(details)

  def __str__(self) -> str:
    return '\n  '.join([self.message, *self.details])

  def lines(self) -> List[str]:
    """The error as the command prints it."""
    return [f'error: {self.message}', *(f'  {line}' for line in self.details)]
