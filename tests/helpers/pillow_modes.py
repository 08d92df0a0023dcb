"""Image files in every pixel mode Pillow can open from a file, for the odd-file tests.

Pillow writes each mode in some format (TIFF holds most of them; its own IM
format holds YCbCr and I;16L); HSV, La and RGBa have no format that stores them,
so no file can hold them. Next to the modes: an RGB TIFF with an sRGB ICC
profile (kept on re-encoding), an L*a*b* TIFF with a Lab profile (dropped: the
stored pixels are RGB), and two PNGs Pillow opens but refuses to load, which
libpng reads: an animated PNG with frame sequence errors, and one whose text after
the pixels inflates past Pillow's limit.
"""
import io
import struct
import zlib
from typing import Dict, NamedTuple, Optional

import numpy as np
from PIL import Image, ImageCms

from helpers.photos import encode

SIZE = (48, 36)  # width, height: larger than the --max_side the tests use


class ModeCase(NamedTuple):
  name: str
  data: bytes
  reason: Optional[str] = None  # the rejection reason, whatever --image_format says; None if written


def _pixels(seed: int, channels: int, high: int = 256, dtype=np.uint8) -> np.ndarray:
  shape = (SIZE[1], SIZE[0]) + ((channels,) if channels > 1 else ())
  return (np.random.RandomState(seed).rand(*shape) * high).astype(dtype)


def _rgb(seed: int = 0) -> Image.Image:
  return Image.fromarray(_pixels(seed, 3))


def _broken_apng() -> bytes:
  """An animated PNG without its second frame's fcTL chunk: Pillow opens it, and its load()
  raises 'APNG contains frame sequence errors'; libpng decodes its first frame."""
  rgb = _rgb(9)
  data = encode(rgb, 'PNG', save_all=True, append_images=[rgb.rotate(180)])
  position, kept, frame_controls = 8, [data[:8]], 0
  while position < len(data):
    length, = struct.unpack_from('>I', data, position)
    chunk = data[position:position + 12 + length]
    if chunk[4:8] == b'fcTL':
      frame_controls += 1
    if not (chunk[4:8] == b'fcTL' and frame_controls == 2):
      kept.append(chunk)
    position += 12 + length
  return b''.join(kept)


def _text_after_pixels() -> bytes:
  """A PNG with a zTXt chunk after its image data that inflates to 2 MiB: Pillow reads it in
  load(), past its MAX_TEXT_CHUNK, and raises ValueError; libpng ignores it."""
  data = encode(_rgb(8), 'PNG')
  end = data.rindex(b'IEND') - 4
  body = b'Comment\x00\x00' + zlib.compress(b' ' * 2**21)
  chunk = struct.pack('>I', len(body)) + b'zTXt' + body + struct.pack('>I', zlib.crc32(b'zTXt' + body))
  return data[:end] + chunk + data[end:]


def cases() -> Dict[str, ModeCase]:
  rgb = _rgb()
  srgb = ImageCms.ImageCmsProfile(ImageCms.createProfile('sRGB')).tobytes()
  lab_profile = ImageCms.ImageCmsProfile(ImageCms.createProfile('LAB')).tobytes()
  sixteen = Image.fromarray(_pixels(3, 1, 65536, np.uint16))
  listed = [
      ModeCase('bilevel.png', encode(rgb.convert('1'), 'PNG')),
      ModeCase('bilevel.tiff', encode(rgb.convert('1'), 'TIFF')),
      ModeCase('gray.png', encode(rgb.convert('L'), 'PNG')),
      ModeCase('gray-alpha.png', encode(Image.fromarray(_pixels(1, 2)), 'PNG')),
      ModeCase('gray-alpha.tiff', encode(Image.fromarray(_pixels(1, 2)), 'TIFF')),
      ModeCase('palette-transparency.png', encode(rgb.convert('P'), 'PNG', transparency=3)),
      ModeCase('palette-transparency.gif', encode(rgb.convert('P'), 'GIF', transparency=3)),
      ModeCase('palette-alpha.tiff', encode(rgb.convert('P').convert('PA'), 'TIFF')),
      ModeCase('srgb-profile.tiff', encode(rgb, 'TIFF', icc_profile=srgb)),
      ModeCase('rgba.tiff', encode(Image.fromarray(_pixels(2, 4)), 'TIFF')),
      ModeCase('cmyk.tiff', encode(rgb.convert('CMYK'), 'TIFF')),
      ModeCase('cmyk.jpg', encode(rgb.convert('CMYK'), 'JPEG')),
      ModeCase('ycbcr.im', encode(rgb.convert('YCbCr'), 'IM')),
      ModeCase('lab.tiff', encode(rgb.convert('LAB'), 'TIFF')),
      ModeCase('lab-profile.tiff', encode(rgb.convert('LAB'), 'TIFF', icc_profile=lab_profile)),
      ModeCase('int32.tiff', encode(Image.fromarray(_pixels(4, 1, 65536, np.int32)), 'TIFF')),
      ModeCase('int32-wide.tiff', encode(Image.fromarray(_pixels(4, 1, 2**20, np.int32)), 'TIFF'),
               'unsupported_pixels'),
      ModeCase('16bit.png', encode(sixteen, 'PNG')),
      ModeCase('16bit.tiff', encode(sixteen, 'TIFF')),
      ModeCase('16bit-big-endian.tiff', encode(sixteen.convert('I;16B'), 'TIFF')),
      ModeCase('16bit-little-endian.im', encode(sixteen.convert('I;16L'), 'IM')),
      ModeCase('float.tiff', encode(Image.fromarray(_pixels(5, 1, 1, np.float32)), 'TIFF'), 'unsupported_pixels'),
      ModeCase('broken-frames.png', _broken_apng()),
      ModeCase('text-after-pixels.png', _text_after_pixels()),
  ]
  return {case.name: case for case in listed}


def mode_of(data: bytes) -> str:
  with Image.open(io.BytesIO(data)) as image:
    return image.mode
