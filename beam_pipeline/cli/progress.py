"""Live progress of a local conversion (core/console/progress_counts.py), and of verify.

Where standard error is a terminal, it gets a bar (tqdm) redrawn a few times a second.
Anywhere else (Airflow's and CI's logs, a notebook) progress is a plain line at every
phase change and every --progress_interval seconds, on standard output beside the
summary: it is the run's log, not a warning, and Airflow's Beam operator logs a
command's standard error at WARNING, its standard output at INFO. With --json, whose
standard output is the JSON alone, the lines go to standard error.
"""
import contextlib
import os
import sys
import threading
import time
from typing import IO, Iterator, List, Optional, Tuple

from tqdm import tqdm

from beam_pipeline.core.console import progress_counts, quantities
from beam_pipeline.core.console.progress_counts import COMMITTING, Counter, Snapshot


def line(snapshot: Snapshot, now: float, moved: Optional[float] = None) -> str:
  """One plain line about a snapshot, for logs. The time left is reckoned at the pace up to when
  the count last ``moved`` and counts down from there: while large images are under way and none
  has finished, it must not grow as if the work had slowed. Once it has run out with images
  still to do, the pace no longer tells, and the line says no time rather than 0 s. Before the
  first image of a phase is done (writing, while the shards are planned) it says no rate either."""
  elapsed = max(now - snapshot.started, 1e-9)
  rate = f', {quantities.rate(snapshot.done / elapsed, snapshot.unit)}' if snapshot.done else ''
  of = f' of {snapshot.total:,}' if snapshot.total is not None else ''
  left = ''
  if snapshot.total and snapshot.done and snapshot.done < snapshot.total:
    moved = now if moved is None else min(moved, now)
    pace = snapshot.done / max(moved - snapshot.started, 1e-9)
    seconds = (snapshot.total - snapshot.done) / pace - (now - moved)
    left = f', about {seconds:.0f} s left' if seconds >= 0.5 else ', under 1 s left' if seconds > 0 else ''
  checked = f', {snapshot.checked_meanwhile:,} checked' if snapshot.checked_meanwhile else ''
  return (f'progress: {snapshot.phase} {snapshot.done:,}{of} {snapshot.unit}{rate}, '
          f'{snapshot.rejected:,} {snapshot.failed}{checked}{left}')


@contextlib.contextmanager
def console(json: bool = False) -> Iterator[IO[str]]:
  """The stream to show progress on: standard output for lines (unless ``json``: the summary is
  JSON there), or standard error, as a stream of its own where it is file descriptor 2: while
  images decode, what the decoders print there is caught (core/console/native_output.py), and
  progress must neither be caught nor be taken for a decoder's warning."""
  if not json and not _sized_terminal(sys.stderr):
    yield sys.stdout
    return
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
  if counter is None:
    counter = progress_counts.fresh()
  stop = threading.Event()
  show = _bar if _sized_terminal(stream) else _lines
  thread = threading.Thread(target=show, args=(counter, stream, interval, stop), name='progress', daemon=True)
  thread.start()
  try:
    yield counter
  finally:
    stop.set()
    thread.join()


def _sized_terminal(stream: IO[str]) -> bool:
  """Whether ``stream`` is a terminal that says how wide it is: one that reports no size
  (0 columns: some CI runners' and containers' ttys) cannot hold a bar, and gets lines."""
  try:
    return stream.isatty() and os.get_terminal_size(stream.fileno()).columns > 0
  except (AttributeError, OSError, ValueError):
    return False


def _bar(counts_: Counter, stream: IO[str], _interval: float, stop: threading.Event) -> None:
  """A bar per phase, redrawn five times a second; a phase's bar ends full, and stays unless it is the commit's.

  Args:
    counts_: the counts to show.
    stream: the terminal the bars are drawn on.
    _interval: unused: a bar is redrawn every 0.2 s; taken so that shown can start either of _bar and _lines.
    stop: set when the run is over: the last bar is drawn and closed, and the thread ends.
  """
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
    checked = f', {snapshot.checked_meanwhile:,} checked' if snapshot.checked_meanwhile else ''
    bar.set_postfix_str(f'{snapshot.rejected:,} {snapshot.failed}{checked}', refresh=False)
    bar.update(snapshot.done - bar.n)
    last = snapshot
    if stopped:
      bar.close()
      return


def _lines(counts_: Counter, stream: IO[str], interval: float, stop: threading.Event) -> None:
  """A line when a phase ends (what it did, how fast), and every ``interval`` seconds within one.

  Args:
    counts_: the counts to show.
    stream: where the lines go (a log, not a terminal).
    interval: seconds between the lines within a phase (--progress_interval).
    stop: set when the run is over: the phases that ended meanwhile get their lines, and the thread ends.
  """
  last, printed = counts_.snapshot(), time.monotonic()
  moved = printed  # when the count last changed
  while True:
    stopped = stop.wait(min(interval, 0.5))
    snapshot, now = counts_.snapshot(), time.monotonic()
    ended = _ended_since(last, snapshot)
    for phase, end in ended:
      _print_done(phase, end, stream)
    if stopped:
      return
    if snapshot.phase != last.phase or snapshot.done != last.done:
      moved = now
    if ended:
      printed = now
    elif now - printed >= interval:
      print(line(snapshot, now, moved), file=stream, flush=True)
      printed = now
    last = snapshot


def _ended_since(last: Snapshot, snapshot: Snapshot) -> List[Tuple[Snapshot, float]]:
  """The phases that ended between two snapshots, each with when it ended: as the counters
  recorded them (Snapshot.ended: even one that began and ended between the two; each ends when
  it finished, which may be after the next one's first count, or else where the next one
  began), or, from a counter that records none, the phase of ``last`` if ``snapshot`` is in
  another (its total and rejections as ``snapshot`` has them: the listing's total is what
  checking counts of)."""
  if snapshot.ended:
    starts = [phase.started for phase in snapshot.ended[1:]] + [snapshot.started]
    ends = [phase.finished if phase.finished is not None else start for phase, start in zip(snapshot.ended, starts)]
    return list(zip(snapshot.ended, ends))[len(last.ended):]
  if snapshot.phase == last.phase:
    return []
  total = last.total if last.total is not None else snapshot.total
  return [(last._replace(total=total, rejected=snapshot.rejected), snapshot.started)]


def _print_done(phase: Snapshot, ended: float, stream: IO[str]) -> None:
  """The line for a phase that ended at ``ended`` (time.monotonic()), as it stood at its end."""
  done = phase.total if phase.total is not None else phase.done
  seconds = ended - phase.started
  rate = f' ({quantities.rate(done / seconds, phase.unit)})' if seconds >= 0.05 else ''
  print(f'progress: {phase.phase} done: {done:,} {phase.unit} in {seconds:.1f} s{rate}, {phase.rejected:,} '
        f'{phase.failed}', file=stream, flush=True)
