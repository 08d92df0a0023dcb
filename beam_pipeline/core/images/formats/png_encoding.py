"""PNG bytes made from an image's samples, for the records whose source a record cannot keep
(WebP, TIFF, BMP, ...).

Hand-written rather than Pillow's encoder for its cost alone. Pillow chooses each row's filter
by trying all five, which takes about as long as zlib's compression of the rows; here every row
takes the Up filter (the row less the one above it, a numpy subtraction a strip of rows at a
time), which a photo compresses to about the size Pillow's choice gives. And the rows are
deflated by ISA-L (isal), in about a third of zlib's time for as few bytes: about a fifth of
Pillow's time in all (benchmarks/README.md, PNG encoding).

The bytes are the same on every run of one environment. ISA-L picks its code by the processor's
instructions, so a machine of another kind may deflate them differently; the shard writer, which
makes a record's bytes again, then checks what it made and records its hash (shard_writer).

Only modes whose samples are the PNG's bytes as they are (8-bit gray or colour, with or without
alpha, and 16-bit gray) are written here, with the source's ICC profile if it has one; a
palette, 1-bit pixels or a transparent colour are left to Pillow (encodes).
"""
import struct
import zlib
from typing import Optional

import numpy as np
from isal import isal_zlib
from PIL import Image

# The deflate level, ISA-L's as Pillow's (zlib's): the fastest that still compresses
# (benchmarks/README.md, PNG encoding).
LEVEL = 1
# PNG's colour type and bit depth of each mode written here.
_LAYOUTS = {'L': (0, 8), 'LA': (4, 8), 'RGB': (2, 8), 'RGBA': (6, 8), 'I;16': (0, 16)}
_SIGNATURE = b'\x89PNG\r\n\x1a\n'
_UP = 2  # the filter type byte that starts each row
_STRIP_BYTES = 1 << 22  # rows filtered and compressed at once: 4 MiB of samples, besides the image


def encodes(image: Image.Image) -> bool:
  """Whether ``image`` is in a mode written here, with no transparent colour (a tRNS chunk)."""
  return image.mode in _LAYOUTS and 'transparency' not in image.info


def encoded(image: Image.Image, icc_profile: Optional[bytes] = None, samples: Optional[np.ndarray] = None) -> bytes:
  """``image`` (encodes) as PNG bytes: its samples (``samples``, if decoded already), every row
  Up-filtered, deflated at LEVEL, and ``icc_profile`` (an iCCP chunk) if given."""
  colour_type, depth = _LAYOUTS[image.mode]
  samples = np.asarray(image) if samples is None else samples
  if depth == 16:
    samples = samples.astype('>u2')  # PNG's samples are big-endian
  rows = np.ascontiguousarray(samples).reshape(image.height, -1).view(np.uint8)
  header = struct.pack('>IIBBBBB', image.width, image.height, depth, colour_type, 0, 0, 0)  # deflate, no interlace
  chunks = [_SIGNATURE, _chunk(b'IHDR', header)]
  if icc_profile:
    chunks.append(_chunk(b'iCCP', b'ICC Profile\0\0' + zlib.compress(icc_profile)))
  compressor = isal_zlib.compressobj(LEVEL)
  step = max(1, _STRIP_BYTES // max(1, rows.shape[1]))
  for start in range(0, len(rows), step):
    strip = rows[start:start + step]
    filtered = np.empty((len(strip), rows.shape[1] + 1), np.uint8)
    filtered[:, 0] = _UP
    np.subtract(strip, rows[start - 1:start + len(strip) - 1] if start else _after_zeros(strip), out=filtered[:, 1:])
    chunks.append(_chunk(b'IDAT', compressor.compress(filtered.data)))  # a chunk a strip: no copy of the whole
  chunks.append(_chunk(b'IDAT', compressor.flush()))
  chunks.append(_chunk(b'IEND', b''))
  return b''.join(chunks)


def _after_zeros(strip: np.ndarray) -> np.ndarray:
  """The rows above the first strip's: the first row's is taken as zeros, as PNG's Up filter does."""
  above = np.empty_like(strip)
  above[0] = 0
  above[1:] = strip[:-1]
  return above


def _chunk(kind: bytes, data: bytes) -> bytes:
  """The chunk of ``kind`` holding ``data``; none for an empty IDAT (a strip the deflate kept back)."""
  if not data and kind == b'IDAT':
    return b''
  return b''.join((struct.pack('>I', len(data)), kind, data, struct.pack('>I', zlib.crc32(data, zlib.crc32(kind)))))
