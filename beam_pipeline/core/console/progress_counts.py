"""A run's progress, counted as it goes: images listed, checked and written, by the DoFns of
this process, and verify's records checked.

On the in-process runner every DoFn runs in the launching process, so plain
counters, updated once per batch (not per image), are the cheapest source; Beam's
metrics are only committed at the end there. In Beam's multi-process mode the
DoFns live in SDK worker processes the runner starts: the launcher names a folder
in their environment (``gathered``), each worker keeps its counts in a file of its
own there, and the launcher sums the files. A Dataflow run counts nothing here.
The console shows the counts (cli/progress.py).
"""
import contextlib
import glob
import json
import os
import tempfile
import threading
import time
from typing import Dict, Iterator, NamedTuple, Optional, Protocol, Tuple

LISTING, CHECKING, WRITING, COMMITTING = 'listing', 'checking', 'writing', 'committing'
PHASES = (LISTING, CHECKING, WRITING, COMMITTING)

# The environment variable naming the folder worker processes keep their counts in.
SHARED_FOLDER = 'BEAM_PIPELINE_PROGRESS_FOLDER'


class Snapshot(NamedTuple):
  phase: str
  done: int  # images listed, checked or written
  total: Optional[int]  # of the phase, once known
  rejected: int  # or, for verify, records that failed
  started: float  # time.monotonic() of the phase's start
  unit: str = 'images'
  failed: str = 'rejected'
  # The run's phases that ended, in order, each as it stood at its end (its ``started`` kept):
  # a phase shorter than the console's look at the counts still gets its line.
  ended: Tuple['Snapshot', ...] = ()
  finished: Optional[float] = None  # time.monotonic() of an ended phase's end
  checked_meanwhile: int = 0  # images already checked while the listing goes on


class Counter(Protocol):
  def snapshot(self) -> Snapshot:
    ...


class Tally:
  """A single-phase counter, such as verify's records checked of all."""

  def __init__(self, phase: str, total: int, unit: str, failed: str):
    """Counts of one phase, its clock started now.

    Args:
      phase: the phase's name as the console shows it ('verifying').
      total: how many there are to count, known from the start.
      unit: what is counted, as the console names it ('records').
      failed: what the console calls the ones that fail ('failed').
    """
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


class Tallies(NamedTuple):
  """What a run's DoFns counted, in one process or summed over several."""
  listed: int = 0
  checked: int = 0
  rejected: int = 0
  written: int = 0
  parts: Optional[int] = None  # the parts the input is listed in, once all are known
  parts_listed: int = 0
  handed: int = 0  # images handed to validation: checking's clock starts with the first

  def plus(self, other: 'Tallies') -> 'Tallies':
    parts = other.parts if self.parts is None else self.parts
    return Tallies(self.listed + other.listed, self.checked + other.checked, self.rejected + other.rejected,
                   self.written + other.written, parts, self.parts_listed + other.parts_listed,
                   self.handed + other.handed)


class _Phases:
  """Turns tallies into snapshots, remembering when each phase began and how each one ended.
  Phases overlap: a local run checks images while the listing goes on. A phase whose count
  moves before the phase ahead of it ends is timed from that first move, so that its time and
  rate are its own, and each phase ends when the counts leave it; a phase the counts pass in
  one change without moving it ends where it began. Checking is timed from its first image
  handed to validation, wherever that comes: until then the workers are still starting, and
  its count moves only as each task of images ends. Phases only move on: counts summed while
  a worker's file is being replaced (Gathered) can step back, and would end a phase twice."""

  def __init__(self):
    self._phase, self._began = LISTING, time.monotonic()
    self._ended: Tuple[Snapshot, ...] = ()
    self._moved: Dict[str, float] = {}  # when checking first handed images out, when writing first wrote

  def snapshot(self, tallies: Tallies) -> Snapshot:
    phase = _phase_of(tallies)
    if PHASES.index(phase) < PHASES.index(self._phase):  # summed counts that lacked a worker's file a moment
      phase = self._phase
    now = time.monotonic()
    for later, moved in ((CHECKING, tallies.handed), (WRITING, tallies.written)):
      if moved and later not in self._moved:
        self._moved[later] = now
    if phase != self._phase:
      for passed in PHASES[PHASES.index(self._phase):PHASES.index(phase)]:
        done, total = _counted_in(passed, tallies)
        started = self._clock(passed, self._began if passed == self._phase else now)
        self._ended += (Snapshot(passed, done, total, tallies.rejected, started, finished=now),)
      self._phase, self._began = phase, now
    done, total = _counted_in(phase, tallies)
    return Snapshot(phase, done, total, tallies.rejected, self._clock(phase, self._began), ended=self._ended,
                    checked_meanwhile=tallies.checked if phase == LISTING else 0)

  def _clock(self, phase: str, began: float) -> float:
    """When ``phase``, which began at ``began``, is timed from: its first move if that came
    first, or, checking's, wherever it came; else its beginning."""
    moved = self._moved.get(phase)
    return moved if moved is not None and (moved <= began or phase == CHECKING) else began


def _phase_of(tallies: Tallies) -> str:
  if tallies.parts is None or tallies.parts_listed < tallies.parts:
    return LISTING
  if tallies.checked < tallies.listed:
    return CHECKING
  if tallies.written < tallies.listed - tallies.rejected:
    return WRITING
  return COMMITTING


def _counted_in(phase: str, tallies: Tallies) -> Tuple[int, Optional[int]]:
  """(done, total) of ``phase`` in ``tallies``; the listing's total is known only at its end."""
  if phase == LISTING:
    return tallies.listed, None
  if phase == CHECKING:
    return tallies.checked, tallies.listed
  if phase == WRITING:
    return tallies.written, tallies.listed - tallies.rejected
  return tallies.written, tallies.written


class Counts:
  """Thread-safe counters of a run, in the order its phases happen."""

  def __init__(self):
    self._lock = threading.Lock()
    self._tallies = Tallies()
    self._phases = _Phases()

  def listed(self, count: int) -> None:
    self._add(listed=count)

  def parts_planned(self, count: int) -> None:
    with self._lock:
      self._tallies = self._tallies._replace(parts=count)
      self._phases.snapshot(self._tallies)
      self._changed(self._tallies)

  def part_listed(self) -> None:
    self._add(parts_listed=1)

  def handed(self, count: int) -> None:
    self._add(handed=count)

  def checked(self, count: int, rejected: int) -> None:
    self._add(checked=count, rejected=rejected)

  def rejected(self, count: int) -> None:
    """Inputs rejected outside validation: bad manifest rows, dropped copies, files changed since."""
    self._add(rejected=count)

  def written(self, count: int) -> None:
    self._add(written=count)

  def snapshot(self) -> Snapshot:
    with self._lock:
      return self._phases.snapshot(self._tallies)

  def _add(self, **counts: int) -> None:
    if not any(counts.values()):  # planning counts each content group's dropped copies, mostly none
      return
    with self._lock:
      self._tallies = self._tallies.plus(Tallies(**counts))
      self._phases.snapshot(self._tallies)  # a phase ends when its count does, not when the console looks
      self._changed(self._tallies)

  def _changed(self, tallies: Tallies) -> None:
    """Called, under the lock, with the tallies after every change."""


class Published(Counts):
  """The counts of a worker process, kept in a file of its own in ``folder`` for the
  launcher to sum (Gathered). Rewritten whole on every change, which comes once per
  batch, and replaced in one step so that a reader never sees half a file."""

  def __init__(self, folder: str, name: Optional[str] = None):
    super().__init__()
    self._path = os.path.join(folder, f'{name or os.getpid()}.json')

  def _changed(self, tallies: Tallies) -> None:
    partial = f'{self._path}.partial'
    with open(partial, 'w', encoding='utf-8') as f:
      json.dump(tallies._asdict(), f)
    os.replace(partial, self._path)


class Gathered:
  """The counts of every worker process that keeps them in ``folder``, summed."""

  def __init__(self, folder: str):
    self._folder = folder
    self._phases = _Phases()

  def snapshot(self) -> Snapshot:
    total = Tallies()
    for path in glob.glob(os.path.join(self._folder, '*.json')):
      try:
        with open(path, encoding='utf-8') as f:
          total = total.plus(Tallies(**json.load(f)))
      except FileNotFoundError:  # only while a worker process is being replaced
        continue
    return self._phases.snapshot(total)


@contextlib.contextmanager
def gathered() -> Iterator[Gathered]:
  """The summed counts of the worker processes this process starts while the block runs:
  they find the folder to count in in their environment."""
  before = os.environ.get(SHARED_FOLDER)
  with tempfile.TemporaryDirectory(prefix='beam_pipeline-progress-') as folder:
    os.environ[SHARED_FOLDER] = folder
    try:
      yield Gathered(folder)
    finally:
      if before is None:
        del os.environ[SHARED_FOLDER]
      else:
        os.environ[SHARED_FOLDER] = before


def _for_this_process() -> Counts:
  """Published counts in a worker process of a launcher that gathers them; else plain ones."""
  folder = os.environ.get(SHARED_FOLDER)
  return Published(folder) if folder else Counts()


_counts = _for_this_process()


def counts() -> Counts:
  """The counters the DoFns of this process update."""
  return _counts


def fresh() -> Counts:
  """New counters for a run about to start, which the DoFns of this process then update."""
  global _counts
  _counts = Counts()
  return _counts
