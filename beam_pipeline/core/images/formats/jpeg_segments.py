"""A JPEG's segments before its first scan, walked byte by byte.

Pillow joins a JPEG's Exif segments quadratically and parses its header at a cost
the quick path cannot pay, so the few things validation needs from the segments
(how many Exif segments there are, where each one's data starts) are read here
without Pillow.
"""
import struct
from typing import Iterator, Tuple

MAX_EXIF_SEGMENTS = 16
EXIF_HEADER = b'Exif\x00\x00'
# The segments too_many_exif_segments walks in Python before it counts in C instead: a camera's
# JPEG has about ten before its first scan.
WALKED_SEGMENTS = 64


def too_many_exif_segments(data: bytes) -> bool:
  """Whether a JPEG has more than MAX_EXIF_SEGMENTS Exif segments before its first scan.

  A photo's few segments are walked up to its first scan, which is near its start: counting
  the bytes Exif\\0\\0 over the whole file cost as much as the walk for a small photo and a
  few milliseconds for a 12 MP one. A file of more than WALKED_SEGMENTS segments is counted
  in C instead, and walked only where those bytes occur often enough.
  """
  exif = 0
  for walked, (marker, position) in enumerate(_segments(data)):
    if walked == WALKED_SEGMENTS:
      return (data.count(EXIF_HEADER) > MAX_EXIF_SEGMENTS and
              sum(1 for _ in exif_starts(data)) > MAX_EXIF_SEGMENTS)
    exif += _is_exif(data, marker, position)
    if exif > MAX_EXIF_SEGMENTS:
      return True
  return False


def exif_starts(data: bytes) -> Iterator[int]:
  """Where each Exif APP1 segment's data (Exif\\0\\0...) starts, before the first scan (a
  camera writes one, right after the start of the image or its JFIF segment)."""
  return (position + 4 for marker, position in _segments(data) if _is_exif(data, marker, position))


def _is_exif(data: bytes, marker: int, position: int) -> bool:
  return marker == 0xE1 and data[position + 4:position + 10] == EXIF_HEADER


def _segments(data: bytes) -> Iterator[Tuple[int, int]]:
  """(marker, position of its 0xFF) of each segment with a length before the first scan."""
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
    yield marker, position
    length, = struct.unpack_from('>H', data, position + 2)
    position += 2 + length
