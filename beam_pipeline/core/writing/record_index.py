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
from typing import BinaryIO, Iterable, Iterator, List, Tuple

import google_crc32c

FRAMING_BYTES = 16  # a record's length and two CRCs around its data
_CRC_MASK_DELTA = 0xA282EAD8  # TFRecord's masked CRC: rotated right by 15 bits, plus this


def framed(lengths: Iterable[int]) -> Iterator[Tuple[int, int]]:
  """(offset, framed length) of records of these data lengths, written one after another."""
  offset = 0
  for length in lengths:
    yield offset, length + FRAMING_BYTES
    offset += length + FRAMING_BYTES


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
    position += length + FRAMING_BYTES
    if position > end:
      raise ValueError('the file ends inside a record')
    stream.seek(position)
    yield length


def checked_spans(data: bytes) -> List[Tuple[int, int]]:
  """(offset, framed length) of each record of a whole uncompressed TFRecord file, both of its
  CRC-32Cs checked: an update copies the records it keeps as they are, framing and all, without
  parsing or framing them again. ValueError where the file ends inside a record or a checksum
  fails."""
  spans, position = [], 0
  while position < len(data):
    if position + 12 > len(data):
      raise ValueError(f'the file ends inside the header of the record at byte {position}')
    length, length_crc = struct.unpack_from('<QI', data, position)
    if _masked_crc(data[position:position + 8]) != length_crc:
      raise ValueError(f'the length of the record at byte {position} fails its checksum')
    end = position + length + FRAMING_BYTES
    if end > len(data):
      raise ValueError(f'the file ends inside the record at byte {position}')
    if _masked_crc(data[position + 12:end - 4]) != struct.unpack_from('<I', data, end - 4)[0]:
      raise ValueError(f'the data of the record at byte {position} fails its checksum')
    spans.append((position, end - position))
    position = end
  return spans


def _masked_crc(data: bytes) -> int:
  crc = google_crc32c.value(data)
  return (((crc >> 15) | (crc << 17)) + _CRC_MASK_DELTA) & 0xFFFFFFFF
