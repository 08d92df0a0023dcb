"""One image's plan: everything about it short of TensorFlow's decode.

A plan is the PendingImage that TensorFlow is to decode, or the Rejected that ends
the image here; preparation gathers the plans of many images for one decode.
"""
import io
from typing import Union

from PIL import Image, UnidentifiedImageError

from beam_pipeline.core import isolation
from beam_pipeline.core.images import decoder_messages, exif_orientation, pillow_limit
from beam_pipeline.core.images.formats import jpeg_segments, png_chunks
from beam_pipeline.core import rejections
from beam_pipeline.core.images import reencoding, stored_images
from beam_pipeline.core.images.image_info import PendingImage
from beam_pipeline.core.rejections import Rejected
from beam_pipeline.core.settings import StoredImages


def plan(data: bytes, max_pixels: int, stored: StoredImages, quick: bool = True) -> Union[Rejected, PendingImage]:
  """Everything short of TensorFlow's decode: real format, size limits, byte checks, re-encoding.

  A JPEG, nearly all of a photo collection, is ``quick``: TensorFlow reads its
  header and decodes it in one go, and Pillow's header parser (the larger part of
  this step's cost) runs only if that fails, to say why.

  Args:
    data: the file's bytes.
    max_pixels: the most pixels an image may have (--max_pixels): a larger one is rejected before it is decoded.
    stored: how the bytes a record stores are chosen: which sources are kept as they are, how others are re-encoded.
    quick: whether a JPEG that needs no Exif turn may go to TensorFlow unread by Pillow; False to read it again
      after TensorFlow failed it, to say why.
  """
  isolation.fault_point(isolation.VALIDATE)
  if not data:
    return Rejected(rejections.EMPTY, 'file is empty (0 bytes)')
  if data[:2] == b'\xff\xd8' and jpeg_segments.too_many_exif_segments(data):
    # Pillow joins Exif segments quadratically: a crafted file costs minutes of CPU.
    return Rejected(rejections.CORRUPT, f'JPEG has more than {jpeg_segments.MAX_EXIF_SEGMENTS} Exif segments')
  if quick and data[:3] == b'\xff\xd8\xff':
    orientation = exif_orientation.jpeg_orientation(data)
    if not exif_orientation.turns(orientation, stored):
      # Its orientation still to apply (--exif_orientation=ignore) turns its perceptual hash upright.
      return PendingImage(data, 'jpeg', 0, 0, 'JPEG', quick=True, orientation=orientation)
  try:
    image = Image.open(io.BytesIO(data))
  except UnidentifiedImageError:
    return Rejected(rejections.NOT_IMAGE, f'not a recognised image format ({_describe(data)})')
  except Image.DecompressionBombError as e:
    return Rejected(rejections.TOO_MANY_PIXELS, pillow_limit.refusal(e, max_pixels))
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
      return Rejected(rejections.TOO_MANY_PIXELS, pillow_limit.refusal(e, max_pixels))
    except reencoding.NotDecoded as e:
      message = decoder_messages.first_line(e.error)
      if 'truncated' in message or isinstance(e.error, EOFError):
        return Rejected(rejections.TRUNCATED, f'{image.format} data ends early: {message}')
      return Rejected(rejections.CORRUPT, f'{image.format} data does not decode: {message}')


def _plan_opened(image: Image.Image, data: bytes, max_pixels: int, stored: StoredImages) -> PendingImage:
  """A JPEG source as it is, for TensorFlow to check (prepare_images re-encodes it after,
  if ``stored`` says so), and a PNG one that ``stored`` keeps; anything else re-encoded.

  Args:
    image: the file as Pillow opened it: its header read, its pixels not yet decoded.
    data: the file's bytes, which a source kept as it is stores.
    max_pixels: the most pixels an image may have (--max_pixels).
    stored: how the bytes a record stores are chosen: which sources are kept as they are, how others are re-encoded.
  """
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
    walked = png_chunks.verify(data)
    if walked.parsed_by_load:
      loaded = reencoding.loaded(image, data)
      # An APNG is stored as a still PNG of its default image, the frame TensorFlow decodes:
      # kept as it is, its frames' chunks stop stricter decoders (NVIDIA DALI's).
      if loaded is not image or walked.animated:
        return reencoding.reencode(loaded, source_format, stored)
    # Pillow loads the whole PNG to look for an Exif chunk after the pixels: only if it has one.
    orientation = exif_orientation.pillow_orientation(image) if png_chunks.EXIF_CHUNK in data else 1
    if ('png' in stored_images.KEPT[stored.format] and not 0 < stored.max_side < max(width, height) and
        not exif_orientation.turns(orientation, stored)):
      return PendingImage(data, 'png', height, width, source_format, orientation=orientation)
  # Re-encoded at once: only what is stored must pass TensorFlow. A JPEG source must
  # pass too, as it is (above): its damage, which Pillow would silently fill in, rejects it.
  return reencoding.reencode(image, source_format, stored, data)


# Kinds of file told by their first bytes, for the errors file: which kind, never the bytes.
_KINDS = ((b'%PDF', 'a PDF document'), (b'PK\x03\x04', 'a ZIP archive'), (b'\x1f\x8b', 'gzip data'),
          (b'\xd0\xcf\x11\xe0', 'an OLE compound file (Thumbs.db, an Office document)'),
          (b'\x7fELF', 'an ELF executable'))


def _describe(data: bytes) -> str:
  """What a file that is no image seems to be: its length and a guess at its kind. Never its
  bytes, which the errors file would then hold: a manifest may name any file the process can
  read (/etc/passwd, /proc/self/environ), and whoever reads the errors file may not."""
  head = data[:256].lstrip().lower()
  if head.startswith((b'<!doctype html', b'<html')):
    return 'looks like an HTML page'
  if head.startswith((b'<?xml', b'<svg')):
    return 'looks like XML/SVG, which is not decoded'
  kind = next((name for magic, name in _KINDS if data.startswith(magic)), None)
  if kind is None:
    kind = 'text' if _is_text(data[:4096]) else 'binary data'
  return f'{len(data)} bytes of {kind}'


def _is_text(head: bytes) -> bool:
  """Whether ``head`` reads as UTF-8 text without control characters other than white space (a
  file cut inside a character still counts)."""
  text = head.decode('utf-8', 'ignore')
  return len(text.encode('utf-8')) >= len(head) - 3 and all(
      char.isprintable() or char in '\t\n\r\f\v' for char in text)
