"""Re-encodings kept on this machine from validation to the shard writer.

An image stored other than as its source (a WebP or TIFF as PNG, one turned upright, downscaled
or made a JPEG) is encoded during validation, to check and hash what will be stored, and again
when its shard is written, since only metadata crosses the run's shuffles. The encoding is most
of either step's cost for a large image. In a local run the worker processes share a disk, so
validation leaves the bytes there and the writer takes them instead of decoding and encoding the
source again; elsewhere (Dataflow, Beam's own worker processes) nothing is enabled and the
writer encodes again, as it always can.

Kept files are a cache, never a source of truth: the writer still reads and hashes the source,
and takes a kept file only if its bytes hash to what the record says it stores. What is kept is
bounded by KEEP_BYTES and by the free space of the disk; what no writer takes goes with the
worker pool's scratch directory.
"""
import contextlib
import hashlib
import os
import shutil
import struct
import tempfile
import threading
import time
from typing import NamedTuple, Optional, Tuple

# At most this many bytes kept at once, summed over the machine's workers, and never more
# than FREE_SHARE of the disk's free space: the shards are written to disk too.
KEEP_BYTES = 4 * 2**30
FREE_SHARE = 0.25
_HEADER = struct.Struct('<IIB')  # the source's upright height and width, whether it was turned

_directory: Optional[str] = None
_lock = threading.Lock()


class Kept(NamedTuple):
  stored: bytes
  original_size: Tuple[int, int]  # the source's (height, width), upright
  rotated: bool  # turned upright by its Exif orientation


def enable(directory: str) -> None:
  """Keeps re-encodings under ``directory`` from now on, in this process (a local worker)."""
  global _directory, _usage
  os.makedirs(directory, exist_ok=True)
  _directory, _usage = directory, _Usage()


def disable() -> None:
  global _directory
  _directory = None


def keep(source_sha256: str, stored_sha256: str, stored: bytes, original_size: Tuple[int, int], rotated: bool) -> None:
  """Leaves ``stored`` for the writer, if enabled and there is room; a kept file is written whole
  under a temporary name, then renamed.

  Args:
    source_sha256: the hash of the source ``stored`` was made from; with ``stored_sha256``, what the writer
      asks for the bytes by.
    stored_sha256: the hash of ``stored`` the record gives, which the writer checks the kept bytes against.
    stored: the re-encoded bytes the record stores.
    original_size: the source's (height, width), upright: what the record gives as its original size.
    rotated: whether ``stored`` was turned upright by the source's Exif orientation.
  """
  directory = _directory
  if directory is None or not _room_for(directory, len(stored)):
    return
  partial = None
  try:
    with tempfile.NamedTemporaryFile('wb', dir=directory, suffix='.partial', delete=False) as f:
      partial = f.name
      f.write(_HEADER.pack(original_size[0], original_size[1], rotated))
      f.write(stored)
    os.replace(partial, _path(directory, source_sha256, stored_sha256))
  except OSError:  # a full or failing disk: the writer encodes again
    if partial:
      with contextlib.suppress(OSError):
        os.remove(partial)


def taken(source_sha256: str, stored_sha256: str) -> Optional[Kept]:
  """What validation kept of a record's stored bytes, removed from the disk; None if nothing was
  kept or the bytes are not the record's."""
  directory = _directory
  if directory is None:
    return None
  path = _path(directory, source_sha256, stored_sha256)
  try:
    with open(path, 'rb') as f:
      data = f.read()
    os.remove(path)
  except OSError:
    return None
  if len(data) < _HEADER.size:
    return None
  height, width, rotated = _HEADER.unpack_from(data)
  stored = data[_HEADER.size:]
  if hashlib.sha256(stored).hexdigest() != stored_sha256:
    return None
  return Kept(stored, (height, width), bool(rotated))


def _path(directory: str, source_sha256: str, stored_sha256: str) -> str:
  return os.path.join(directory, f'{source_sha256}-{stored_sha256}')


class _Usage:
  """What the kept files hold, as this process knows it: the total at its last look at the
  directory (other workers keep and writers take files too), plus what it kept since. It looks
  again only when that would pass KEEP_BYTES, and then at most once a second."""

  def __init__(self):
    self.counted = self.since = 0
    self.looked = float('-inf')

  def room_for(self, directory: str, size: int) -> bool:
    if self.counted + self.since + size > KEEP_BYTES and time.monotonic() - self.looked >= 1:
      self.counted = sum(entry.stat().st_size for entry in os.scandir(directory))
      self.since, self.looked = 0, time.monotonic()
    if self.counted + self.since + size > KEEP_BYTES:
      return False
    self.since += size
    return True


_usage = _Usage()


def _room_for(directory: str, size: int) -> bool:
  with _lock:
    try:
      return size <= (shutil.disk_usage(directory).free - size) * FREE_SHARE and _usage.room_for(directory, size)
    except OSError:
      return False
