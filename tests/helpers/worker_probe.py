"""Tasks for the worker pool's tests: which of some modules a worker process has imported."""
import multiprocessing
import sys
from concurrent.futures import Executor
from typing import Dict, Iterable, List


def imported(modules: Iterable[str]) -> Dict[str, bool]:
  return {name: name in sys.modules for name in modules}


def imported_in_each(pool: Executor, count: int, modules: Iterable[str]) -> List[Dict[str, bool]]:
  """``imported(modules)`` in each of the pool's ``count`` workers: every task waits at a
  barrier until all have started, so no worker runs two."""
  with multiprocessing.Manager() as manager:
    barrier = manager.Barrier(count)
    tasks = [pool.submit(_imported_once_all_wait, barrier, list(modules)) for _ in range(count)]
    return [task.result(timeout=120) for task in tasks]


def _imported_once_all_wait(barrier, modules: List[str]) -> Dict[str, bool]:
  barrier.wait(timeout=60)
  return imported(modules)
