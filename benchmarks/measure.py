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
  RSS_SAMPLE_SECONDS, shared pages counted in each process: an upper bound;
* ``largest_sampled``: the process with the highest RSS high-water mark seen by
  those samples (``mb``, ``command``), so that a run whose largest process is
  larger than expected says which one it was.

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
from typing import Dict, List, Tuple

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
  return _fields_kib(path, (field,))[0]


def _fields_kib(path: str, fields: Tuple[str, ...]) -> List[int]:
  """The values, in KiB, of ``fields`` ('VmRSS:', ...) of a /proc file; 0 for one not there."""
  values = dict.fromkeys(fields, 0)
  try:
    with open(path) as f:
      for line in f:
        name = line[:line.find(':') + 1]
        if name in values:
          values[name] = int(line.split()[1])
  except OSError:
    pass
  return [values[field] for field in fields]


def _command_line(pid: int) -> str:
  try:
    with open(f'/proc/{pid}/cmdline', 'rb') as f:
      return f.read().replace(b'\0', b' ').decode(errors='replace').strip()[:200]
  except OSError:
    return ''


class _Sampler(threading.Thread):
  """Peaks of the tree's summed PSS and RSS while the run lasts, and its largest process."""

  def __init__(self) -> None:
    super().__init__(daemon=True)
    self.peaks: Dict[str, int] = {'pss': 0, 'rss': 0}
    self.largest: Tuple[int, str] = (0, '')  # the highest VmHWM seen, in KiB, and its command line
    self.done = threading.Event()

  def run(self) -> None:
    next_pss = 0.0
    while not self.done.is_set():
      processes = descendants(os.getpid())[1:]
      rss = 0
      for p in processes:
        current, high_water = _fields_kib(f'/proc/{p}/status', ('VmRSS:', 'VmHWM:'))
        rss += current
        if high_water > self.largest[0]:
          self.largest = (high_water, _command_line(p))
      self.peaks['rss'] = max(self.peaks['rss'], rss)
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
               'peak_rss_sum_mb': round(sampler.peaks['rss'] / 1024, 1),
               'largest_sampled': {'mb': round(sampler.largest[0] / 1024, 1), 'command': sampler.largest[1]}}, f)
  return 0


if __name__ == '__main__':
  sys.exit(main())
