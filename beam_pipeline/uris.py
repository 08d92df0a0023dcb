"""Whether a URI names a local file or an object in a store (gs://...), without importing Beam.

Worker processes of a local run (workers.py) read and write only local files,
and Beam's import alone costs them 0.6 s, so the scheme test that Beam's
FileSystems.get_scheme makes is made here (tests check that they agree).
"""
import re
from typing import Iterable

# FileSystems.URI_SCHEMA_PATTERN: a scheme is only recognised at the very start.
_SCHEME = re.compile(r'[a-zA-Z][-a-zA-Z0-9+.]*://')


def is_remote(uri: str) -> bool:
  return _SCHEME.match(uri.strip()) is not None


def any_remote(uris: Iterable[str]) -> bool:
  return any(map(is_remote, uris))
