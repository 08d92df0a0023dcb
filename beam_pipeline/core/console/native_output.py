"""What native libraries write straight to standard error, caught instead of shown.

libjpeg and libpng (in TensorFlow and in Pillow) print some warnings with their own
fprintf ("Input file read error", "Corrupt JPEG data: ..."), past any Python or
TensorFlow log setting. While images decode, file descriptor 2 points at a
temporary file instead; what a decode wrote then is read back, and a rejected
file's is kept in its errors line. Only the first of overlapping callers (threads
of one process) swaps the descriptor, and only a caller alone in the window reads
output it can attribute; exclusive callers take turns, so each is alone.
"""
import contextlib
import os
import sys
import tempfile
import threading
from typing import Iterator, Optional

_lock = threading.Lock()
_turns = threading.Lock()  # held by an exclusive caller for as long as its capture lasts
_users = 0
_saved: Optional[int] = None
_file = None


class Capture:
  """Reads what was written to standard error since a mark, while the capture lasts."""

  def mark(self) -> int:
    return os.lseek(_file.fileno(), 0, os.SEEK_END) if _file else 0

  def since(self, mark: int) -> str:
    """What was written since ``mark``; empty while other threads decode too (it may be theirs)."""
    with _lock:
      if _users != 1 or _file is None:
        return ''
      end = os.lseek(_file.fileno(), 0, os.SEEK_END)
      return os.pread(_file.fileno(), end - mark, mark).decode('utf-8', 'replace').strip()


@contextlib.contextmanager
def captured(exclusive: bool = False) -> Iterator[Capture]:
  """Standard error caught while the block runs; ``exclusive`` waits for other exclusive
  callers' blocks to end first, so that what is caught can be attributed."""
  with _turns if exclusive else contextlib.nullcontext(), _captured() as capture:
    yield capture


@contextlib.contextmanager
def _captured() -> Iterator[Capture]:
  global _users, _saved, _file
  with _lock:
    if _users == 0:
      sys.stderr.flush()
      _file = tempfile.TemporaryFile()
      _saved = os.dup(2)
      os.dup2(_file.fileno(), 2)
    _users += 1
  try:
    yield Capture()
  finally:
    with _lock:
      _users -= 1
      if _users == 0:
        os.dup2(_saved, 2)
        os.close(_saved)
        _file.close()
        _saved = _file = None
