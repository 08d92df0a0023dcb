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
from typing import Dict, List, Sequence, Union

import tensorflow as tf
from PIL import Image, UnidentifiedImageError

from beam_pipeline.core import decoder_messages, exif_orientation, isolation, jpeg_segments, native_output, png_chunks
from beam_pipeline.core import reencoding, rejections, stored_images, tensorflow_decoding
from beam_pipeline.core.image_info import PendingImage, PreparedImage
from beam_pipeline.core.rejections import Rejected
from beam_pipeline.core.settings import StoredImages

def prepare_image(data: bytes, max_pixels: int, stored: StoredImages = StoredImages()) -> PreparedImage:
  """Fully validates ``data`` and returns the bytes a record should store.

  Raises:
    Rejected: with a short reason code for anything that must not be written.
  """
  result, = prepare_images([data], max_pixels, stored)
  if isinstance(result, Rejected):
    raise result
  return result


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
      return reencoding.reencode(image, prepared.info.source_format, stored)._replace(damage=prepared.info.damage)
  except Rejected as e:
    return e.with_traceback(None)
  except reencoding.NotDecoded as e:
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
    except reencoding.NotDecoded as e:
      message = decoder_messages.first_line(e.error)
      if 'truncated' in message or isinstance(e.error, EOFError):
        return Rejected(rejections.TRUNCATED, f'{image.format} data ends early: {message}')
      return Rejected(rejections.CORRUPT, f'{image.format} data does not decode: {message}')


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
      loaded = reencoding.loaded(image, data)
      if loaded is not image:
        return reencoding.reencode(loaded, source_format, stored)
    # Pillow loads the whole PNG to look for an Exif chunk after the pixels: only if it has one.
    turns = png_chunks.EXIF_CHUNK in data and exif_orientation.turns(exif_orientation.pillow_orientation(image), stored)
    if 'png' in stored_images.KEPT[stored.format] and not 0 < stored.max_side < max(width, height) and not turns:
      return PendingImage(data, 'png', height, width, source_format)
  # Re-encoded at once: only what is stored must pass TensorFlow. A JPEG source must
  # pass too, as it is (above): its damage, which Pillow would silently fill in, rejects it.
  return reencoding.reencode(image, source_format, stored)


def _describe(data: bytes) -> str:
  head = data[:256].lstrip().lower()
  if head.startswith((b'<!doctype html', b'<html')):
    return 'looks like an HTML page'
  if head.startswith((b'<?xml', b'<svg')):
    return 'looks like XML/SVG, which is not decoded'
  return f'{len(data)} bytes starting {data[:8].hex()}'
