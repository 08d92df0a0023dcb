"""Runs a command to its end and measures it with every process it starts.

Usage: python -m benchmarks.measure <result.json> <command...>

Writes to result.json:

* ``wall_s``: until the command's own process ends;
* ``cpu_s`` and ``max_process_rss_mb`` (the largest single process) over every
  process of the run. The converter's worker processes (beam_pipeline/local/workers.py)
  are not the command's children and outlive it by moments, so os.wait4 on the
  command alone misses them. This process is a child subreaper
  (PR_SET_CHILD_SUBREAPER): orphans of the run are reparented to it and waited
  for, so RUSAGE_CHILDREN covers them all;
* ``peak_pss_mb``: the largest total proportional set size of the run's
  processes, sampled every SAMPLE_SECONDS: pages the processes share
  (TensorFlow's libraries, the forkserver's imports in every worker) are split
  between them, so the sum is the memory the run really holds;
* ``peak_rss_sum_mb``: the largest plain sum of their RSS, sampled every
  RSS_SAMPLE_SECONDS, shared pages counted in each process: an upper bound.

It must be a small process: a child forked from a big one (pytest, with TensorFlow
loaded) starts with a copy of that process's memory map, and Linux keeps the
copy's high-water mark in the child's ru_maxrss across exec.
"""
import ctypes
import json
import os
import resource
import subprocess
import sys
import threading
import time
from typing import Dict, List

SAMPLE_SECONDS = 0.5  # reading smaps_rollup costs ~10 ms per TensorFlow process
RSS_SAMPLE_SECONDS = 0.05
_PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def descendants(pid: int) -> List[int]:
  """``pid`` and every process below it, from /proc/<pid>/task/<tid>/children."""
  found, stack = [], [pid]
  while stack:
    current = stack.pop()
    found.append(current)
    try:
      for task in os.listdir(f'/proc/{current}/task'):
        with open(f'/proc/{current}/task/{task}/children') as f:
          stack.extend(int(child) for child in f.read().split())
    except OSError:  # ended meanwhile
      pass
  return found


def _field_kib(path: str, field: str) -> int:
  try:
    with open(path) as f:
      for line in f:
        if line.startswith(field):
          return int(line.split()[1])
  except OSError:
    pass
  return 0


class _Sampler(threading.Thread):
  """Peaks of the tree's summed PSS and RSS while the run lasts."""

  def __init__(self) -> None:
    super().__init__(daemon=True)
    self.peaks: Dict[str, int] = {'pss': 0, 'rss': 0}
    self.done = threading.Event()

  def run(self) -> None:
    next_pss = 0.0
    while not self.done.is_set():
      processes = descendants(os.getpid())[1:]
      self.peaks['rss'] = max(self.peaks['rss'], sum(_field_kib(f'/proc/{p}/status', 'VmRSS:') for p in processes))
      if time.monotonic() >= next_pss:
        next_pss = time.monotonic() + SAMPLE_SECONDS
        pss = sum(_field_kib(f'/proc/{p}/smaps_rollup', 'Pss:') for p in processes)
        self.peaks['pss'] = max(self.peaks['pss'], pss)
      self.done.wait(RSS_SAMPLE_SECONDS)


def main() -> int:
  result_path, command = sys.argv[1], sys.argv[2:]
  ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1)
  sampler = _Sampler()
  sampler.start()
  start = time.perf_counter()
  process = subprocess.Popen(command)
  process.wait()
  wall = time.perf_counter() - start
  while True:  # the run's orphans, reparented here
    try:
      os.wait()
    except ChildProcessError:
      break
  sampler.done.set()
  sampler.join()
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  with open(result_path, 'w') as f:
    json.dump({'returncode': process.returncode, 'wall_s': round(wall, 3),
               'cpu_s': round(usage.ru_utime + usage.ru_stime, 2),
               'max_process_rss_mb': round(usage.ru_maxrss / 1024, 1),
               'peak_pss_mb': round(sampler.peaks['pss'] / 1024, 1),
               'peak_rss_sum_mb': round(sampler.peaks['rss'] / 1024, 1)}, f)
  return 0


if __name__ == '__main__':
  sys.exit(main())
