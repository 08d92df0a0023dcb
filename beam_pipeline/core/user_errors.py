"""The errors a user fixes: bad options and inputs, an unusable --embedding_model; caught by the
command line and printed as one line."""


class UsageError(ValueError):
  """A bad option value, a missing input or an unusable output, found before any work."""


class ModelError(ValueError):
  """What makes --embedding_model unusable, said for the user; the launcher puts the option first."""
