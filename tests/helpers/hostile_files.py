"""Crafted hostile image files: bomb headers, huge or looping metadata, exact sizes.

Each builder returns the bytes of one file, made cheaply (headers are patched,
never large pixel arrays encoded).
"""
import struct
import zlib
from typing import Dict, List

from PIL import Image, TiffImagePlugin

from helpers.photos import encode, image


def photo(seed: int = 1, width: int = 32, height: int = 24) -> Image.Image:
  return image(seed, width, height)


def jpeg(seed: int = 1, width: int = 32, height: int = 24) -> bytes:
  return encode(photo(seed, width, height), 'JPEG', quality=90)


# --- PNG ----------------------------------------------------------------------------------------


def png_chunk(kind: bytes, data: bytes) -> bytes:
  return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_with_size(width: int, height: int) -> bytes:
  """A tiny PNG whose IHDR claims width x height (valid CRC): a decompression bomb's header."""
  data = encode(photo(), 'PNG')
  ihdr = struct.pack('>II', width, height) + data[24:29]
  return data[:8] + png_chunk(b'IHDR', ihdr) + data[33:]


def png_with_chunks(extra: bytes, after_image_data: bool = False) -> bytes:
  """A small valid PNG with ``extra`` chunks before its first IDAT, or just before IEND."""
  data = encode(photo(), 'PNG')
  at = data.index(b'IEND' if after_image_data else b'IDAT') - 4
  return data[:at] + extra + data[at:]


def zlib_bomb(size: int = 2**28) -> bytes:
  """``size`` zero bytes, deflated (256 MiB -> about 260 KB)."""
  compressor = zlib.compressobj(9)
  block = bytes(2**24)
  parts = [compressor.compress(block) for _ in range(size // len(block))]
  return b''.join(parts) + compressor.flush()


def ztxt(keyword: bytes, compressed: bytes) -> bytes:
  return png_chunk(b'zTXt', keyword + b'\0\0' + compressed)


def itxt(keyword: bytes, text: bytes, compressed: bool) -> bytes:
  return png_chunk(b'iTXt', keyword + b'\0' + (b'\1\0' if compressed else b'\0\0') + b'\0\0' + text)


# --- JPEG ---------------------------------------------------------------------------------------


def jpeg_with_frame_size(width: int, height: int) -> bytes:
  """A tiny JPEG whose SOF0 claims width x height."""
  data = jpeg()
  at = data.index(b'\xff\xc0')
  return data[:at + 5] + struct.pack('>HH', height, width) + data[at + 9:]


def jpeg_with_segments(segments: List[bytes]) -> bytes:
  """A small valid JPEG with the given marker segments right after SOI."""
  data = jpeg()
  return data[:2] + b''.join(segments) + data[2:]


def segment(marker: int, payload: bytes) -> bytes:
  assert len(payload) <= 65533
  return struct.pack('>BBH', 0xFF, marker, len(payload) + 2) + payload


def exif_segment(fill: int = 65533) -> bytes:
  return segment(0xE1, b'Exif\0\0' + bytes(fill - 6))


def icc_segments(count: int = 255) -> List[bytes]:
  return [segment(0xE2, b'ICC_PROFILE\0' + bytes([index + 1, count]) + bytes(65533 - 14))
          for index in range(count)]


def exif_with_looping_ifds() -> bytes:
  """EXIF whose IFD0 points (as Exif IFD and GPS IFD, and as next IFD) back at itself."""
  entries = struct.pack('<HHII', 0x8769, 4, 1, 8) + struct.pack('<HHII', 0x8825, 4, 1, 8)
  ifd = struct.pack('<H', 2) + entries + struct.pack('<I', 8)
  return segment(0xE1, b'Exif\0\0' + b'II*\0' + struct.pack('<I', 8) + ifd)


def jpeg_of_size(data: bytes, size: int) -> bytes:
  """The JPEG ``data`` padded with comment (COM) segments to exactly ``size`` bytes."""
  remaining = size - len(data)
  assert remaining == 0 or remaining >= 4
  segments = []
  while remaining:
    take = min(remaining, 65537)
    if 0 < remaining - take < 4:
      take -= 4
    segments.append(segment(0xFE, bytes(take - 4)))
    remaining -= take
  padded = data[:2] + b''.join(segments) + data[2:]
  assert len(padded) == size
  return padded


# --- GIF ----------------------------------------------------------------------------------------


def gif_with_screen(width: int, height: int) -> bytes:
  data = encode(photo().convert('P'), 'GIF')
  return data[:6] + struct.pack('<HH', width, height) + data[10:]


def gif_with_frame(width: int, height: int) -> bytes:
  """A GIF with a normal logical screen whose first frame claims width x height."""
  data = bytearray(encode(photo().convert('P'), 'GIF'))
  at = data.index(b'\x2c')  # image descriptor
  data[at + 5:at + 9] = struct.pack('<HH', width, height)
  return bytes(data)


# --- TIFF ---------------------------------------------------------------------------------------


def tiff() -> bytes:
  return encode(photo(), 'TIFF')


def _first_ifd(data: bytes):
  offset = struct.unpack_from('<I', data, 4)[0]
  count = struct.unpack_from('<H', data, offset)[0]
  return offset, count


def tiff_with_entries(extra_entries: List[bytes]) -> bytes:
  """The TIFF with its first IFD rewritten at the end of the file with extra 12-byte entries."""
  data = tiff()
  offset, count = _first_ifd(data)
  entries = [data[offset + 2 + 12 * i:offset + 14 + 12 * i] for i in range(count)] + extra_entries
  entries.sort(key=lambda entry: struct.unpack_from('<H', entry)[0])
  ifd = struct.pack('<H', len(entries)) + b''.join(entries) + struct.pack('<I', 0)
  return data[:4] + struct.pack('<I', len(data)) + data[8:] + ifd


def tiff_with_tag_past_the_end() -> bytes:
  """Its Software tag's text lies past the end of the file: Pillow warns ("Truncated
  File Read") and decodes the image."""
  return tiff_with_entries([struct.pack('<HHII', 305, 2, 100, 2**31)])


def tiff_with_size(width: int, height: int) -> bytes:
  data = bytearray(tiff())
  offset, count = _first_ifd(data)
  for i in range(count):
    tag = struct.unpack_from('<H', data, offset + 2 + 12 * i)[0]
    if tag in (256, 257):
      struct.pack_into('<HHII', data, offset + 2 + 12 * i, tag, 4, 1, width if tag == 256 else height)
  return bytes(data)


def tiff_with_ifd_loop() -> bytes:
  """The first IFD's next-IFD offset points at itself: an endless page chain."""
  data = bytearray(tiff())
  offset, count = _first_ifd(data)
  struct.pack_into('<I', data, offset + 2 + 12 * count, offset)
  return bytes(data)


def tiff_with_many_tags(count: int = 5535) -> bytes:
  """Thousands of private ASCII tags (60000..65534) in one IFD, written by Pillow."""
  info = TiffImagePlugin.ImageFileDirectory_v2()
  for tag in range(60000, 60000 + count):
    info[tag] = 'x' * 10
    info.tagtype[tag] = 2
  return encode(photo(), 'TIFF', tiffinfo=info)


def tiff_pages(count: int) -> bytes:
  image = photo()
  return encode(image, 'TIFF', save_all=True, append_images=[image.rotate(i) for i in range(1, count)])


def metadata_cases() -> Dict[str, bytes]:
  """Huge, deeply nested or looping metadata on otherwise valid small images."""
  bomb = zlib_bomb()
  text = zlib.compress(bytes(900_000))
  return {
      'png-ztxt-bomb-before-idat.png': png_with_chunks(ztxt(b'Comment', bomb)),
      'png-ztxt-bomb-after-idat.png': png_with_chunks(ztxt(b'Comment', bomb), after_image_data=True),
      'png-itxt-bomb.png': png_with_chunks(itxt(b'XML:com.adobe.xmp', bomb, compressed=True)),
      'png-iccp-bomb.png': png_with_chunks(png_chunk(b'iCCP', b'icc\0\0' + bomb)),
      # 200 chunks of 900 KB each: every one under Pillow's per-chunk limit, 180 MB in all.
      'png-200-ztxt-chunks.png': png_with_chunks(b''.join(ztxt(b'k%d' % i, text) for i in range(200))),
      'png-itxt-20mb-plain.png': png_with_chunks(itxt(b'Comment', b'lorem ipsum ' * 1_750_000, compressed=False)),
      'jpeg-2-exif-segments.jpg': jpeg_with_segments([exif_segment()] * 2),
      'jpeg-200-exif-segments.jpg': jpeg_with_segments([exif_segment()] * 200),
      'jpeg-255-icc-segments.jpg': jpeg_with_segments(icc_segments()),
      'jpeg-exif-ifd-loop.jpg': jpeg_with_segments([exif_with_looping_ifds()]),
      'tiff-5535-tags.tif': tiff_with_many_tags(),
      'tiff-65000-entries.tif': tiff_with_entries([struct.pack('<HHII', 65000, 3, 1, 7)] * 65000),
      'tiff-tag-claims-4gb.tif': tiff_with_entries([struct.pack('<HHII', 60000, 4, 0x3FFFFFFF, 0)]),
      'tiff-ifd-loop.tif': tiff_with_ifd_loop(),
      # SubIFDs and Exif IFD pointers to the IFD that holds them.
      'tiff-exif-and-subifd-loop.tif': tiff_with_entries([struct.pack('<HHII', 0x014A, 4, 1, len(tiff())),
                                                          struct.pack('<HHII', 0x8769, 4, 1, len(tiff()))]),
      'tiff-300-pages.tif': tiff_pages(300),
  }


def bomb_header_cases() -> Dict[str, bytes]:
  """Files of a few hundred bytes whose headers claim billions of pixels (or just over the limit)."""
  return {
      'png-100000x100000.png': png_with_size(100000, 100000),
      'png-12000x9000.png': png_with_size(12000, 9000),  # 108 Mpx: over --max_pixels, under Pillow's own guard
      'jpeg-65500x65500.jpg': jpeg_with_frame_size(65500, 65500),
      'gif-screen-65535x65535.gif': gif_with_screen(65535, 65535),
      'gif-frame-65535x65535.gif': gif_with_frame(65535, 65535),
      'tiff-100000x100000.tif': tiff_with_size(100000, 100000),
  }
