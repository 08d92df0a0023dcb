"""Pillow re-encodes an image into the bytes a record stores, the same bytes every time.

What stored_images decides to re-encode is decoded here (its first frame; a PNG that
Pillow refuses as libpng decodes it), turned upright, converted to a mode the stored
format holds, downscaled, and encoded with nothing but its pixels, so that the shard
writer, which keeps no image bytes, can make the very bytes again (reencode_again)
and check them (check_stored).
"""
import io
import warnings
from typing import Optional

import numpy as np
import tensorflow as tf
from PIL import Image

from beam_pipeline.core import isolation, rejections
from beam_pipeline.core.console import native_output
from beam_pipeline.core.images import decoder_messages, exif_orientation, stored_images
from beam_pipeline.core.images.formats import png_encoding
from beam_pipeline.core.images.image_info import PendingImage
from beam_pipeline.core.rejections import Rejected
from beam_pipeline.core.settings import StoredImages

# Every process that opens images with Pillow imports this module (validation through
# planning, the shard writer itself), so Pillow's warnings are set here.
# Our own --max_pixels check replaces Pillow's warning; its hard error (at twice
# Image.MAX_IMAGE_PIXELS, which pillow_limit sets from --max_pixels) stays as a second line of defence.
warnings.simplefilter('ignore', Image.DecompressionBombWarning)
# Pillow also warns, once per worker on the user's console, about damaged metadata
# of images it still decodes (a TIFF tag or Exif block past the end of the file).
# The decoders decide what becomes of each image; the warning only adds chatter.
warnings.filterwarnings('ignore', category=UserWarning, module='PIL')

# Modes PNG stores as they are.
_PNG_MODES = {'1', 'L', 'I;16', 'LA', 'P', 'RGB', 'RGBA'}
# Modes converted before PNG encoding; colour-space conversions are the only
# unavoidable loss, for sources (CMYK TIFF, LAB) that PNG cannot represent.
_PNG_CONVERSIONS = {
    'PA': 'RGBA', 'RGBa': 'RGBA', 'La': 'LA', 'RGBX': 'RGB', 'CMYK': 'RGB',
    'YCbCr': 'RGB', 'LAB': 'RGB', 'HSV': 'RGB',
    'I;16L': 'I;16', 'I;16B': 'I;16', 'I;16N': 'I;16',
}
# What modes are resized in (Pillow's Lanczos filter needs one of these), by stored mode.
_RESIZE_MODES = {'1': 'L', 'P': 'RGBA', 'I;16': 'I'}


def reencode_again(data: bytes, stored: StoredImages) -> PendingImage:
  """The bytes prepare_image re-encoded ``data`` into, made again (the encoding is
  deterministic), with the source's (upright) height and width and the orientation
  applied; for the shard writer.

  Pillow runs (TensorFlow only for a PNG that Pillow refuses): TensorFlow checked
  these very bytes during validation, and the writer compares their hash with the
  one validation recorded.
  """
  with Image.open(io.BytesIO(data)) as image:
    source_format = image.format or 'unknown'
    return reencode(loaded(image, data) if source_format == 'PNG' else image, source_format, stored, data)


def check_stored(data: bytes, stored_format: str, height: int, width: int) -> None:
  """Raises Rejected unless ``data`` decodes to ``height`` x ``width`` with TensorFlow's
  decode_image and decode_jpeg and with Pillow: what validation makes sure of the bytes
  it stores, for bytes made again (the shard writer's re-encoding).

  Args:
    data: the bytes made again, whose hash is not the one validation recorded.
    stored_format: the format the record stores (jpeg or png), for the rejection's detail.
    height: the stored image's height as validation recorded it.
    width: the stored image's width as validation recorded it.
  """
  with native_output.captured(exclusive=True):  # what libjpeg or libpng print stays off the console
    try:
      sizes = {tuple(tf.io.decode_image(data, channels=0, expand_animations=False).shape[:2]),
               tuple(tf.io.decode_jpeg(data, channels=0).shape[:2])}
      with Image.open(io.BytesIO(data)) as image:
        image.load()
        sizes.add(image.size[::-1])
    except Exception as e:  # pylint: disable=broad-except  # TensorFlow's and Pillow's errors alike
      raise Rejected(rejections.CORRUPT, f'its {stored_format} re-encoding, made again, does not decode: '
                     f'{decoder_messages.first_line(e)}') from None
  if sizes != {(height, width)}:
    raise Rejected(rejections.CORRUPT, f'its {stored_format} re-encoding, made again, decodes to '
                   f'{sorted(sizes)} (height, width), not to the {height}x{width} validated')


class NotDecoded(Exception):
  """Pillow could not decode an image's data: its decoders raise OSError, SyntaxError,
  ValueError, EOFError... Only these are the image's fault; any other exception while
  an image is prepared is ours, for the isolation boundary to report as such."""

  def __init__(self, error: BaseException):
    super().__init__(str(error))
    self.error = error


def loaded(png: Image.Image, data: bytes) -> Image.Image:
  """The opened PNG ``png``, loaded, if Pillow loads it; else its pixels as TensorFlow decodes
  them (_decoded_by_tensorflow), to be stored re-encoded."""
  try:
    _decode(png)
    return png
  except NotDecoded:  # an animated PNG with frame errors, say
    return _decoded_by_tensorflow(data, 'PNG')


def reencode(image: Image.Image, source_format: str, stored: StoredImages, data: Optional[bytes] = None
             ) -> PendingImage:
  """The first frame of ``image`` (the frame TensorFlow would return), downscaled to
  ``stored.max_side`` if it is longer, and encoded as the format ``stored`` asks for:
  the source's own if it keeps JPEG or PNG sources, else PNG, or JPEG for ``jpeg``.

  Args:
    image: the file as Pillow opened it.
    source_format: its format as Pillow names it (WEBP, TIFF, ...).
    stored: how the bytes a record stores are chosen.
    data: the file's bytes, which let a simple WebP stored as PNG be decoded by TensorFlow (_simple_webp); None: Pillow
      decodes every image.
  """
  isolation.fault_point(isolation.REENCODE)
  target = stored_images.stored_format(source_format, stored.format)
  source_size = image.size
  size = stored_images.downscaled_size(image.size, stored.max_side)
  if size != image.size and image.format in ('JPEG', 'MPO'):
    image.draft(None, (2 * size[0], 2 * size[1]))  # DCT scaling: a fast, clean first reduction
  samples = _simple_webp(image, data) if target == 'png' and size == image.size else None
  if samples is None:
    _decode(image)
  opened = image
  # Read once decoded: Pillow would load a PNG just to look for its Exif chunk.
  orientation = exif_orientation.pillow_orientation(image)
  orientation = orientation if exif_orientation.turns(orientation, stored) else 1
  original_width, original_height = source_size if orientation < 5 else source_size[::-1]  # upright
  icc_profile = image.info.get('icc_profile')  # the source's own, before any conversion
  if orientation != 1:
    image = image.transpose(exif_orientation.TRANSPOSES[orientation])
    size = size if orientation < 5 else size[::-1]
  image = _rgb_on_white(image, source_format) if target == 'jpeg' else _png_mode(image, source_format)
  if size != image.size:
    isolation.fault_point(isolation.RESIZE)
    mode = image.mode
    image = image.convert(_RESIZE_MODES.get(mode, mode)).resize(size, Image.LANCZOS)
    image = image if image.mode == mode else _png_mode(image, source_format)
  width, height = image.size
  samples = samples if image is opened else None  # a turn or conversion made new samples
  return PendingImage(_encoded(image, target, stored.jpeg_quality, icc_profile, samples), target, height, width,
                      source_format, reencoded=True, original_height=original_height, original_width=original_width,
                      orientation=orientation)


def _decode(image: Image.Image) -> None:
  """Pillow decodes the first frame of ``image``; NotDecoded if it cannot."""
  try:
    image.seek(0)
    image.load()
  except Image.DecompressionBombError:
    raise
  except Exception as e:  # pylint: disable=broad-except  # see NotDecoded
    raise NotDecoded(e) from None


def _simple_webp(image: Image.Image, data: Optional[bytes]) -> Optional[np.ndarray]:
  """The samples of ``image``, as TensorFlow's libwebp decodes them, if it is a simple WebP: one
  still image, lossy or lossless, with no alpha and no metadata (its first chunk VP8 or VP8L,
  what cwebp and most servers write). None for any other, and for one TensorFlow fails, which
  Pillow then decodes or explains. Pillow decodes every WebP through libwebp's animation
  decoder and copies its frame twice, in two to four times TensorFlow's time for the same
  samples (tests/core/images/test_reencoding.py compares them); TensorFlow is not given an
  extended WebP (VP8X), whose animation its decoder mishandles (image_cases' damaged-frame.webp)."""
  if data is None or image.format != 'WEBP' or image.mode != 'RGB' or data[12:16] not in (b'VP8 ', b'VP8L'):
    return None
  try:
    samples = tf.io.decode_image(data, channels=3, expand_animations=False).numpy()
  except tf.errors.OpError:
    return None
  return samples if samples.shape[:2] == (image.height, image.width) else None


def _decoded_by_tensorflow(data: bytes, source_format: str) -> Image.Image:
  """The PNG ``data`` as libpng in TensorFlow decodes it (its default image), as a Pillow
  image to re-encode: for a PNG that Pillow refuses, such as an animated PNG with
  frame sequence errors, whose first frame every other reader shows. 16-bit colour
  keeps its high byte, as Pillow reads such PNGs."""
  sixteen = data[24] == 16  # the IHDR chunk's bit depth
  try:
    pixels = tf.io.decode_png(data, channels=0, dtype=tf.uint16 if sixteen else tf.uint8).numpy()
  except tf.errors.OpError as e:
    raise Rejected(rejections.CORRUPT, f'{source_format} data decodes neither in Pillow nor in TensorFlow: '
                   f'{decoder_messages.tensorflow_message(e)}') from None
  if pixels.shape[2] == 1:
    return Image.fromarray(pixels[:, :, 0])  # L, or I;16
  return Image.fromarray((pixels >> 8).astype(np.uint8) if sixteen else pixels)


# The colour space (ICC header bytes 16-20) a profile must describe to apply to a stored mode.
_ICC_SPACES = {'RGB': b'RGB ', 'RGBA': b'RGB ', 'P': b'RGB ', 'L': b'GRAY', 'LA': b'GRAY', '1': b'GRAY',
               'I;16': b'GRAY'}


def _encoded(image: Image.Image, target: str, jpeg_quality: int, icc_profile: Optional[bytes],
             samples: Optional[np.ndarray] = None) -> bytes:
  """``image`` encoded as ``target``, the same bytes in any process at any time.

  Nothing but the pixels, their transparency and the source's own ICC profile
  (where it describes the stored colour space) is written: Pillow would otherwise
  write what conversions leave in ``image.info``, such as the sRGB profile that
  LittleCMS creates, stamped with the current time, when it converts L*a*b* to RGB,
  or a CMYK profile on the RGB pixels converted from CMYK.

  Args:
    image: the pixels to store, in a mode ``target`` holds.
    target: the stored format: jpeg or png.
    jpeg_quality: the JPEG encoder's quality (--jpeg_quality); a PNG is lossless and ignores it.
    icc_profile: the source's own ICC profile, if it has one; left out unless it describes ``image``'s colour space.
    samples: ``image``'s samples decoded already (_simple_webp), if they were; None: ``image`` holds them.
  """
  if icc_profile and icc_profile[16:20] != _ICC_SPACES.get(image.mode):
    icc_profile = None
  image.info = {key: value for key, value in image.info.items() if key == 'transparency'}
  if target == 'png' and png_encoding.encodes(image):
    return png_encoding.encoded(image, icc_profile, samples)
  buffer = io.BytesIO()
  if target == 'jpeg':
    image.save(buffer, 'JPEG', quality=jpeg_quality, icc_profile=icc_profile)
  else:  # a palette, 1-bit pixels or a transparent colour
    image.save(buffer, 'PNG', icc_profile=icc_profile, compress_level=png_encoding.LEVEL)
  return buffer.getvalue()


def _png_mode(image: Image.Image, source_format: str) -> Image.Image:
  """``image`` in a mode PNG stores, converted without loss where PNG allows."""
  if image.mode in _PNG_CONVERSIONS:
    return image.convert(_PNG_CONVERSIONS[image.mode])
  if image.mode == 'I':
    _check_16_bit_range(image, source_format)
    return image.convert('I;16')
  if image.mode not in _PNG_MODES:
    raise Rejected(rejections.UNSUPPORTED_PIXELS,
                   f'{source_format} pixel mode {image.mode} cannot be stored losslessly as PNG')
  return image


def _rgb_on_white(image: Image.Image, source_format: str) -> Image.Image:
  """``image`` as 8-bit RGB for JPEG: transparency composited on white, 16-bit samples scaled."""
  if image.mode in ('I;16', 'I;16L', 'I;16B', 'I;16N', 'I'):
    _check_16_bit_range(image, source_format)
    image = image.convert('I').point(lambda value: value / 257).convert('L')
  if image.mode == 'F':
    raise Rejected(rejections.UNSUPPORTED_PIXELS, f'{source_format} has floating-point pixels')
  if image.mode in ('RGBA', 'LA', 'PA', 'RGBa', 'La') or (image.mode == 'P' and 'transparency' in image.info):
    rgba = image.convert('RGBA')
    white = Image.new('RGBA', rgba.size, (255, 255, 255, 255))
    return Image.alpha_composite(white, rgba).convert('RGB')
  return image.convert('RGB')


def _check_16_bit_range(image: Image.Image, source_format: str) -> None:
  """32-bit integer pixels must fit in 16 bits: PNG stores no more, and JPEG's 8 are scaled from 16."""
  if image.mode == 'I':
    low, high = image.getextrema()
    if low < 0 or high > 0xFFFF:
      raise Rejected(rejections.UNSUPPORTED_PIXELS,
                     f'{source_format} has 32-bit integer pixels ({low}..{high}) that 16 bits cannot hold')
