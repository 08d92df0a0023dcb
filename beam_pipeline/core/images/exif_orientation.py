"""An image's Exif orientation: read, and whether the stored pixels are turned to it.

TensorFlow ignores the tag while DALI and Pillow's exif_transpose apply it, so with
--exif_orientation=apply a turned image is stored upright and without the tag.
Pillow reads the tag of any image; a JPEG's is first read here by hand, so that an
upright photo keeps the quick path.
"""
import struct

from PIL import Image

from beam_pipeline.core.images.formats import jpeg_segments
from beam_pipeline.core.settings import StoredImages

_ORIENTATION_TAG = 0x0112
# What ImageOps.exif_transpose does to the pixels of each orientation; called directly, as the
# stored image keeps no Exif that exif_transpose would rewrite (and could fail to, if damaged).
TRANSPOSES = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180, 4: Image.Transpose.FLIP_TOP_BOTTOM,
              5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
              8: Image.Transpose.ROTATE_90}


def turns(orientation: int, stored: StoredImages) -> bool:
  """Whether an image of this Exif orientation is stored turned upright (2-8: mirrored or rotated)."""
  return stored.exif_orientation == 'apply' and 2 <= orientation <= 8


def pillow_orientation(image: Image.Image) -> int:
  """The Exif orientation Pillow reads for ``image`` (1 without one), as exif_transpose applies it."""
  try:
    value = image.getexif().get(_ORIENTATION_TAG, 1)
  except Exception:  # pylint: disable=broad-except  # damaged Exif: the pixels are what they are
    return 1
  return value if isinstance(value, int) else 1


def jpeg_orientation(data: bytes) -> int:
  """The orientation tag of a JPEG's first Exif segment, 1 without one: whether it may take the
  quick path. Hand-written because Pillow's header parser costs more than the quick path
  saves; Pillow (pillow_orientation) has the last word on any JPEG this finds turned."""
  start = next(jpeg_segments.exif_starts(data), None)
  if start is None:
    return 1
  tiff = data[start + len(jpeg_segments.EXIF_HEADER):start + 2**16]
  order = {b'II': '<', b'MM': '>'}.get(tiff[:2])
  try:
    ifd, = struct.unpack_from(order + 'I', tiff, 4)
    entries, = struct.unpack_from(order + 'H', tiff, ifd)
    for position in range(ifd + 2, ifd + 2 + 12 * entries, 12):
      tag, kind = struct.unpack_from(order + 'HH', tiff, position)
      if tag == _ORIENTATION_TAG and kind == 3:  # SHORT
        return struct.unpack_from(order + 'H', tiff, position + 8)[0]
  except (struct.error, TypeError):  # no byte order, or offsets past the data: no orientation here
    return 1
  return 1
