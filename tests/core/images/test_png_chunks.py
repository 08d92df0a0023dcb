"""The walk of a PNG's chunks: what Pillow's load() parses past the pixels, and whether it is an APNG."""
import pytest

from beam_pipeline.core.images.formats import png_chunks
from beam_pipeline.core.rejections import Rejected

from helpers import image_cases, pillow_modes
from helpers.photos import encode, image


def test_a_still_png_is_neither_animated_nor_parsed_further_by_load():
  assert png_chunks.verify(encode(image(1), 'PNG')) == png_chunks.Walked(parsed_by_load=False, animated=False)


def test_text_after_the_pixels_is_parsed_by_load_but_no_animation():
  walked = png_chunks.verify(pillow_modes.cases()['text-after-pixels.png'].data)
  assert walked == png_chunks.Walked(parsed_by_load=True, animated=False)


@pytest.mark.parametrize('name', sorted(image_cases.apng_cases()))
def test_every_apng_is_animated_whatever_its_frames_say(name):
  """No frames in acTL, a frame without data, a default image outside the animation: each is an APNG."""
  assert png_chunks.verify(image_cases.apng_cases()[name].data).animated


def test_a_bad_crc_is_still_refused():
  with pytest.raises(Rejected, match='fails its CRC check'):
    png_chunks.verify(image_cases.cases()['bad-crc.png'].data)
