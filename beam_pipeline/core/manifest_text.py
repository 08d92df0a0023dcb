"""A manifest's bytes as text: a .gz one decompressed by the stdlib as it is read.

A gzip stream cut short (an upload or copy that stopped) decompresses cleanly up to the cut,
and a reader that stops at the first empty read would list the rows before it and lose the
rest unsaid; damaged data raises zlib's own errors. Either way the manifest is the user's
to fix, so reading it raises InputFileError, which stops the run before its commit and is
said in one line (exit 2).
"""
import gzip
import zlib
from typing import BinaryIO

from beam_pipeline.core.rejections import InputFileError


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
