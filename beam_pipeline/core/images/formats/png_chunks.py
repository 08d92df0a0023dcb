"""A PNG's chunks, walked byte by byte as libpng reads them.

Pillow's decoder skips CRCs and its verify() stops before IEND, whose CRC (and
presence) libpng, and so TensorFlow, insists on: this walk rejects what TensorFlow
would, for a precise reason, tells whether Pillow's load() has more to parse than
its open() did, and whether the PNG is animated (APNG), which a stricter decoder
than TensorFlow's may refuse.
"""
import struct
import zlib
from typing import NamedTuple

from beam_pipeline.core import rejections
from beam_pipeline.core.rejections import Rejected

# The chunk that holds a PNG's Exif; Pillow loads the whole image to look for one.
EXIF_CHUNK = b'eXIf'
# Chunks past the first IDAT that Pillow's load() reads no further than: the image data
# itself, and its end. Pillow parses every chunk before the first IDAT when it opens a PNG.
_IMAGE_DATA_CHUNKS = (b'IDAT', b'IEND')
_ANIMATION_CHUNK = b'acTL'
# An APNG's chunks: its animation control, and each frame's control and data. libpng without
# APNG support (TensorFlow's) skips them and decodes the default image; NVIDIA DALI's decoder
# stops on some files that have them ('IEND: out of place', acTL with no frames).
_APNG_CHUNKS = (b'acTL', b'fcTL', b'fdAT')


class Walked(NamedTuple):
  """What the walk of a PNG's chunks found."""
  parsed_by_load: bool  # Pillow's load() parses chunks past the image data (frames, text after the pixels)
  animated: bool  # any APNG chunk: stored as a still PNG of its default image


def verify(data: bytes) -> Walked:
  """Checks every chunk's CRC up to and including IEND, as libpng does; says whether Pillow's
  load() parses chunks of its own past the image data (an animation's frames, text after the
  pixels), where it can fail when libpng does not, and whether the PNG is an APNG."""
  position, in_image_data, parsed_by_load, animated = 8, False, False, False
  while True:
    if position + 12 > len(data):
      raise Rejected(rejections.TRUNCATED, 'PNG data ends before its IEND chunk')
    length, = struct.unpack_from('>I', data, position)
    end = position + 8 + length
    if end + 4 > len(data):
      raise Rejected(rejections.TRUNCATED, 'PNG data ends inside a chunk')
    kind = data[position + 4:position + 8]
    if zlib.crc32(data[position + 4:end]) != struct.unpack_from('>I', data, end)[0]:
      raise Rejected(rejections.CORRUPT, f'PNG chunk {kind!r} fails its CRC check')
    if kind == b'IEND':
      return Walked(parsed_by_load, animated)
    in_image_data = in_image_data or kind == b'IDAT'
    animated = animated or kind in _APNG_CHUNKS
    parsed_by_load = parsed_by_load or kind == _ANIMATION_CHUNK or (in_image_data and kind not in _IMAGE_DATA_CHUNKS)
    position = end + 4
