"""multiprocessing internals the local worker pool (beam_pipeline/local) needs: its
forkserver started, found and cleaned up, its processes started without the caller's main
module, and a file descriptor handed to a new worker.

Checked with CPython 3.10 to 3.12. Free of Beam: worker processes import it.
"""
import multiprocessing
import shutil
import threading
from multiprocessing import context as contexts, forkserver, popen_forkserver, reduction, spawn, util
from typing import Any, Dict, Optional

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



# Guards spawn.get_preparation_data while a process starts without the main module.
_preparing = threading.Lock()


def forkserver_context() -> multiprocessing.context.BaseContext:
  """The forkserver context, its processes started without the main module of the program that
  starts them.

  multiprocessing has each new process run the program's main script again (as __mp_main__),
  so that what it defines unpickles there. The workers run this package's functions only, and
  a caller's script that calls the conversion at its top level, without an ``if __name__ ==
  '__main__'`` guard (Airflow's external_python task is such a script), would run again in
  every worker, which then dies. ``popen_forkserver.Popen._launch``, undocumented, sends the
  new process what ``spawn.get_preparation_data`` gives; for the context's processes the
  main module is left out of it. Where Python no longer has these names, the standard
  context, main module and all.
  """
  if _WithoutMain is None or not hasattr(spawn, 'get_preparation_data'):
    return multiprocessing.get_context('forkserver')
  return _WithoutMain()


def _without_main(data: Dict[str, Any]) -> Dict[str, Any]:
  return {key: value for key, value in data.items() if key not in ('init_main_from_path', 'init_main_from_name')}


_WithoutMain = None
if hasattr(contexts, 'ForkServerContext') and hasattr(popen_forkserver, 'Popen'):  # not on Windows

  class _ProcessWithoutMain(contexts.ForkServerProcess):
    """A forkserver process that does not run the main module again (forkserver_context)."""

    @staticmethod
    def _Popen(process_obj):  # pylint: disable=invalid-name  # multiprocessing's name
      with _preparing:
        prepared = spawn.get_preparation_data
        spawn.get_preparation_data = lambda name: _without_main(prepared(name))
        try:
          return popen_forkserver.Popen(process_obj)
        finally:
          spawn.get_preparation_data = prepared

  class _WithoutMain(contexts.ForkServerContext):  # type: ignore[no-redef]
    Process = _ProcessWithoutMain
