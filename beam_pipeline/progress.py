"""Live progress on standard error: of a local conversion, counted by its DoFns as they go,
and of verify.

On the in-process runner every DoFn runs in the launching process, so plain
counters, updated once per batch (not per image), are the cheapest source; Beam's
metrics are only committed at the end there. A terminal gets a bar (tqdm) redrawn
a few times a second; any other stream (Airflow's and CI's logs) a plain line at
every phase change and every --progress_interval seconds. Runs whose DoFns live
elsewhere (Dataflow, multi-process mode) count nothing here, and show nothing.
"""
import contextlib
import os
import sys
import threading
import time
from typing import IO, Iterator, NamedTuple, Optional, Protocol

from tqdm import tqdm

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


def line(snapshot: Snapshot, now: float) -> str:
  """One plain line about a snapshot, for logs."""
  elapsed = max(now - snapshot.started, 1e-9)
  rate = snapshot.done / elapsed
  of = f' of {snapshot.total:,}' if snapshot.total is not None else ''
  left = ''
  if snapshot.total and rate > 0 and snapshot.done < snapshot.total:
    left = f', about {(snapshot.total - snapshot.done) / rate:.0f} s left'
  return (f'progress: {snapshot.phase} {snapshot.done:,}{of} {snapshot.unit}, {rate:,.0f} {snapshot.unit}/s, '
          f'{snapshot.rejected:,} {snapshot.failed}{left}')


@contextlib.contextmanager
def console() -> Iterator[IO[str]]:
  """Standard error to show progress on, as a stream of its own where it is file descriptor 2:
  while images decode, what the decoders print there is caught (core/native_output.py),
  and progress must neither be caught nor be taken for a decoder's warning."""
  try:
    separate = sys.stderr.fileno() == 2
  except (AttributeError, OSError, ValueError):  # a stream without a descriptor (pytest's capsys)
    separate = False
  if not separate:
    yield sys.stderr
    return
  sys.stderr.flush()
  with os.fdopen(os.dup(2), 'w', buffering=1) as stream:
    yield stream


@contextlib.contextmanager
def shown(stream: IO[str] = sys.stderr, interval: float = 10.0, counter: Optional[Counter] = None) -> Iterator[Counter]:
  """Shows ``counter`` (default: fresh conversion counts, which the DoFns of this process then
  update) on ``stream`` while the block runs: a bar on a terminal, else lines."""
  global _counts
  if counter is None:
    counter = _counts = Counts()
  stop = threading.Event()
  show = _bar if stream.isatty() else _lines
  thread = threading.Thread(target=show, args=(counter, stream, interval, stop), name='progress', daemon=True)
  thread.start()
  try:
    yield counter
  finally:
    stop.set()
    thread.join()


def _bar(counts_: Counter, stream: IO[str], _interval: float, stop: threading.Event) -> None:
  bar, last = None, None
  while True:
    stopped = stop.wait(0.2)
    snapshot = counts_.snapshot()
    if last is None or snapshot.phase != last.phase:
      if bar is not None:  # the phase is over: its bar ends full
        bar.total = last.total if last.total is not None else snapshot.total
        bar.set_postfix_str(f'{snapshot.rejected:,} {last.failed}', refresh=False)
        bar.update(bar.total - bar.n)
        bar.close()
      bar = tqdm(total=snapshot.total, desc=snapshot.phase, unit=f' {snapshot.unit}', file=stream,
                 dynamic_ncols=True, mininterval=0.2, leave=snapshot.phase != COMMITTING)
    bar.total = snapshot.total
    bar.set_postfix_str(f'{snapshot.rejected:,} {snapshot.failed}', refresh=False)
    bar.update(snapshot.done - bar.n)
    last = snapshot
    if stopped:
      bar.close()
      return


def _lines(counts_: Counter, stream: IO[str], interval: float, stop: threading.Event) -> None:
  """A line when a phase ends (what it did, how fast), and every ``interval`` seconds within one."""
  last, printed = counts_.snapshot(), time.monotonic()
  while True:
    stopped = stop.wait(min(interval, 0.5))
    snapshot, now = counts_.snapshot(), time.monotonic()
    if stopped:
      if snapshot.phase != last.phase:
        _print_done(last, snapshot, stream)
      return
    if snapshot.phase != last.phase:
      _print_done(last, snapshot, stream)
      printed = now
    elif now - printed >= interval:
      print(line(snapshot, now), file=stream, flush=True)
      printed = now
    last = snapshot


def _print_done(last: Snapshot, snapshot: Snapshot, stream: IO[str]) -> None:
  """The line for a phase that ended: ``last`` was taken in it, ``snapshot`` after it."""
  done = last.total if last.total is not None else snapshot.total
  seconds = max(snapshot.started - last.started, 1e-9)
  print(f'progress: {last.phase} done: {done:,} {last.unit} in {seconds:.1f} s ({done / seconds:,.0f} '
        f'{last.unit}/s), {snapshot.rejected:,} {last.failed}', file=stream, flush=True)
