"""One picture for every reader: Exif orientation applied to the stored pixels by default.

TensorFlow ignores the tag, while DALI and Pillow's exif_transpose apply it; stored
upright and without it, both give the picture the recorded height and width describe.
"""
import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image, ImageOps

from beam_pipeline.core.images import exif_orientation, preparation, reencoding
from beam_pipeline.core.settings import StoredImages

MAX_PIXELS = 10**8


def _picture(width: int = 48, height: int = 30) -> Image.Image:
  """Four flat quadrants of different colours: any turn or mirror shows."""
  pixels = np.zeros((height, width, 3), np.uint8)
  pixels[:height // 2, :width // 2] = (230, 30, 30)
  pixels[:height // 2, width // 2:] = (30, 230, 30)
  pixels[height // 2:, :width // 2] = (30, 30, 230)
  pixels[height // 2:, width // 2:] = (230, 230, 30)
  return Image.fromarray(pixels)


def _tagged(orientation: int, image_format: str = 'JPEG', picture: Image.Image = None) -> bytes:
  exif = Image.Exif()
  exif[0x0112] = orientation
  buffer = io.BytesIO()
  (picture or _picture()).save(buffer, image_format, exif=exif.tobytes(),
                               **({'quality': 95} if image_format == 'JPEG' else {}))
  return buffer.getvalue()


def _upright(data: bytes) -> np.ndarray:
  with Image.open(io.BytesIO(data)) as image:
    return np.asarray(ImageOps.exif_transpose(image).convert('RGB')).astype(int)


def _tensorflow(data: bytes) -> np.ndarray:
  return tf.io.decode_image(data, channels=3, expand_animations=False).numpy().astype(int)


@pytest.mark.parametrize('orientation', range(1, 9))
def test_a_jpeg_is_stored_upright_and_every_decoder_sees_the_recorded_size(orientation):
  source = _tagged(orientation)
  prepared = preparation.prepare_image(source, MAX_PIXELS)
  info, stored = prepared.info, prepared.stored
  upright = _upright(source)
  assert (info.height, info.width) == upright.shape[:2] == (_tensorflow(stored).shape[:2])
  assert (info.original_height, info.original_width) == upright.shape[:2]
  # The tag is gone: one picture for all (Pillow's and TensorFlow's libjpeg builds differ in
  # their last bits; a turn or mirror of the quadrants would differ by 200).
  assert np.abs(_upright(stored) - _tensorflow(stored)).max() <= 8
  assert np.abs(_tensorflow(stored) - upright).mean() < 6  # re-encoded at --jpeg_quality; turned wrong: ~100
  assert info.reencoded == (orientation != 1) and (stored == source) == (orientation == 1)
  assert info.orientation == orientation
  again = reencoding.reencode_again(source, StoredImages()) if orientation != 1 else None
  assert again is None or (again.stored, again.orientation) == (stored, orientation)


@pytest.mark.parametrize('image_format', ['PNG', 'WEBP'])
@pytest.mark.parametrize('orientation', [3, 6, 7])
def test_png_and_webp_sources_are_turned_losslessly(image_format, orientation):
  source = _tagged(orientation, image_format)
  prepared = preparation.prepare_image(source, MAX_PIXELS)
  assert prepared.info.format == 'png' and prepared.info.reencoded
  assert np.array_equal(_tensorflow(prepared.stored), _upright(source))
  assert np.array_equal(_upright(prepared.stored), _upright(source))


def test_downscaled_and_turned_at_once():
  source = _tagged(6, picture=_picture(400, 100))
  prepared = preparation.prepare_image(source, MAX_PIXELS, StoredImages(max_side=40))
  info = prepared.info
  assert (info.height, info.width, info.original_height, info.original_width) == (40, 10, 400, 100)
  assert _tensorflow(prepared.stored).shape[:2] == (40, 10)


@pytest.mark.parametrize('orientation', [1, 6, 8])
def test_ignore_keeps_the_bytes_as_they_are(orientation):
  for image_format in ('JPEG', 'PNG'):
    source = _tagged(orientation, image_format)
    prepared = preparation.prepare_image(source, MAX_PIXELS, StoredImages(exif_orientation='ignore'))
    assert prepared.stored == source and not prepared.info.reencoded
    assert (prepared.info.height, prepared.info.width) == (30, 48)


def test_the_quick_path_reads_the_tag_pillow_reads():
  """Big- and little-endian Exif, other tags before the orientation, and Exif that is no Exif."""
  for orientation in range(1, 9):
    exif = Image.Exif()
    exif[0x010F] = 'Camera maker'
    exif[0x0112] = orientation
    for endian in ('<', '>'):
      exif.endian = endian
      buffer = io.BytesIO()
      _picture().save(buffer, 'JPEG', exif=exif.tobytes())
      assert exif_orientation.jpeg_orientation(buffer.getvalue()) == orientation
  broken = _tagged(6).replace(b'Exif\x00\x00MM', b'Exif\x00\x00XX').replace(b'Exif\x00\x00II', b'Exif\x00\x00XX')
  assert exif_orientation.jpeg_orientation(broken) == 1
