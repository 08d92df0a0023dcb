"""Every pixel mode Pillow opens, under every --image_format, with and without --max_side:
written or rejected, the same bytes at any time, and decodable by every reader.

Also a PNG that Pillow refuses, stored as libpng decodes it.
"""
import io
import time

import pytest
import tensorflow as tf
from PIL import Image

from beam_pipeline.core.images import preparation, reencoding, stored_images
from beam_pipeline.core.rejections import Rejected
from beam_pipeline.core.settings import IMAGE_FORMATS, StoredImages

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
