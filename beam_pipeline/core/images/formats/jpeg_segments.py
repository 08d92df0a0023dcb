"""A JPEG's segments before its first scan, walked byte by byte.

Pillow joins a JPEG's Exif segments quadratically and parses its header at a cost
the quick path cannot pay, so the few things validation needs from the segments
(how many Exif segments there are, where each one's data starts) are read here
without Pillow.
"""
import struct
from typing import Iterator

MAX_EXIF_SEGMENTS = 16
EXIF_HEADER = b'Exif\x00\x00'


def too_many_exif_segments(data: bytes) -> bool:
  """Whether a JPEG has more than MAX_EXIF_SEGMENTS Exif segments before its first scan.

  Each one starts with the bytes Exif\\0\\0, so a file holding those bytes at
  most that often is cleared by one count in C, without walking its segments
  in Python for every photo.
  """
  return (data.count(EXIF_HEADER) > MAX_EXIF_SEGMENTS and
          sum(1 for _ in exif_starts(data)) > MAX_EXIF_SEGMENTS)


def exif_starts(data: bytes) -> Iterator[int]:
  """Where each Exif APP1 segment's data (Exif\\0\\0...) starts, before the first scan (a
  camera writes one, right after the start of the image or its JFIF segment)."""
  position = 2
  while position + 4 <= len(data) and data[position] == 0xFF:
    marker = data[position + 1]
    if marker == 0xFF:  # fill byte
      position += 1
      continue
    if marker == 0xDA or marker == 0xD9:  # start of scan, end of image
      break
    if marker == 0x01 or 0xD0 <= marker <= 0xD8:  # markers without a length
      position += 2
      continue
    length, = struct.unpack_from('>H', data, position + 2)
    if marker == 0xE1 and data[position + 4:position + 10] == EXIF_HEADER:
      yield position + 4
    position += 2 + length
