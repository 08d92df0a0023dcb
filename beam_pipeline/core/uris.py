"""Paths local and remote (gs://...) told apart, split and joined as Beam's FileSystems
does it, without importing Beam.

Worker processes of a local run read and write only local files, and Beam's import
alone would cost them more than many runs' images; tests check that these agree
with FileSystems.
"""
import os
import re
from typing import Iterable, Tuple

# FileSystems.URI_SCHEMA_PATTERN: a scheme is only recognised at the very start.
_SCHEME = re.compile(r'[a-zA-Z][-a-zA-Z0-9+.]*://')


def is_remote(uri: str) -> bool:
  return _SCHEME.match(uri.strip()) is not None


def any_remote(uris: Iterable[str]) -> bool:
  return any(map(is_remote, uris))


def split(path: str) -> Tuple[str, str]:
  """(head, last component). A local path is made absolute first, as Beam's
  LocalFileSystem does; a remote one splits at its last '/' after the scheme."""
  scheme = _SCHEME.match(path.strip())
  if scheme is None:
    return os.path.split(os.path.abspath(path))
  path = path.strip()
  cut = path.rfind('/', scheme.end())
  return (path, '') if cut < 0 else (path[:cut], path[cut + 1:])


def join(base: str, name: str) -> str:
  return base.rstrip('/') + '/' + name.lstrip('/') if is_remote(base) else os.path.join(base, name)
