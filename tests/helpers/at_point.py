"""Runs the real CLI, but acts at one exact point of its work: SIGKILLs its own process, sends
its process group SIGINT (a terminal's Ctrl-C), or waits there until a file appears.

Usage: python tests/helpers/at_point.py <action> <point> <CLI arguments...>

<action> is ``kill``, ``interrupt`` or ``wait=PATH``; <point> is one of:

- ``PATH`` (or ``before:PATH``): just before the rename through Beam's FileSystems whose
  destination is <output>/PATH (for example beam_pipeline.json: its temporary copy is
  complete, the rename that commits it has not happened);
- ``after:PATH``: just after <output>/PATH got its final name, even in the middle of a
  rename of many files (LocalFileSystem.rename renames them one by one with os.rename);
- ``listed:N`` or ``checked:N``: once the run has listed, or checked, N inputs, as the
  progress counters count them (the DoFns of this process update them, once per batch).

``kill``: the process kills itself with SIGKILL, as the OOM killer or `kill -9` would. Every final
name is given by a rename in this process (worker processes write temporary names
only), and the counters are this process's. Polling the output directory from outside,
or killing after a delay, cannot hit a given moment on a machine of unknown speed; this
can, every time. If the point is never reached the run ends normally, and the test sees
exit code 0 instead of -9. ``interrupt`` goes on after the signal, as a Ctrl-C'd process
does; ``wait=PATH`` holds the run there (another run can be tried meanwhile) until PATH exists.
"""
import os
import signal
import sys
import time
from typing import Callable, List

from apache_beam.io.filesystems import FileSystems

from beam_pipeline import cli
from beam_pipeline.core.console import progress_counts


_ACTION: List[Callable[[], None]] = []


def _act() -> None:
  """The action, once: later points pass."""
  if _ACTION:
    _ACTION.pop()()


def _action(name: str) -> Callable[[], None]:
  if name == 'kill':
    return lambda: os.kill(os.getpid(), signal.SIGKILL)
  if name == 'interrupt':
    return lambda: os.killpg(0, signal.SIGINT)
  if name.startswith('wait='):
    def wait() -> None:
      while not os.path.exists(name[len('wait='):]):
        time.sleep(0.05)
    return wait
  raise SystemExit(f'at_point.py: unknown action {name!r}')


def _output(argv: List[str]) -> str:
  return next(arg.split('=', 1)[1] for arg in argv if arg.startswith('--output=')).rstrip('/')


def _before(original, target: str):
  def rename(sources, destinations, *args, **kwargs):
    if any(os.fspath(destination).rstrip('/') == target for destination in destinations):
      _act()
    return original(sources, destinations, *args, **kwargs)
  return rename


def _after(original: Callable, target: str):
  def rename(source, destination, *args, **kwargs):
    original(source, destination, *args, **kwargs)
    if os.fspath(destination).rstrip('/') == target:
      _act()
  return rename


def _at_count(original: Callable, count: int):
  counted = [0]

  def counter(self, done: int, *args, **kwargs):
    original(self, done, *args, **kwargs)
    counted[0] += done
    if counted[0] >= count:
      _act()
  return counter


def main() -> int:
  action, point, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
  _ACTION.append(_action(action))
  kind, _, value = point.rpartition(':')
  if kind in ('listed', 'checked'):
    setattr(progress_counts.Counts, kind, _at_count(getattr(progress_counts.Counts, kind), int(value)))
  elif kind == 'after':
    os.rename = _after(os.rename, f'{_output(argv)}/{value}')
  elif kind in ('', 'before'):
    FileSystems.rename = staticmethod(_before(FileSystems.rename, f'{_output(argv)}/{value}'))
  else:
    raise SystemExit(f'at_point.py: unknown point {point!r}')
  return cli.main(argv)


if __name__ == '__main__':
  sys.exit(main())
