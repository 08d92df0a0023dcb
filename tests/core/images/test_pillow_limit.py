"""Pillow's decompression-bomb guard follows --max_pixels, run by run, in the process that opens images."""
import pytest
from PIL import Image

from beam_pipeline.core.images import pillow_limit, preparation

from helpers.hostile_files import png_with_size


@pytest.fixture(autouse=True)
def pillows_default():
  yield
  Image.MAX_IMAGE_PIXELS = pillow_limit.PILLOW_DEFAULT


def test_the_guard_is_the_option_above_pillows_default_and_the_default_below_it():
  pillow_limit.set_for(400_000_000)
  assert Image.MAX_IMAGE_PIXELS == 400_000_000
  pillow_limit.set_for(100_000_000)  # a later run of the process, with the default option
  assert Image.MAX_IMAGE_PIXELS == 100_000_000
  pillow_limit.set_for(1_000_000)
  assert Image.MAX_IMAGE_PIXELS == pillow_limit.PILLOW_DEFAULT == 89_478_485


def test_preparing_a_batch_sets_the_guard_from_its_max_pixels():
  """195 million pixels: past Pillow's own 179 million, within --max_pixels=400000000; a later
  batch of the default option refuses it, by the option, and one of 90 million too, by Pillow's
  default guard (twice 89,478,485), in the option's terms."""
  header = png_with_size(15000, 13000)
  lifted, = preparation.prepare_images([header], 400_000_000)
  assert lifted.reason == 'corrupt'  # its pixels are an 8x8 PNG's: past the size check, it fails to decode
  default, = preparation.prepare_images([header], 100_000_000)
  assert (default.reason, default.detail) == ('too_many_pixels', '15000x13000 pixels exceeds --max_pixels=100000000')
  small, = preparation.prepare_images([header], 90_000_000)
  assert (small.reason, small.detail) == ('too_many_pixels', '195000000 pixels exceeds --max_pixels=90000000')


def test_a_refusal_is_said_in_the_options_terms():
  error = Image.DecompressionBombError('Image size (900000000 pixels) exceeds limit of 178956970 pixels, could be '
                                       'decompression bomb DOS attack.')
  assert pillow_limit.refusal(error, 400_000_000) == '900000000 pixels exceeds --max_pixels=400000000'
