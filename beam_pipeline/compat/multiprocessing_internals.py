"""multiprocessing internals the local worker pool (beam_pipeline/local) needs: its
forkserver started, found and cleaned up, and a file descriptor handed to a new worker.

Checked with CPython 3.10 to 3.12. Free of Beam: worker processes import it.
"""
import shutil
from multiprocessing import forkserver, reduction, util
from typing import Any, Optional

CHECKED_WITH = 'CPython 3.10-3.12'


def start_forkserver() -> None:
  """Spawns this process's forkserver now (it inherits the file descriptors and environment
  of this moment), rather than at the first worker's start: ``forkserver.ensure_running``,
  undocumented, is what the first start calls."""
  forkserver.ensure_running()


def forkserver_pid() -> Optional[int]:
  """The process id of this process's forkserver, if it started one; None also if Python no
  longer keeps it there. multiprocessing has no public call for it, so this reads the
  private ``forkserver._forkserver._forkserver_pid``."""
  return getattr(getattr(forkserver, '_forkserver', None), '_forkserver_pid', None)


def remove_forkserver_socket() -> None:
  """Removes multiprocessing's temporary directory, where the forkserver's socket lives, for a
  command that ends with os._exit: multiprocessing removes it only in the interpreter's own
  exit, through ``util.get_temp_dir``, undocumented. No pool can start in this process
  afterwards."""
  if forkserver_pid():
    shutil.rmtree(util.get_temp_dir(), ignore_errors=True)


class PassedFd:
  """A file descriptor of this process for a worker being created: pickled then, it travels
  through the forkserver as a descriptor, by ``reduction.DupFd``, which multiprocessing
  uses for its own pipes but does not document. ``detach()`` in the worker gives its number
  there."""

  def __init__(self, fd: int):
    self._fd = fd

  def __reduce__(self):
    return _same, (reduction.DupFd(self._fd),)


def _same(value: Any) -> Any:
  return value

