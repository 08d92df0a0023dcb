"""What records store under --image_format and --max_side: bytes every reader decodes."""
import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from beam_pipeline.core.images import preparation, stored_images
from beam_pipeline.core.rejections import Rejected
from beam_pipeline.core.settings import IMAGE_FORMATS, StoredImages

from helpers import photos
from helpers.image_cases import cases

WRITTEN = [case for case in cases().values() if case.reason is None]
KEPT = {'original': ('jpeg', 'png'), 'jpeg': ('jpeg',), 'png': ('png',)}


def test_every_image_format_is_known_to_the_encoder():
  assert tuple(stored_images.KEPT) == IMAGE_FORMATS


@pytest.mark.parametrize('image_format', IMAGE_FORMATS)
@pytest.mark.parametrize('case', WRITTEN, ids=lambda c: c.name)
def test_every_stored_image_decodes_in_every_reader_to_its_recorded_size(case, image_format):
  """decode_image and Pillow for every format; decode_jpeg too, which reads JPEG, PNG and
  GIF but not BMP or WebP, for the default and jpeg (the seeds' reader)."""
  prepared = preparation.prepare_image(case.data, 10**8, StoredImages(image_format))
  info = prepared.info
  source = {'JPEG': 'jpeg', 'MPO': 'jpeg', 'PNG': 'png'}.get(info.source_format)
  assert info.format == (source if source in KEPT[image_format] else 'jpeg' if image_format == 'jpeg' else 'png')
  kept = source in KEPT[image_format] and not case.reencoded  # an APNG is re-encoded as a still PNG
  assert (prepared.stored == case.data) == kept != info.reencoded
  assert tf.io.decode_image(prepared.stored, channels=3, expand_animations=False).shape == (info.height, info.width, 3)
  if image_format != 'png':
    assert tf.io.decode_jpeg(prepared.stored, channels=3).shape == (info.height, info.width, 3)
  with Image.open(io.BytesIO(prepared.stored)) as image:
    assert image.size == (info.width, info.height)
    image.load()
  assert (info.original_height, info.original_width) == (info.height, info.width)


def test_jpeg_composites_transparency_on_white_and_png_keeps_it():
  transparent = Image.new('RGBA', (40, 30), (200, 0, 0, 0))
  transparent.paste((0, 0, 200, 255), (0, 0, 20, 30))
  data = photos.encode(transparent, 'PNG')
  stored = preparation.prepare_image(data, 10**8, StoredImages('jpeg')).stored
  with Image.open(io.BytesIO(stored)) as image:
    assert image.mode == 'RGB'
    left, right = image.getpixel((5, 15)), image.getpixel((35, 15))
  assert left[2] > 150 and left[0] < 60 and min(right) > 240  # blue stays, the clear half turns white
  assert preparation.prepare_image(data, 10**8, StoredImages('png')).stored == data


@pytest.mark.parametrize('image_format', IMAGE_FORMATS)
@pytest.mark.parametrize('size', [(640, 480), (481, 1000), (3000, 7), (100, 80)])
def test_max_side_downscales_keeping_the_aspect_ratio_and_never_enlarges(size, image_format):
  stored = StoredImages(image_format, max_side=200)
  picture = photos.image(4, *size)
  for source in (photos.encode(picture, 'JPEG', quality=92), photos.encode(picture, 'PNG')):
    prepared = preparation.prepare_image(source, 10**8, stored)
    info = prepared.info
    assert (info.original_width, info.original_height) == size
    if max(size) <= 200:
      assert (info.width, info.height) == size
      assert (prepared.stored == source) == (not info.reencoded)
      continue
    assert max(info.width, info.height) == 200 and info.reencoded
    assert abs(info.width * size[1] / size[0] - info.height) <= 1  # the aspect ratio, within one pixel
    assert tf.io.decode_image(prepared.stored, channels=3, expand_animations=False).shape == (info.height,
                                                                                              info.width, 3)


def test_a_jpeg_downscaled_through_dct_scaling_looks_as_a_full_decode_downscaled_would():
  """Against the source fully decoded and Lanczos-downscaled: the stored JPEG (DCT scaling
  first) is as close as that same picture stored as JPEG at the same quality."""
  source = photos.encode(photos.image(9, 2400, 1800), 'JPEG', quality=92)
  stored = preparation.prepare_image(source, 10**8, StoredImages('jpeg', jpeg_quality=95, max_side=300)).stored
  with Image.open(io.BytesIO(source)) as image:
    downscaled = image.convert('RGB').resize((300, 225), Image.LANCZOS)
  reference = np.asarray(downscaled, dtype=np.float32)

  def psnr(data: bytes) -> float:
    with Image.open(io.BytesIO(data)) as image:
      return 10 * np.log10(255**2 / np.mean((np.asarray(image.convert('RGB'), dtype=np.float32) - reference)**2))

  full_path = psnr(photos.encode(downscaled, 'JPEG', quality=95))
  assert psnr(stored) > full_path - 0.5 and full_path > 30, (psnr(stored), full_path)


def test_re_encoding_is_deterministic():
  stored = StoredImages('jpeg', jpeg_quality=90, max_side=64)
  for case in WRITTEN:
    first = preparation.prepare_image(case.data, 10**8, stored)
    assert preparation.prepare_image(case.data, 10**8, stored) == first, case.name


@pytest.mark.parametrize('image_format', IMAGE_FORMATS)
def test_32_bit_integer_pixels_are_stored_if_they_fit_16_bits_and_refused_if_not(image_format):
  def tiff(high):
    return photos.encode(Image.fromarray(np.array([[0, high] * 4] * 6, np.int32), 'I'), 'TIFF')

  assert preparation.prepare_image(tiff(60000), 10**8, StoredImages(image_format)).info.reencoded
  with pytest.raises(Rejected) as raised:
    preparation.prepare_image(tiff(70000), 10**8, StoredImages(image_format))
  assert raised.value.reason == 'unsupported_pixels' and '(0..70000)' in raised.value.detail
