"""A manifest's bytes as text: a .gz one decompressed by the stdlib as it is read, and what its
first rows say before any work.

A gzip stream cut short (an upload or copy that stopped) decompresses cleanly up to the cut,
and a reader that stops at the first empty read would list the rows before it and lose the
rest unsaid; damaged data raises zlib's own errors. Either way the manifest is the user's
to fix, so reading it raises InputFileError, which stops the run before its commit and is
said in one line (exit 2). A manifest that names no image at all is refused at launch, as an
empty directory is, from its first rows only.
"""
import csv
import gzip
import zlib
from typing import BinaryIO, Iterable, Optional

from beam_pipeline.core.inputs import manifest_rows
from beam_pipeline.core.rejections import InputFileError

# At launch, at most this many blank rows are read past for the first row that names an image:
# a manifest is not read whole before the run, however large.
MAX_BLANK_ROWS = 10_000


def is_compressed(path: str) -> bool:
  return path.lower().endswith('.gz')


class Decompressed:
  """A .gz manifest's uncompressed bytes, read from ``stream`` as they are asked for; raises
  InputFileError, naming ``path``, for a stream that is cut short or damaged."""

  def __init__(self, stream: BinaryIO, path: str):
    self._path = path
    self._file = gzip.GzipFile(fileobj=stream, mode='rb')
    self._stream = stream

  def read(self, size: int = -1) -> bytes:
    try:
      return self._file.read(size)
    except EOFError:
      raise InputFileError(f'--input={self._path} is cut short: its gzip data ends before the stream does, so rows '
                           'after the cut would be lost (an upload or copy that stopped?); copy or compress it again, '
                           'then rerun') from None
    except gzip.BadGzipFile as e:
      if str(e).startswith('Not a gzipped file'):
        raise InputFileError(f'--input={self._path} is not gzip data ({e}), though its name ends in .gz; compress '
                             'it, or name it without .gz, then rerun') from None
      raise InputFileError(self._damaged(e)) from None
    except zlib.error as e:
      raise InputFileError(self._damaged(e)) from None

  def _damaged(self, error: Exception) -> str:
    return (f'--input={self._path} is damaged: its gzip data does not decompress ({error}); copy or compress it '
            'again from the original, then rerun')

  def close(self) -> None:
    try:
      self._file.close()
    finally:
      self._stream.close()


def emptiness(text: Iterable[str], csv_rows: bool, max_blank_rows: int = MAX_BLANK_ROWS) -> Optional[str]:
  """Why a manifest names no image, from its ``text`` (its lines): 'is empty', 'holds only a
  header row' or 'holds only blank lines'; None once a row names anything (a row the reader
  will reject still counts), or once ``max_blank_rows`` blank rows are read past."""
  rows = csv.reader(text, skipinitialspace=True) if csv_rows else ([line] for line in text)
  seen_header = seen_blank = False
  for number in range(1, max_blank_rows + 2):
    try:
      row = next(rows, None)
    except csv.Error:  # a row the reader rejects: a row all the same
      return None
    if row is None:
      break
    if number == 1 and csv_rows and manifest_rows.is_header(row):
      seen_header = True
    elif any(cell.strip() for cell in row):
      return None
    else:
      seen_blank = True
  else:
    return None
  if seen_header:
    return 'holds only a header row'
  return 'holds only blank lines' if seen_blank else 'is empty'
