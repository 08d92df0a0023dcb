"""Every pixel mode Pillow opens, under every --image_format, with and without --max_side:
written or rejected, the same bytes at any time, and decodable by every reader.

Also a PNG that Pillow refuses, stored as libpng decodes it, and a simple WebP decoded by
TensorFlow into the bytes Pillow's decode gives.
"""
import io
import time

import pytest
import tensorflow as tf
from PIL import Image

from beam_pipeline.core.images import preparation, reencoding, stored_images
from beam_pipeline.core.rejections import Rejected
from beam_pipeline.core.settings import IMAGE_FORMATS, StoredImages
from beam_pipeline.synthetic import natural_photos

from helpers import pillow_modes
from helpers.decoders import assert_decodes_everywhere

MODES = pillow_modes.cases()
MAX_SIDE = 24


def prepared_table(stored: StoredImages):
  cases = list(MODES.values())
  return dict(zip((case.name for case in cases),
                  preparation.prepare_images([case.data for case in cases], 10**8, stored)))


@pytest.mark.parametrize('max_side', [0, MAX_SIDE])
@pytest.mark.parametrize('image_format', IMAGE_FORMATS)
def test_every_mode_is_stored_decodable_or_rejected_and_the_same_a_second_later(image_format, max_side):
  """Expected: float pixels and 32-bit integers past 16 bits rejected as unsupported_pixels, every
  other file stored in a format the choice allows, decodable by every reader to its recorded
  size (downscaled to MAX_SIDE when asked); and preparing the table again more than a second
  later (L*a*b* conversions stamped their ICC profile with the time) gives the same bytes."""
  stored = StoredImages(image_format, max_side=max_side)
  first = prepared_table(stored)
  time.sleep(1.1)
  again = prepared_table(stored)
  for name, case in MODES.items():
    result = first[name]
    if case.reason:
      assert isinstance(result, Rejected) and result.reason == case.reason, (name, result)
      continue
    assert not isinstance(result, Rejected), (name, result)
    assert result.info.format in stored_images.KEPT[image_format] or result.info.format == (
        'jpeg' if image_format == 'jpeg' else 'png'), name
    assert_decodes_everywhere(result)
    if max_side:
      assert max(result.info.height, result.info.width) == MAX_SIDE, name
    assert again[name].stored == result.stored, f'{name}: other bytes a second later'


def test_a_profile_is_kept_only_where_it_describes_the_stored_pixels():
  """The sRGB profile of an RGB TIFF goes with its PNG; an L*a*b* TIFF's pixels become RGB, so
  neither its own Lab profile nor the one Pillow's conversion makes up is stored."""
  table = prepared_table(StoredImages())
  with Image.open(io.BytesIO(table['srgb-profile.tiff'].stored)) as image:
    with Image.open(io.BytesIO(MODES['srgb-profile.tiff'].data)) as source:
      assert image.info.get('icc_profile') == source.info['icc_profile']
  for name in ('lab.tiff', 'lab-profile.tiff', 'cmyk.tiff'):
    with Image.open(io.BytesIO(table[name].stored)) as image:
      assert 'icc_profile' not in image.info, name


@pytest.mark.parametrize('name, error', [('broken-frames.png', 'APNG contains frame sequence errors'),
                                         ('text-after-pixels.png', 'Decompressed data too large')])
def test_a_png_that_pillow_refuses_is_stored_as_libpng_decodes_it(name, error):
  """An animated PNG with frame sequence errors, and text past the pixels that inflates past
  Pillow's limit: Pillow opens both and its load() raises, TensorFlow decodes them. Expected:
  stored re-encoded, a still PNG of exactly the pixels libpng decodes."""
  data = MODES[name].data
  with pytest.raises((SyntaxError, ValueError), match=error):
    with Image.open(io.BytesIO(data)) as image:
      image.load()
  prepared = preparation.prepare_image(data, 10**8)
  assert prepared.info.reencoded and prepared.info.format == 'png'
  assert_decodes_everywhere(prepared)
  assert (tf.io.decode_png(prepared.stored).numpy() == tf.io.decode_png(data).numpy()).all()
  assert reencoding.reencode_again(data, StoredImages())[0] == prepared.stored


def _webp(image: Image.Image, **options) -> bytes:
  buffer = io.BytesIO()
  image.save(buffer, 'WEBP', **options)
  return buffer.getvalue()


def _reencoded(data: bytes, with_data: bool) -> bytes:
  with Image.open(io.BytesIO(data)) as image:
    return reencoding.reencode(image, 'WEBP', StoredImages(), data if with_data else None).stored


@pytest.mark.parametrize('options', [{'quality': 85}, {'quality': 30}, {'lossless': True}],
                         ids=['q85', 'q30', 'lossless'])
@pytest.mark.parametrize('size', [(1, 1), (333, 211), (1001, 777)])
def test_a_simple_webp_decoded_by_tensorflow_stores_the_bytes_pillow_would(options, size):
  """A simple WebP (VP8 or VP8L, no alpha) is decoded by TensorFlow, not Pillow. Expected: the
  same PNG bytes as Pillow's decode gives, and as the shard writer makes again."""
  data = _webp(natural_photos.photo(11, *size), **options)
  assert data[12:16] in (b'VP8 ', b'VP8L')
  with Image.open(io.BytesIO(data)) as image:
    assert reencoding._simple_webp(image, data) is not None  # pylint: disable=protected-access
  stored = _reencoded(data, with_data=True)
  assert stored == _reencoded(data, with_data=False)
  assert reencoding.reencode_again(data, StoredImages()).stored == stored


def test_only_a_simple_webp_goes_to_tensorflow():
  """Expected: an extended WebP (a profile, alpha, an animation: VP8X, whose animations
  TensorFlow's decoder mishandles) and a lossless one with alpha are left to Pillow; so is a
  simple one that TensorFlow fails (a byte of its bitstream damaged), which Pillow then
  rejects as before."""
  photo = natural_photos.photo(12, 64, 48)
  transparent = photo.convert('RGBA').rotate(30)
  others = [_webp(photo, icc_profile=b'\0' * 200), _webp(transparent), _webp(transparent, lossless=True),
            _webp(photo, save_all=True, append_images=[photo.rotate(5)], duration=50)]
  for data in others:
    with Image.open(io.BytesIO(data)) as image:
      assert reencoding._simple_webp(image, data) is None, data[12:16]  # pylint: disable=protected-access
  data = _webp(photo, quality=80)
  damaged = data[:30] + bytes([data[30] ^ 0xFF]) + data[31:]
  with Image.open(io.BytesIO(damaged)) as image:
    assert reencoding._simple_webp(image, damaged) is None  # pylint: disable=protected-access
  rejected = preparation.prepare_images([damaged], 10**8)[0]
  assert rejected.reason == 'corrupt' and 'WEBP data does not decode' in rejected.detail
