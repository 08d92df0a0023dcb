"""Runs the real CLI, but SIGKILLs its own process at one exact point of its writes.

Usage: python tests/helpers/sigkill_at.py <path in the output> <CLI arguments...>

Just before any rename whose destination is <output>/<path in the output> (for
example beam_pipeline.json: its temporary copy is complete, the rename that commits
it has not happened), the process kills itself with SIGKILL, as the OOM killer or
`kill -9` would. Every final name is given by a rename through Beam's FileSystems
in this process (worker processes write temporary names only). Polling the output
directory from outside cannot hit windows that narrow; this can, every time. If
the point is never reached the run ends normally, and the test sees exit code 0
instead of -9.
"""
import os
import signal
import sys

from apache_beam.io.filesystems import FileSystems

from beam_pipeline import cli


def _kill_before(original, suffix: str):
  def rename(sources, destinations, *args, **kwargs):
    if any(os.fspath(target).rstrip('/').endswith('/' + suffix) for target in destinations):
      os.kill(os.getpid(), signal.SIGKILL)
    return original(sources, destinations, *args, **kwargs)
  return rename


def main() -> int:
  suffix, argv = sys.argv[1], sys.argv[2:]
  FileSystems.rename = staticmethod(_kill_before(FileSystems.rename, suffix))
  return cli.main(argv)


if __name__ == '__main__':
  sys.exit(main())
