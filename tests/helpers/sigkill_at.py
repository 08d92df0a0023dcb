"""Runs the real CLI, but SIGKILLs its own process at one exact point of its work.

Usage: python tests/helpers/sigkill_at.py <point> <CLI arguments...>

<point> is one of:

- ``PATH`` (or ``before:PATH``): just before the rename through Beam's FileSystems whose
  destination is <output>/PATH (for example beam_pipeline.json: its temporary copy is
  complete, the rename that commits it has not happened);
- ``after:PATH``: just after <output>/PATH got its final name, even in the middle of a
  rename of many files (LocalFileSystem.rename renames them one by one with os.rename);
- ``listed:N`` or ``checked:N``: once the run has listed, or checked, N inputs, as the
  progress counters count them (the DoFns of this process update them, once per batch).

The process kills itself with SIGKILL, as the OOM killer or `kill -9` would. Every final
name is given by a rename in this process (worker processes write temporary names
only), and the counters are this process's. Polling the output directory from outside,
or killing after a delay, cannot hit a given moment on a machine of unknown speed; this
can, every time. If the point is never reached the run ends normally, and the test sees
exit code 0 instead of -9.
"""
import os
import signal
import sys
from typing import Callable, List

from apache_beam.io.filesystems import FileSystems

from beam_pipeline import cli
from beam_pipeline.core import progress_counts


def _die() -> None:
  os.kill(os.getpid(), signal.SIGKILL)


def _output(argv: List[str]) -> str:
  return next(arg.split('=', 1)[1] for arg in argv if arg.startswith('--output=')).rstrip('/')


def _kill_before(original, target: str):
  def rename(sources, destinations, *args, **kwargs):
    if any(os.fspath(destination).rstrip('/') == target for destination in destinations):
      _die()
    return original(sources, destinations, *args, **kwargs)
  return rename


def _kill_after(original: Callable, target: str):
  def rename(source, destination, *args, **kwargs):
    original(source, destination, *args, **kwargs)
    if os.fspath(destination).rstrip('/') == target:
      _die()
  return rename


def _kill_at_count(original: Callable, count: int):
  counted = [0]

  def counter(self, done: int, *args, **kwargs):
    original(self, done, *args, **kwargs)
    counted[0] += done
    if counted[0] >= count:
      _die()
  return counter


def main() -> int:
  point, argv = sys.argv[1], sys.argv[2:]
  kind, _, value = point.rpartition(':')
  if kind in ('listed', 'checked'):
    setattr(progress_counts.Counts, kind, _kill_at_count(getattr(progress_counts.Counts, kind), int(value)))
  elif kind == 'after':
    os.rename = _kill_after(os.rename, f'{_output(argv)}/{value}')
  elif kind in ('', 'before'):
    FileSystems.rename = staticmethod(_kill_before(FileSystems.rename, f'{_output(argv)}/{value}'))
  else:
    raise SystemExit(f'sigkill_at.py: unknown point {point!r}')
  return cli.main(argv)


if __name__ == '__main__':
  sys.exit(main())
