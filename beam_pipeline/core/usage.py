"""The error for bad options and inputs, caught by the command line and printed as one line."""


class UsageError(ValueError):
  """A bad option value, a missing input or an unusable output, found before any work."""


class ModelError(ValueError):
  """What makes --embedding_model unusable, said for the user; the launcher puts the option first."""
