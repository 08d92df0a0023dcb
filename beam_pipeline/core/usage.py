"""The error for bad options and inputs, caught by the command line and printed as one line."""


class UsageError(ValueError):
  """A bad option value, a missing input or an unusable output, found before any work."""
