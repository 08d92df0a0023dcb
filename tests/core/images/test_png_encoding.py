"""png_encoding writes PNGs that every decoder reads back to the very samples, profile included."""
import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from beam_pipeline.core.images.formats import png_encoding
from beam_pipeline.synthetic import natural_photos

_RNG = np.random.default_rng(58)
PROFILE = b'\0' * 16 + b'RGB ' + bytes(range(200))


def _image(mode: str, height: int = 37, width: int = 53) -> Image.Image:
  if mode == 'I;16':
    return Image.fromarray(_RNG.integers(0, 1 << 16, (height, width), dtype=np.uint16)).convert('I;16')
  channels = len(mode)
  samples = _RNG.integers(0, 256, (height, width, channels), dtype=np.uint8)
  return Image.fromarray(samples[:, :, 0] if channels == 1 else samples, mode)


@pytest.mark.parametrize('mode', ['L', 'LA', 'RGB', 'RGBA', 'I;16'])
def test_pillow_and_tensorflow_read_back_every_sample(mode):
  image = _image(mode)
  data = png_encoding.encoded(image, PROFILE)
  with Image.open(io.BytesIO(data)) as back:
    back.load()
    assert back.mode == mode
    assert np.array_equal(np.asarray(back), np.asarray(image))
    assert back.info['icc_profile'] == PROFILE
  decoded = tf.io.decode_png(data, dtype=tf.uint16 if mode == 'I;16' else tf.uint8).numpy()
  assert np.array_equal(decoded.reshape(np.asarray(image).shape), np.asarray(image))


def test_rows_filtered_a_strip_at_a_time_join_up(monkeypatch):
  image = _image('RGB', height=101)
  monkeypatch.setattr(png_encoding, '_STRIP_BYTES', 3 * 53 * 7)  # strips of 7 rows, the last of 3
  data = png_encoding.encoded(image)
  assert np.array_equal(tf.io.decode_png(data).numpy(), np.asarray(image))
  assert data == png_encoding.encoded(image)  # the same bytes every time
  assert b'iCCP' not in data


def test_a_photo_compresses_about_as_well_as_pillows_choice_of_filters():
  photo = natural_photos.photo(3, 640, 480).convert('RGB')
  buffer = io.BytesIO()
  photo.save(buffer, 'PNG', compress_level=png_encoding.LEVEL)
  assert len(png_encoding.encoded(photo)) < 1.1 * len(buffer.getvalue())


def test_a_palette_one_bit_pixels_and_a_transparent_colour_are_left_to_pillow():
  assert png_encoding.encodes(_image('RGB'))
  assert not png_encoding.encodes(_image('RGB').convert('P'))
  assert not png_encoding.encodes(_image('L').convert('1'))
  transparent = _image('RGB')
  transparent.info['transparency'] = (0, 0, 0)
  assert not png_encoding.encodes(transparent)
