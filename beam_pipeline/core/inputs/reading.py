"""Reading input files: local ones with os calls (_read_local), remote ones through an
opener the Beam side hands in (Beam's FileSystems), with retries for transient failures.

Worker processes of a local run read local files only, and never import Beam.
"""
import collections
import errno
import io
import os
import random
import stat
import time
from concurrent.futures import Executor, Future
from typing import BinaryIO, Callable, Deque, Iterable, Iterator, NamedTuple, Optional, Tuple, TypeVar, Union

from google.api_core import exceptions as google_exceptions

from beam_pipeline.core import isolation, rejections, uris
from beam_pipeline.core.rejections import Rejected, RunFailure

T = TypeVar('T')
R = TypeVar('R')


# Failures that say something about the input itself and would repeat on every
# attempt: missing or forbidden objects, paths Beam cannot address (ValueError),
# objects it cannot decode (NotImplementedError: doubly compressed), and HTTP 4xx
# other than 408/429. Anything else (timeouts, 429/5xx, I/O errors) is the
# infrastructure's, and must never turn a good image into a rejection.
_PERMANENT = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError, ValueError,
              NotImplementedError, google_exceptions.ClientError)
_TRANSIENT_HTTP_CODES = (408, 429)  # request timeout, too many requests
# Local OSErrors are the file's (a symlink loop, a name too long, ...) unless they
# say the storage hiccupped.
_TRANSIENT_ERRNOS = (errno.EIO, errno.EAGAIN, errno.EINTR, errno.ETIMEDOUT, errno.ESTALE, errno.EBUSY)
READ_ATTEMPTS = 4
# The longest a read error's message is quoted in a rejection or an error.
_DETAIL_CHARS = 300
BACKOFF_SECONDS = 0.5
RETRY_DEADLINE_SECONDS = 60


class TransientReadError(RunFailure, IOError):
  """A read kept failing for reasons that are not the file's: fails the bundle (Beam retries it)."""


class Remote(NamedTuple):
  """What reading remote files takes, handed in by the Beam side, which alone imports Beam."""
  open: Callable[[str], BinaryIO]  # a seekable stream of the object's bytes as stored
  pool: Executor  # threads to read ahead on: remote reads are latency-bound
  reads_ahead: int


def read_file(uri: str, max_bytes: int, open_remote: Optional[Callable[[str], BinaryIO]] = None) -> bytes:
  """The file's bytes, never more than ``max_bytes`` of them in memory; a remote ``uri``
  is opened with ``open_remote``.

  Raises Rejected for a file that is missing, unreadable or too large, and
  TransientReadError when reads keep failing for other reasons, after retrying
  with exponential backoff.
  """
  if open_remote is None and uris.is_remote(uri):
    raise RunFailure(f'{uri} is remote, and this process was given no way to read remote files')
  isolation.fault_point(isolation.READ)  # outside the retries, which would take its fault for the storage's
  started = time.monotonic()
  for attempt in range(1, READ_ATTEMPTS + 1):
    try:
      return _read_once(uri, max_bytes, open_remote)
    except Rejected:
      raise
    except _PERMANENT as e:
      if getattr(e, 'code', None) not in _TRANSIENT_HTTP_CODES:
        raise Rejected(rejections.UNREADABLE, f'cannot read: {rejections.first_line(e, _DETAIL_CHARS)}') from None
      error = e
    except OSError as e:
      if not uris.is_remote(uri) and e.errno not in _TRANSIENT_ERRNOS:
        raise Rejected(rejections.UNREADABLE, f'cannot read: {rejections.first_line(e, _DETAIL_CHARS)}') from None
      error = e
    except Exception as e:  # pylint: disable=broad-except
      error = e
    # The storage client retries within its own deadline (120 s by default); past
    # RETRY_DEADLINE_SECONDS more attempts here would only multiply the wait.
    if attempt == READ_ATTEMPTS or time.monotonic() - started > RETRY_DEADLINE_SECONDS:
      raise TransientReadError(f'{uri}: reading failed after {attempt} attempt(s) in '
                               f'{time.monotonic() - started:.0f} s, last with '
                               f'{type(error).__name__}: {rejections.first_line(error, _DETAIL_CHARS)}') from error
    time.sleep(BACKOFF_SECONDS * 2**(attempt - 1) * random.uniform(0.5, 1.0))
  raise AssertionError('unreachable')


def _read_once(uri: str, max_bytes: int, open_remote: Optional[Callable[[str], BinaryIO]]) -> bytes:
  data = _read_stream(open_remote, uri, max_bytes) if uris.is_remote(uri) else _read_local(uri, max_bytes)
  if len(data) > max_bytes:  # the file grew while we read it
    raise Rejected(rejections.FILE_TOO_LARGE, f'more than --max_file_mb ({max_bytes} bytes)')
  return data


def _read_stream(open_remote: Callable[[str], BinaryIO], uri: str, max_bytes: int) -> bytes:
  with open_remote(uri) as f:
    # The size comes from the object metadata the storage client fetched anyway,
    # so an oversized object is never read.
    size = f.seek(0, io.SEEK_END)
    _check_size(size, max_bytes)
    f.seek(0)
    # read(n) allocates n bytes up front, so ask for the measured size (plus one
    # byte, which shows whether the object grew since), not for the limit.
    data = f.read(size + 1)
    if len(data) > size:
      data += f.read(max_bytes + 1 - len(data))
  return data


def _read_local(path: str, max_bytes: int) -> bytes:
  """A local file's bytes, at most ``max_bytes + 1`` of them.

  Hand-written with os calls instead of FileSystems.open, whose local stream
  (a path check, a buffered file, two seeks, plus our stat for pipes) cost more
  than reading a photo, and every image is read twice, to validate and to write.
  """
  # O_NONBLOCK: opening a named pipe must not wait for a writer; fstat then refuses it.
  fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
  try:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
      raise Rejected(rejections.UNREADABLE, 'not a regular file (a directory link, named pipe, device or socket)')
    _check_size(info.st_size, max_bytes)
    # The measured size plus one byte shows whether the file grew since; a file
    # that did (or a /proc file, which reports 0) is read on in bounded steps, as
    # os.read(n) allocates n bytes up front.
    chunks, remaining, want = [], max_bytes + 1, info.st_size + 1
    while remaining > 0:
      chunk = os.read(fd, min(want, remaining))
      if not chunk:
        break
      chunks.append(chunk)
      remaining -= len(chunk)
      want = _GROWTH_READ_BYTES
  finally:
    os.close(fd)
  return chunks[0] if len(chunks) == 1 else b''.join(chunks)


_GROWTH_READ_BYTES = 2**20


def _check_size(size: int, max_bytes: int) -> None:
  if size > max_bytes:
    raise Rejected(rejections.FILE_TOO_LARGE, f'{size} bytes, more than --max_file_mb ({max_bytes} bytes)')


def read_files(step: str, read: Callable[[T], R], items: Iterable[T], uris_of: Callable[[T], str],
               remote: Optional[Remote]) -> Iterator[Tuple[T, Union[R, Rejected]]]:
  """(item, read(item)) in order, each ``read`` behind the isolation boundary as ``step``:
  a Rejected for a file that cannot be used, or for any other exception but a RunFailure.

  Object stores are latency-bound, so if any file is remote, ``remote.reads_ahead``
  reads run ahead on its pool; local files are read fastest one at a time (a pool
  of threads contending for the GIL made writing a shard slower).

  Args:
    step: the isolation step the reads run as, which an internal_error names.
    read: reads an item's file, and makes of its bytes what the caller needs.
    items: the items whose files are read, in the order their results are yielded.
    uris_of: the uri of an item's file: whether any is remote, and which image each read handles (fault_point).
    remote: what reads remote files (Remote); None in a process that reads local files only.
  """
  items = list(items)

  def outcome(item: T) -> Union[R, Rejected]:
    return isolation.run(step, [uris_of(item)], read, item)

  if remote is None or not uris.any_remote(map(uris_of, items)):
    return prefetched(outcome, items, None, 0)
  return prefetched(outcome, items, remote.pool, remote.reads_ahead)


def prefetched(function: Callable[[T], R], items: Iterable[T], executor: Optional[Executor],
               window: int) -> Iterator[Tuple[T, R]]:
  """(item, function(item)) in order, with calls running ahead.

  Cloud Storage reads are latency-bound, so many run at once. Hand-written because
  Executor.map submits every item at once, which would hold a whole shard's
  images in memory.

  Args:
    function: the call to make for each item.
    items: what to call it on, taken one at a time as the calls are made.
    executor: the threads the calls run on; unused if ``window`` is 0.
    window: how many calls may run ahead at once; none if 0, each then made on this thread in turn.
  """
  if window < 1:
    for item in items:
      yield item, function(item)
    return
  running: Deque[Tuple[T, Future]] = collections.deque()
  for item in items:
    running.append((item, executor.submit(function, item)))
    if len(running) >= window:
      item, future = running.popleft()
      yield item, future.result()
  while running:
    item, future = running.popleft()
    yield item, future.result()
