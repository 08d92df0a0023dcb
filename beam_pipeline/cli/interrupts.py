"""Ctrl-C during a conversion: it stops the run at once, but never a commit under way.

A commit stopped halfway leaves the output without a complete dataset (a rerun
repairs it, but the earlier dataset is gone meanwhile), and it is short; so an
interrupt that finds it running is remembered, and the command exits with 130 once
it is done. The local worker pool ignores Ctrl-C (local/workers.py): the launcher
alone decides what it stops.
"""
import contextlib
import signal
import threading
from typing import Iterator

from beam_pipeline.pipeline.output.output_dir import CommitGate

EXIT_CODE = 130  # 128 + SIGINT, as shells report a command Ctrl-C ended


class Interrupts:
  """What Ctrl-C did during the block: nothing, stopped the run, or waited for its commit."""

  def __init__(self) -> None:
    self.seen = False
    self.during_commit = False


@contextlib.contextmanager
def handled(gate: CommitGate) -> Iterator[Interrupts]:
  """While the block runs, Ctrl-C raises KeyboardInterrupt unless ``gate`` says a commit is under way.
  Only the main thread can take signals; elsewhere (a caller's thread) the block runs as it is."""
  state = Interrupts()
  gate.reset()
  if threading.current_thread() is not threading.main_thread():
    yield state
    return

  def on_interrupt(signum, frame):  # pylint: disable=unused-argument
    state.seen = True
    if gate.interrupt():
      raise KeyboardInterrupt
    state.during_commit = True

  previous = signal.signal(signal.SIGINT, on_interrupt)
  try:
    yield state
  finally:
    signal.signal(signal.SIGINT, previous)
