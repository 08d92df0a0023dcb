"""Local files listed whole: a directory tree walked, a glob matched with Beam's pattern
semantics, so that nothing Beam's own local listing would drop goes unaccounted for."""
import os
import re
from typing import Iterator, Optional

from apache_beam.io.filesystem import FileSystem
from apache_beam.io.filesystems import FileSystems


def is_local_dir(path: str) -> bool:
  return is_local(path) and os.path.isdir(path)


def walk_local_files(root: str, max_depth: Optional[int] = None, skip: Optional[str] = None) -> Iterator[str]:
  """Every entry of a local tree that is not a directory, symlinks and pipes included,
  down to ``max_depth`` levels below ``root`` (1: its own entries), but for the
  directory ``skip`` (an absolute path).

  Hand-written because Beam's local listing (os.walk) silently drops dangling
  symlinks, recurses once per level (RecursionError past ~1000 levels) and treats
  the path as a pattern ('out [1]'); an input must be listed whole to be
  accounted for. Directory symlinks are listed, not followed (loops); so is a
  subdirectory that cannot be listed, which the read then rejects.
  """
  pending = [(root.rstrip('/') or '/', 1)]
  while pending:
    directory, depth = pending.pop()
    try:
      with os.scandir(directory) as iterator:
        entries = sorted(iterator, key=lambda e: e.name)
    except OSError:
      if depth == 1:
        raise
      yield directory
      continue
    for entry in entries:
      if not entry.is_dir(follow_symlinks=False):
        yield entry.path
      elif skip and os.path.abspath(entry.path) == skip:
        continue
      elif max_depth is None or depth < max_depth:
        pending.append((entry.path, depth + 1))


def match_local_glob(pattern: str, skip: Optional[str] = None) -> Iterator[str]:
  """The local files a glob matches, with Beam's pattern semantics ('*' within a
  directory, '**' across directories), listed by walk_local_files so that nothing
  Beam's local listing would drop goes unaccounted for."""
  prefix = re.match(r'[^[*?]*', pattern).group(0)
  if prefix == pattern:  # no wildcard: the file itself, even a dangling symlink
    if os.path.lexists(pattern) and not os.path.isdir(pattern):
      yield pattern
    return
  top = os.path.dirname(prefix)
  if not os.path.isdir(top or '.'):
    return
  matches = re.compile(FileSystem.translate_pattern(pattern)).match
  # Without '**' a match lies exactly as many levels down as the pattern has '/'s.
  depth = None if '**' in pattern else pattern[len(top):].count('/') + (0 if top else 1)
  for path in walk_local_files(top or '.', depth, skip):
    path = path if top else os.path.relpath(path)
    if matches(path):
      yield path


def is_local(path: str) -> bool:
  return FileSystems.get_scheme(path) is None
