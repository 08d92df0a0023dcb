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
after the pixels); one it refuses is stored as libpng decodes it, and an animated one
as a still PNG of its default image.

Here a batch of images runs through those steps: image_plans plans each one,
tensorflow_decoding decodes the plans, and reencoding makes the bytes that
stored_images' policy does not keep as they are.
"""
import collections
import io
from typing import Dict, List, Sequence, Union

import tensorflow as tf
from PIL import Image

from beam_pipeline.core.console import native_output
from beam_pipeline.core.images import decoder_messages, exif_orientation, image_plans, pillow_limit, reencoding
from beam_pipeline.core import rejections
from beam_pipeline.core.images import stored_images, tensorflow_decoding
from beam_pipeline.core.images.image_info import PendingImage, PreparedImage
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

  Everything short of TensorFlow's decode (image_plans.plan) comes first; then the
  planned images go to TensorFlow in one call that decodes on every core (eager calls
  from Python threads do not run in parallel). The few it fails are looked at again one
  by one, by Pillow and an eager decode, to say why: what the decoders wrote to
  standard error then goes into the rejection's detail (native_output). If libjpeg
  warned of an image the call decoded (_warned_on_success), each decoded JPEG is
  decoded again alone to learn which are damaged. Sources that TensorFlow read and
  that ``stored`` changes (a JPEG to downscale, say) are re-encoded then, and their
  new bytes decoded by TensorFlow in a second call.
  """
  pillow_limit.set_for(max_pixels)
  # Exclusive: what libjpeg writes while one batch decodes must be that batch's, even
  # with other threads of this process validating (an SDK worker's).
  with native_output.captured(exclusive=True) as decoders:
    results = [image_plans.plan(data, max_pixels, stored) for data in datas]
    _check(results, max_pixels, stored, decoders)
    redone = {i: _reencoded(r, stored) for i, r in enumerate(results) if _to_reencode(r, stored)}
    for i, result in redone.items():
      results[i] = result
    _check(results, max_pixels, stored, decoders, only=redone)
  return results


def _check(results: List, max_pixels: int, stored: StoredImages, decoders: native_output.Capture,
           only=None) -> None:
  """TensorFlow decodes the PendingImage results, in place.

  Args:
    results: each image's plan so far: a PendingImage to decode, or what it became already.
    max_pixels: the most pixels an image may have (--max_pixels).
    stored: how the bytes a record stores are chosen, for a JPEG planned again to say why TensorFlow failed it.
    decoders: the capture of what the native decoders write to standard error: a failure's detail, a JPEG's damage.
    only: the indexes of the results to decode (the re-encoded ones); None: every PendingImage.
  """
  pending = [i for i, r in enumerate(results) if isinstance(r, PendingImage) and (only is None or i in only)]
  mark = decoders.mark()
  decoded = tensorflow_decoding.batch_decoded([results[i] for i in pending], max_pixels) if pending else {}
  warned = _warned_on_success([results[i] for i in pending], decoded, decoders.since(mark), max_pixels, decoders)
  for position, index in enumerate(pending):
    plan, image = results[index], decoded.get(position)
    result = None
    if image is not None:
      header = image.header
      if plan.quick:
        plan = plan._replace(height=header[0], width=header[1], original_height=header[0], original_width=header[1])
      if warned and plan.format == 'jpeg' and not plan.damage:
        plan = plan._replace(damage=tensorflow_decoding.jpeg_warnings(plan.stored, decoders))
      result = plan.checked(image.shape, image.phash, image.statistics, image.colour)
    if result is None or (plan.quick and isinstance(result, Rejected)):
      mark = decoders.mark()
      plan = image_plans.plan(plan.stored, max_pixels, stored, quick=False) if plan.quick else plan
      result = plan if isinstance(plan, Rejected) else tensorflow_decoding.checked_by_tensorflow(plan)
      said = decoder_messages.one_line(decoders.since(mark))
      if isinstance(result, Rejected) and said:
        result = Rejected(result.reason, f'{result.detail} (the decoder said: {said})')
      elif said and result.info.format == 'jpeg' and not result.info.damage:
        result = result._replace(info=result.info._replace(damage=said))
    if isinstance(result, PreparedImage) and result.info.damage and not result.info.reencoded:
      result = _loaded_by_pillow(result)
    results[index] = result


def _warned_on_success(pending: List[PendingImage], decoded: Dict, said: str, max_pixels: int,
                       decoders: native_output.Capture) -> bool:
  """Whether the decoders warned of an image the batch decoded, from what they printed: what
  the images that failed print, decoded alone as the batch decodes them, is set aside; they
  are few, and looked at one by one anyway. The rest, if any, is some decoded image's, and
  each decoded JPEG is then decoded alone (tensorflow_decoding.jpeg_warnings).

  Args:
    pending: the images the batch decoded, in the batch's order.
    decoded: what the batch's decode gave, by position in ``pending``; a position left out failed.
    said: what the decoders printed while the batch decoded.
    max_pixels: the most pixels an image may have (--max_pixels), for a failed image decoded alone as the batch did.
    decoders: the capture of the decoders' output, to learn what each failed image prints alone.
  """
  unexplained = collections.Counter(decoder_messages.lines(said))
  for position, plan in enumerate(pending):
    if not unexplained:
      break
    if position not in decoded:
      mark = decoders.mark()
      try:
        tensorflow_decoding.batch_decoded([plan], max_pixels)
      except tf.errors.OpError:
        pass
      unexplained -= collections.Counter(decoder_messages.lines(decoders.since(mark)))
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
