"""A run's progress, counted as it goes: images listed, checked and written, by the DoFns of
this process, and verify's records checked.

On the in-process runner every DoFn runs in the launching process, so plain
counters, updated once per batch (not per image), are the cheapest source; Beam's
metrics are only committed at the end there. Runs whose DoFns live elsewhere
(Dataflow, multi-process mode) count nothing here. The console shows them
(cli/progress.py).
"""
import threading
import time
from typing import NamedTuple, Optional, Protocol

LISTING, CHECKING, WRITING, COMMITTING = 'listing', 'checking', 'writing', 'committing'


class Snapshot(NamedTuple):
  phase: str
  done: int  # images listed, checked or written
  total: Optional[int]  # of the phase, once known
  rejected: int  # or, for verify, records that failed
  started: float  # time.monotonic() of the phase's start
  unit: str = 'images'
  failed: str = 'rejected'


class Counter(Protocol):
  def snapshot(self) -> Snapshot:
    ...


class Tally:
  """A single-phase counter, such as verify's records checked of all."""

  def __init__(self, phase: str, total: int, unit: str, failed: str):
    self._lock = threading.Lock()
    self._phase, self._total, self._unit, self._failed = phase, total, unit, failed
    self._done = self._failures = 0
    self._started = time.monotonic()

  def add(self, done: int, failures: int = 0) -> None:
    with self._lock:
      self._done += done
      self._failures += failures

  def snapshot(self) -> Snapshot:
    with self._lock:
      return Snapshot(self._phase, self._done, self._total, self._failures, self._started, self._unit, self._failed)


class Counts:
  """Thread-safe counters of a run, in the order its phases happen."""

  def __init__(self):
    self._lock = threading.Lock()
    self._listed = self._checked = self._rejected = self._written = 0
    self._parts: Optional[int] = None  # the parts the input is listed in, once all are known
    self._parts_listed = 0
    self._phase, self._phase_started = LISTING, time.monotonic()

  def listed(self, count: int) -> None:
    with self._lock:
      self._listed += count

  def parts_planned(self, count: int) -> None:
    with self._lock:
      self._parts = count

  def part_listed(self) -> None:
    with self._lock:
      self._parts_listed += 1

  def checked(self, count: int, rejected: int) -> None:
    with self._lock:
      self._checked += count
      self._rejected += rejected

  def rejected(self, count: int) -> None:
    """Inputs rejected outside validation: bad manifest rows, dropped copies, files changed since."""
    with self._lock:
      self._rejected += count

  def written(self, count: int) -> None:
    with self._lock:
      self._written += count

  def snapshot(self) -> Snapshot:
    with self._lock:
      if self._parts is None or self._parts_listed < self._parts:
        phase, done, total = LISTING, self._listed, None
      elif self._checked < self._listed:
        phase, done, total = CHECKING, self._checked, self._listed
      elif self._written < self._listed - self._rejected:
        phase, done, total = WRITING, self._written, self._listed - self._rejected
      else:
        phase, done, total = COMMITTING, self._written, self._written
      if phase != self._phase:
        self._phase, self._phase_started = phase, time.monotonic()
      return Snapshot(phase, done, total, self._rejected, self._phase_started)


_counts = Counts()


def counts() -> Counts:
  """The counters the DoFns of this process update."""
  return _counts


def fresh() -> Counts:
  """New counters for a run about to start, which the DoFns of this process then update."""
  global _counts
  _counts = Counts()
  return _counts
