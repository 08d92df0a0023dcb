"""Decide whether image bytes become a record, and which bytes the record stores.

The contract is TensorFlow's reader: every stored image must decode with
``tf.io.decode_image(bytes, channels=3, expand_animations=False)`` to exactly the
recorded height and width, and with ``tf.io.decode_jpeg`` and Pillow too. So
TensorFlow itself decodes every stored image once here, and the record's shape is
what it decoded; Pillow identifies the real format, reads the header (rejecting
decompression bombs before any pixel is allocated), and re-encodes. A JPEG skips
Pillow unless TensorFlow fails it or it must be re-encoded: TensorFlow reads its
header (the same bomb check) and decodes it, and Pillow then only explains a
failure, or loads a JPEG that libjpeg warned about (its damage). Pillow loads a
kept PNG where its load() parses more than its open() did (an animation, chunks
after the pixels); one it refuses is stored as libpng decodes it. Which bytes
are stored is stored_images' policy.
"""
import collections
import io
import warnings
from typing import Dict, List, Optional, Sequence, Union

import numpy as np
import tensorflow as tf
from PIL import Image, UnidentifiedImageError

from beam_pipeline.core import decoder_messages, exif_orientation, isolation, jpeg_segments, native_output, png_chunks
from beam_pipeline.core import rejections, stored_images, tensorflow_decoding
from beam_pipeline.core.image_info import PendingImage, PreparedImage
from beam_pipeline.core.rejections import Rejected
from beam_pipeline.core.settings import StoredImages

# Our own --max_pixels check replaces Pillow's warning; its hard error (at twice
# Image.MAX_IMAGE_PIXELS) stays as a second line of defence.
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


def prepare_image(data: bytes, max_pixels: int, stored: StoredImages = StoredImages()) -> PreparedImage:
  """Fully validates ``data`` and returns the bytes a record should store.

  Raises:
    Rejected: with a short reason code for anything that must not be written.
  """
  result, = prepare_images([data], max_pixels, stored)
  if isinstance(result, Rejected):
    raise result
  return result


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
    return _reencode(_loaded(image, data) if source_format == 'PNG' else image, source_format, stored)


def check_stored(data: bytes, stored_format: str, height: int, width: int) -> None:
  """Raises Rejected unless ``data`` decodes to ``height`` x ``width`` with TensorFlow's
  decode_image and decode_jpeg and with Pillow: what validation makes sure of the bytes
  it stores, for bytes made again (the shard writer's re-encoding)."""
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


def prepare_images(datas: Sequence[bytes], max_pixels: int,
                   stored: StoredImages = StoredImages()) -> List[Union[PreparedImage, Rejected]]:
  """prepare_image for many images at once, each result a PreparedImage or a Rejected.

  Everything short of TensorFlow's decode (_plan) comes first; then the planned
  images go to TensorFlow in one call that decodes on every core (eager calls from
  Python threads do not run in parallel). The few it fails are looked at again one
  by one, by Pillow and an eager decode, to say why: what the decoders wrote to
  standard error then goes into the rejection's detail (native_output). If libjpeg
  warned of an image the call decoded (_warned_on_success), each decoded JPEG is
  decoded again alone to learn which are damaged. Sources that TensorFlow read and
  that ``stored`` changes (a JPEG to downscale, say) are re-encoded then, and their
  new bytes decoded by TensorFlow in a second call.
  """
  # Exclusive: what libjpeg writes while one batch decodes must be that batch's, even
  # with other threads of this process validating (an SDK worker's).
  with native_output.captured(exclusive=True) as decoders:
    results = [_plan(data, max_pixels, stored) for data in datas]
    _check(results, max_pixels, stored, decoders)
    redone = {i: _reencoded(r, stored) for i, r in enumerate(results) if _to_reencode(r, stored)}
    for i, result in redone.items():
      results[i] = result
    _check(results, max_pixels, stored, decoders, only=redone)
  return results


def _check(results: List, max_pixels: int, stored: StoredImages, decoders: native_output.Capture,
           only=None) -> None:
  """TensorFlow decodes the PendingImage results (of ``only``'s indexes, if given), in place."""
  pending = [i for i, r in enumerate(results) if isinstance(r, PendingImage) and (only is None or i in only)]
  mark = decoders.mark()
  decoded = tensorflow_decoding.batch_shapes([results[i] for i in pending], max_pixels) if pending else {}
  warned = _warned_on_success([results[i] for i in pending], decoded, decoders.since(mark), max_pixels, decoders)
  for position, index in enumerate(pending):
    plan, shapes = results[index], decoded.get(position)
    result = None
    if shapes is not None:
      header, shape = shapes
      if plan.quick:
        plan = plan._replace(height=header[0], width=header[1], original_height=header[0], original_width=header[1])
      if warned and plan.format == 'jpeg' and not plan.damage:
        plan = plan._replace(damage=tensorflow_decoding.jpeg_warnings(plan.stored, decoders))
      result = plan.checked(shape)
    if result is None or (plan.quick and isinstance(result, Rejected)):
      mark = decoders.mark()
      plan = _plan(plan.stored, max_pixels, stored, quick=False) if plan.quick else plan
      result = plan if isinstance(plan, Rejected) else tensorflow_decoding.checked_by_tensorflow(plan)
      said = decoders.since(mark)
      if isinstance(result, Rejected) and said:
        result = Rejected(result.reason, f'{result.detail} (the decoder said: {decoder_messages.one_line(said)})')
      elif said and result.info.format == 'jpeg' and not result.info.damage:
        result = result._replace(info=result.info._replace(damage=decoder_messages.one_line(said)))
    if isinstance(result, PreparedImage) and result.info.damage and not result.info.reencoded:
      result = _loaded_by_pillow(result)
    results[index] = result


def _warned_on_success(pending: List[PendingImage], decoded: Dict, said: str, max_pixels: int,
                       decoders: native_output.Capture) -> bool:
  """Whether the decoders warned of an image the batch decoded, from what they printed
  (``said``): what the images that failed print, decoded alone as the batch decodes them,
  is set aside; they are few, and looked at one by one anyway. The rest, if any, is
  some decoded image's, and each decoded JPEG is then decoded alone (tensorflow_decoding.jpeg_warnings)."""
  unexplained = collections.Counter(said.splitlines())
  for position, plan in enumerate(pending):
    if not unexplained:
      break
    if position not in decoded:
      mark = decoders.mark()
      try:
        tensorflow_decoding.batch_shapes([plan], max_pixels)
      except tf.errors.OpError:
        pass
      unexplained -= collections.Counter(decoders.since(mark).splitlines())
  return bool(unexplained)


def _loaded_by_pillow(prepared: PreparedImage) -> Union[PreparedImage, Rejected]:
  """``prepared`` if Pillow loads its stored bytes whole; for a damaged JPEG, which libjpeg in
  TensorFlow decodes only with warnings, and Pillow's handling of damage may differ."""
  try:
    with Image.open(io.BytesIO(prepared.stored)) as image:
      image.load()
  except Exception as e:  # pylint: disable=broad-except  # Pillow's decoders raise many types
    return Rejected(rejections.CORRUPT, f'{prepared.info.source_format} decodes in TensorFlow only with warnings '
                    f'({prepared.info.damage}), and not in Pillow: {decoder_messages.first_line(e)}')
  return prepared


def _to_reencode(result, stored: StoredImages) -> bool:
  """Whether a source TensorFlow read as it is must still be re-encoded for ``stored``."""
  if not isinstance(result, PreparedImage) or result.info.reencoded:
    return False
  info = result.info
  return (info.format not in stored_images.KEPT[stored.format] or
          0 < stored.max_side < max(info.height, info.width) or exif_orientation.turns(info.orientation, stored))


def _reencoded(prepared: PreparedImage, stored: StoredImages) -> Union[PendingImage, Rejected]:
  """A JPEG or PNG source, decoded by Pillow and re-encoded for ``stored``."""
  try:
    image = Image.open(io.BytesIO(prepared.stored))
  except Exception as e:  # pylint: disable=broad-except  # TensorFlow read it; Pillow may still refuse
    return _not_in_pillow(prepared, e)
  try:
    with image:
      return _reencode(image, prepared.info.source_format, stored)._replace(damage=prepared.info.damage)
  except Rejected as e:
    return e.with_traceback(None)
  except _NotDecoded as e:
    return _not_in_pillow(prepared, e.error)


def _not_in_pillow(prepared: PreparedImage, error: BaseException) -> Rejected:
  return Rejected(rejections.CORRUPT, f'{prepared.info.source_format} data does not decode in Pillow: '
                  f'{decoder_messages.first_line(error)}')


def _plan(data: bytes, max_pixels: int, stored: StoredImages, quick: bool = True) -> Union[Rejected, PendingImage]:
  """Everything short of TensorFlow's decode: real format, size limits, byte checks, re-encoding.

  A JPEG, nearly all of a photo collection, is ``quick``: TensorFlow reads its
  header and decodes it in one go, and Pillow's header parser (the larger part of
  this step's cost) runs only if that fails, to say why.
  """
  isolation.fault_point(isolation.VALIDATE)
  if not data:
    return Rejected(rejections.EMPTY, 'file is empty (0 bytes)')
  if data[:2] == b'\xff\xd8' and jpeg_segments.too_many_exif_segments(data):
    # Pillow joins Exif segments quadratically: a crafted file costs minutes of CPU.
    return Rejected(rejections.CORRUPT, f'JPEG has more than {jpeg_segments.MAX_EXIF_SEGMENTS} Exif segments')
  if (quick and data[:3] == b'\xff\xd8\xff' and
      not exif_orientation.turns(exif_orientation.jpeg_orientation(data), stored)):
    return PendingImage(data, 'jpeg', 0, 0, 'JPEG', quick=True)
  try:
    image = Image.open(io.BytesIO(data))
  except UnidentifiedImageError:
    return Rejected(rejections.NOT_IMAGE, f'not a recognised image format ({_describe(data)})')
  except Image.DecompressionBombError as e:
    return Rejected(rejections.TOO_MANY_PIXELS, str(e))
  except Exception as e:  # Pillow's header parsers raise many types on malformed data.
    return Rejected(rejections.CORRUPT, f'unreadable image header: {decoder_messages.first_line(e)}')
  with image:
    try:
      return _plan_opened(image, data, max_pixels, stored)
    except Rejected as e:
      # Kept as a value, so without its traceback: its frames lead back to the
      # caller's list of results, a cycle that would hold a whole chunk of image
      # bytes until the next full garbage collection.
      return e.with_traceback(None)
    except Image.DecompressionBombError as e:
      return Rejected(rejections.TOO_MANY_PIXELS, str(e))
    except _NotDecoded as e:
      message = decoder_messages.first_line(e.error)
      if 'truncated' in message or isinstance(e.error, EOFError):
        return Rejected(rejections.TRUNCATED, f'{image.format} data ends early: {message}')
      return Rejected(rejections.CORRUPT, f'{image.format} data does not decode: {message}')


class _NotDecoded(Exception):
  """Pillow could not decode an image's data: its decoders raise OSError, SyntaxError,
  ValueError, EOFError... Only these are the image's fault; any other exception while
  an image is prepared is ours, for the isolation boundary to report as such."""

  def __init__(self, error: BaseException):
    super().__init__(str(error))
    self.error = error


def _decode(image: Image.Image) -> None:
  """Pillow decodes the first frame of ``image``; _NotDecoded if it cannot."""
  try:
    image.seek(0)
    image.load()
  except Image.DecompressionBombError:
    raise
  except Exception as e:  # pylint: disable=broad-except  # see _NotDecoded
    raise _NotDecoded(e) from None


def _plan_opened(image: Image.Image, data: bytes, max_pixels: int, stored: StoredImages) -> PendingImage:
  """A JPEG source as it is, for TensorFlow to check (prepare_images re-encodes it after,
  if ``stored`` says so), and a PNG one that ``stored`` keeps; anything else re-encoded."""
  source_format = image.format or 'unknown'
  width, height = image.size
  if width < 1 or height < 1:
    raise Rejected(rejections.CORRUPT, f'{source_format} header gives an empty size {width}x{height}')
  if width * height > max_pixels:
    raise Rejected(rejections.TOO_MANY_PIXELS, f'{width}x{height} pixels exceeds --max_pixels={max_pixels}')

  if source_format in ('JPEG', 'MPO'):
    # libjpeg in TensorFlow must reach the end-of-image marker; Pillow stops at the
    # last scanline. Entropy-coded data never contains FF D9, so a search suffices.
    if data.find(b'\xff\xd9', data.find(b'\xff\xda')) < 0:
      raise Rejected(rejections.TRUNCATED, 'JPEG data ends before its end-of-image marker')
    return PendingImage(data, 'jpeg', height, width, source_format,
                        orientation=exif_orientation.pillow_orientation(image))
  if source_format == 'PNG':
    # For a precise reason (TensorFlow would fail these too); and Pillow must load what it
    # would not parse when it opened the file, which libpng may read where Pillow does not.
    if png_chunks.verify(data):
      loaded = _loaded(image, data)
      if loaded is not image:
        return _reencode(loaded, source_format, stored)
    # Pillow loads the whole PNG to look for an Exif chunk after the pixels: only if it has one.
    turns = png_chunks.EXIF_CHUNK in data and exif_orientation.turns(exif_orientation.pillow_orientation(image), stored)
    if 'png' in stored_images.KEPT[stored.format] and not 0 < stored.max_side < max(width, height) and not turns:
      return PendingImage(data, 'png', height, width, source_format)
  # Re-encoded at once: only what is stored must pass TensorFlow. A JPEG source must
  # pass too, as it is (above): its damage, which Pillow would silently fill in, rejects it.
  return _reencode(image, source_format, stored)


def _reencode(image: Image.Image, source_format: str, stored: StoredImages) -> PendingImage:
  """The first frame of ``image`` (the frame TensorFlow would return), downscaled to
  ``stored.max_side`` if it is longer, and encoded as the format ``stored`` asks for:
  the source's own if it keeps JPEG or PNG sources, else PNG, or JPEG for ``jpeg``."""
  isolation.fault_point(isolation.REENCODE)
  target = stored_images.stored_format(source_format, stored.format)
  source_size = image.size
  size = stored_images.downscaled_size(image.size, stored.max_side)
  if size != image.size and image.format in ('JPEG', 'MPO'):
    image.draft(None, (2 * size[0], 2 * size[1]))  # DCT scaling: a fast, clean first reduction
  _decode(image)
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
  return PendingImage(_encoded(image, target, stored.jpeg_quality, icc_profile), target, height, width, source_format,
                  reencoded=True, original_height=original_height, original_width=original_width,
                  orientation=orientation)


# The colour space (ICC header bytes 16-20) a profile must describe to apply to a stored mode.
_ICC_SPACES = {'RGB': b'RGB ', 'RGBA': b'RGB ', 'P': b'RGB ', 'L': b'GRAY', 'LA': b'GRAY', '1': b'GRAY',
               'I;16': b'GRAY'}


def _encoded(image: Image.Image, target: str, jpeg_quality: int, icc_profile: Optional[bytes]) -> bytes:
  """``image`` encoded as ``target``, the same bytes in any process at any time.

  Nothing but the pixels, their transparency and the source's own ICC profile
  (where it describes the stored colour space) is written: Pillow would otherwise
  write what conversions leave in ``image.info``, such as the sRGB profile that
  LittleCMS creates, stamped with the current time, when it converts L*a*b* to RGB,
  or a CMYK profile on the RGB pixels converted from CMYK.
  """
  if icc_profile and icc_profile[16:20] != _ICC_SPACES.get(image.mode):
    icc_profile = None
  image.info = {key: value for key, value in image.info.items() if key == 'transparency'}
  buffer = io.BytesIO()
  if target == 'jpeg':
    image.save(buffer, 'JPEG', quality=jpeg_quality, icc_profile=icc_profile)
  else:
    image.save(buffer, 'PNG', icc_profile=icc_profile)
  return buffer.getvalue()


def _loaded(png: Image.Image, data: bytes) -> Image.Image:
  """The opened PNG ``png``, loaded, if Pillow loads it; else its pixels as TensorFlow decodes
  them (_decoded_by_tensorflow), to be stored re-encoded."""
  try:
    _decode(png)
    return png
  except _NotDecoded:  # an animated PNG with frame errors, say
    return _decoded_by_tensorflow(data, 'PNG')


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


def _describe(data: bytes) -> str:
  head = data[:256].lstrip().lower()
  if head.startswith((b'<!doctype html', b'<html')):
    return 'looks like an HTML page'
  if head.startswith((b'<?xml', b'<svg')):
    return 'looks like XML/SVG, which is not decoded'
  return f'{len(data)} bytes starting {data[:8].hex()}'
