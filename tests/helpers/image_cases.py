"""Generated bad and odd image files, each with the outcome the converter must give."""
import io
import random
import struct
import zlib
from typing import Dict, List, NamedTuple, Optional, Tuple

import numpy as np
from PIL import Image

from helpers.photos import encode, image


class Case(NamedTuple):
  name: str  # file name, extension as a user would have it
  data: bytes
  reason: Optional[str] = None  # rejection reason, or None if written
  format: Optional[str] = None  # stored format when written
  channels: Optional[int] = None
  reencoded: bool = False


def _png_with_size(width: int, height: int) -> bytes:
  """A PNG whose header claims a huge size; its data is tiny (a decompression bomb's header)."""
  data = bytearray(encode(image(1, 8, 8), 'PNG'))
  ihdr = struct.pack('>II', width, height) + bytes(data[24:29])
  data[16:29] = ihdr
  data[29:33] = struct.pack('>I', zlib.crc32(b'IHDR' + ihdr) & 0xFFFFFFFF)
  return bytes(data)


def _png_bad_crc() -> bytes:
  data = bytearray(encode(image(1, 64, 48), 'PNG'))
  idat = data.index(b'IDAT')
  length, = struct.unpack('>I', data[idat - 4:idat])
  data[idat + 4 + length] ^= 0xFF  # first byte of IDAT's CRC
  return bytes(data)


def _marker_in_scan(jpeg: bytes) -> bytes:
  """A stray marker segment, claiming 65535 bytes, inside the entropy-coded scan:
  Pillow zero-fills the rest and accepts the file, libjpeg in TensorFlow fails on it
  (the pattern fuzzing found)."""
  middle = (jpeg.index(b'\xff\xda') + len(jpeg)) // 2
  return jpeg[:middle] + b'\xff\xe0\xff\xff' + jpeg[middle:]


def _chunks(data: bytes) -> List[Tuple[bytes, bytes]]:
  """A PNG's chunks as (type, the whole chunk)."""
  found, position = [], 8
  while position < len(data):
    length, = struct.unpack_from('>I', data, position)
    found.append((data[position + 4:position + 8], data[position:position + 12 + length]))
    position += 12 + length
  return found


def _chunk(kind: bytes, body: bytes) -> bytes:
  return struct.pack('>I', len(body)) + kind + body + struct.pack('>I', zlib.crc32(kind + body))


def _no_frames(apng: bytes) -> bytes:
  """``apng`` with its animation control (acTL) claiming no frames: Pillow warns and shows the
  default image, libpng without APNG support decodes it, NVIDIA DALI's decoder fails."""
  return apng[:8] + b''.join(_chunk(b'acTL', struct.pack('>II', 0, 0)) if kind == b'acTL' else whole
                             for kind, whole in _chunks(apng))


def apng_cases() -> Dict[str, Case]:
  """Animated PNGs as Pillow's own test images have them (apng/chunk_no_fdat.png,
  apng/syntax_num_frames_zero_default.png, ...), made here: each stored as a still PNG of
  its default image, the frame TensorFlow decodes."""
  photo = image(1, 64, 48)
  frames = [photo.rotate(180), photo.transpose(Image.FLIP_LEFT_RIGHT)]
  animated = encode(photo, 'PNG', save_all=True, append_images=frames[:1])
  apart = encode(photo, 'PNG', save_all=True, append_images=frames, default_image=True)  # not one of the frames
  listed = [
      Case('animated.png', animated, format='png', channels=3, reencoded=True),
      Case('apng-default-image-apart.png', apart, format='png', channels=3, reencoded=True),
      Case('apng-no-fdat.png', animated[:8] + b''.join(whole for kind, whole in _chunks(animated) if kind != b'fdAT'),
           format='png', channels=3, reencoded=True),
      Case('apng-zero-frames.png', _no_frames(animated), format='png', channels=3, reencoded=True),
      Case('apng-zero-frames-default.png', _no_frames(apart), format='png', channels=3, reencoded=True),
      Case('apng-palette.png', encode(photo.convert('P'), 'PNG', save_all=True,
                                      append_images=[frame.convert('P') for frame in frames]),
           format='png', channels=3, reencoded=True),
      Case('apng-rgba.png', encode(photo.convert('RGBA'), 'PNG', save_all=True, blend=1,
                                   append_images=[frame.convert('RGBA') for frame in frames]),
           format='png', channels=4, reencoded=True),
  ]
  return {case.name: case for case in listed}


def cases() -> Dict[str, Case]:
  photo = image(1, 64, 48)
  jpeg = encode(photo, 'JPEG', quality=90)
  frames = dict(save_all=True, append_images=[photo.rotate(180)])
  p_frames = dict(save_all=True, append_images=[photo.rotate(180).convert('P')])
  listed = [
      Case('empty.jpg', b'', reason='empty'),
      Case('truncated.jpg', jpeg[:len(jpeg) // 2], reason='truncated'),
      Case('garbage.jpg', bytes(random.Random(3).randrange(256) for _ in range(3000)), reason='not_image'),
      Case('page.jpg', b'<!DOCTYPE html>\n<html><body>Access denied</body></html>\n', reason='not_image'),
      # Thumbs.db's kind of file under an image's name; a folder's own Thumbs.db is skipped (skipped_files).
      Case('ole-compound-file.jpg', b'\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1' + bytes(600), reason='not_image'),
      Case('huge-header.png', _png_with_size(60000, 60000), reason='too_many_pixels'),
      Case('bad-crc.png', _png_bad_crc(), reason='corrupt'),
      Case('marker-in-scan.jpg', _marker_in_scan(jpeg), reason='corrupt'),
      Case('float.tiff', encode(Image.fromarray(np.random.rand(16, 16).astype('float32')), 'TIFF'),
           reason='unsupported_pixels'),
      Case('photo.jpg', jpeg, format='jpeg', channels=3),
      Case('trailing-bytes.jpg', jpeg + b'\x00garbage after EOI', format='jpeg', channels=3),
      Case('progressive.jpg', encode(photo, 'JPEG', progressive=True), format='jpeg', channels=3),
      Case('gray.jpg', encode(photo.convert('L'), 'JPEG'), format='jpeg', channels=1),
      Case('cmyk.jpg', encode(photo.convert('CMYK'), 'JPEG'), format='jpeg', channels=3),
      Case('png-named.jpg', encode(photo, 'PNG'), format='png', channels=3),
      Case('rgba.png', encode(photo.convert('RGBA'), 'PNG'), format='png', channels=4),
      Case('palette-alpha.png', encode(photo.convert('P'), 'PNG', transparency=0), format='png', channels=4),
      Case('palette.png', encode(photo.convert('P'), 'PNG'), format='png', channels=3),
      Case('gray-alpha.png', encode(photo.convert('LA'), 'PNG'), format='png', channels=2),
      Case('16bit.png', encode(Image.fromarray((np.random.rand(20, 30) * 65535).astype('uint16')), 'PNG'),
           format='png', channels=1),
      Case('still.gif', encode(photo.convert('P'), 'GIF'), format='png', channels=3, reencoded=True),
      Case('animated.gif', encode(photo.convert('P'), 'GIF', **p_frames), format='png', channels=3, reencoded=True),
      Case('transparent.gif', encode(photo.convert('P'), 'GIF', transparency=0), format='png', channels=4,
           reencoded=True),
      Case('photo.bmp', encode(photo, 'BMP'), format='png', channels=3, reencoded=True),
      Case('trailing-bytes.bmp', encode(photo, 'BMP') + b'\0\0', format='png', channels=3, reencoded=True),
      Case('palette.bmp', encode(photo.convert('P'), 'BMP'), format='png', channels=3, reencoded=True),
      Case('1bit.bmp', encode(photo.convert('1'), 'BMP'), format='png', channels=1, reencoded=True),
      Case('photo.webp', encode(photo, 'WEBP'), format='png', channels=3, reencoded=True),
      Case('alpha.webp', encode(photo.convert('RGBA').rotate(30), 'WEBP'), format='png', channels=4, reencoded=True),
      Case('animated.webp', encode(photo, 'WEBP', **frames), format='png', channels=3, reencoded=True),
      # Crashed TensorFlow's WebP decoder (heap corruption, SIGABRT) before it was re-encoded.
      Case('damaged-frame.webp', encode(photo, 'WEBP', **frames).replace(b'ANMF', b'AcMF', 1),
           format='png', channels=3, reencoded=True),
      Case('scan.tiff', encode(photo, 'TIFF'), format='png', channels=3, reencoded=True),
      Case('cmyk.tiff', encode(photo.convert('CMYK'), 'TIFF'), format='png', channels=3, reencoded=True),
      Case('16bit.tiff', encode(Image.fromarray((np.random.rand(20, 30) * 65535).astype('uint16')), 'TIFF'),
           format='png', channels=1, reencoded=True),
      Case('icon.ico', encode(photo, 'ICO'), format='png', channels=3, reencoded=True),
      Case('photo.ppm', encode(photo, 'PPM'), format='png', channels=3, reencoded=True),
      Case('photo.tga', encode(photo, 'TGA'), format='png', channels=3, reencoded=True),
  ]
  return {**{case.name: case for case in listed}, **apng_cases()}


def decoded_size(data: bytes):
  """Pillow's view of stored bytes, for cross-checks independent of TensorFlow."""
  with Image.open(io.BytesIO(data)) as image:
    return image.size
