"""Index files of uncompressed shards: one ``offset length`` line per record, in bytes.

NVIDIA DALI's ``fn.readers.tfrecord`` needs one per shard, and the PyTorch
``tfrecord`` package reads shards in parallel or at random with one; both ship a
tool that makes it by reading every shard again. The writer knows each record's
length as it frames it, so the index costs nothing then. Hand-written because
TensorFlow's readers do not give a record's offset; the framing is TFRecord's
documented one: an 8-byte little-endian length, its 4-byte CRC, the data, its
4-byte CRC.
"""
import struct
from typing import BinaryIO, Iterable, Iterator, Tuple

_FRAMING_BYTES = 16


def framed(lengths: Iterable[int]) -> Iterator[Tuple[int, int]]:
  """(offset, framed length) of records of these data lengths, written one after another."""
  offset = 0
  for length in lengths:
    yield offset, length + _FRAMING_BYTES
    offset += length + _FRAMING_BYTES


def text(lengths: Iterable[int]) -> str:
  """The index file of records of these data lengths, in the format DALI's tfrecord2idx writes."""
  return ''.join(f'{offset} {size}\n' for offset, size in framed(lengths))


def data_lengths(stream: BinaryIO) -> Iterator[int]:
  """The data length of each record of an uncompressed TFRecord file, read from its start by
  its framing alone (checking CRCs is the reader's business); ValueError where the file
  ends inside a record."""
  end = stream.seek(0, 2)
  position = stream.seek(0)
  while position < end:
    header = stream.read(12)
    length, = struct.unpack('<Q', header[:8]) if len(header) == 12 else (end,)
    position += length + _FRAMING_BYTES
    if position > end:
      raise ValueError('the file ends inside a record')
    stream.seek(position)
    yield length
