"""A manifest's text, read through Beam's FileSystems: whole, or one byte range of it; a .gz one
decompressed by the core (manifest_text), whose errors end the run, since Beam's own
decompression would end a stream cut short as if it were complete."""
import csv
import io
from typing import Optional, Tuple

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_pipeline.core.inputs import manifest_parts, manifest_rows, manifest_text

class _RawReader(io.RawIOBase):
  """Adapts a FileSystems stream (which may be Beam's CompressedFile, lacking the
  io interface) so TextIOWrapper can decode it incrementally, up to ``limit`` bytes."""

  def __init__(self, stream, limit: Optional[int] = None):
    super().__init__()
    self._stream = stream
    self._left = limit

  def readable(self) -> bool:
    return True

  def readinto(self, buffer) -> int:
    wanted = len(buffer) if self._left is None else min(len(buffer), self._left)
    data = self._stream.read(wanted) if wanted else b''
    buffer[:len(data)] = data
    if self._left is not None:
      self._left -= len(data)
    return len(data)

  def close(self) -> None:
    self._stream.close()
    super().close()


def open_text(path: str, rows: Optional[manifest_parts.Part] = None) -> io.TextIOWrapper:
  """The text of a manifest, or of its byte range ``rows``; newline='' lets csv handle quoted
  line breaks. A .gz one (listed whole) is decompressed by manifest_text, whose errors end
  the run: Beam's own decompression would end a stream cut short as if it were complete."""
  stream = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
  if manifest_text.is_compressed(path):
    stream = manifest_text.Decompressed(stream, path)
  elif rows and rows.start:
    stream.seek(rows.start)
  limit = rows.end - rows.start if rows and rows.end is not None else None
  # surrogateescape: a row that is not UTF-8 is rejected alone (_check_text), not the whole job.
  return io.TextIOWrapper(io.BufferedReader(_RawReader(stream, limit)), encoding='utf-8-sig', newline='',
                          errors='surrogateescape')


def csv_header(path: str) -> Optional[Tuple[str, ...]]:
  """The lowercased column names, if the manifest's first row names them."""
  with open_text(path) as text:
    try:
      row = next(csv.reader(text, skipinitialspace=True), [])
    except (csv.Error, UnicodeError):  # the reader rejects that row
      return None
  return tuple(cell.strip().lower() for cell in row) if manifest_rows.is_header(row) else None
