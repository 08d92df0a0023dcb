"""Every pixel mode Pillow opens, under every --image_format, with and without --max_side:
written or rejected, the same bytes at any time, and decodable by every reader.

Also the decoders' views that validation now takes into account: a PNG Pillow refuses
(stored as libpng decodes it), and JPEGs that libjpeg decodes only with warnings.
"""
import io
import time

import pytest
import tensorflow as tf
from PIL import Image

from beam_pipeline.core import image_info, preparation, reencoding, stored_images, tensorflow_decoding
from beam_pipeline.core.rejections import Rejected
from beam_pipeline.core.settings import IMAGE_FORMATS, StoredImages

from helpers import image_cases, photos, pillow_modes

MODES = pillow_modes.cases()
MAX_SIDE = 24


def prepared_table(stored: StoredImages):
  cases = list(MODES.values())
  return dict(zip((case.name for case in cases),
                  preparation.prepare_images([case.data for case in cases], 10**8, stored)))


def assert_decodes_everywhere(prepared: image_info.PreparedImage) -> None:
  """TensorFlow's decode_image and decode_jpeg, and Pillow's full load, all to the recorded size."""
  info, data = prepared.info, prepared.stored
  assert tf.io.decode_image(data, channels=3, expand_animations=False).shape == (info.height, info.width, 3)
  assert tf.io.decode_jpeg(data, channels=3).shape == (info.height, info.width, 3)
  with Image.open(io.BytesIO(data)) as image:
    image.load()
    assert image.size == (info.width, info.height)


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


def _damaged_jpegs():
  """JPEGs that TensorFlow decodes with libjpeg warnings: a scan cut short (its end marker
  follows at once) and extraneous bytes between two header segments."""
  jpeg = photos.jpeg(3, 64, 48, quality=90)
  scan = jpeg.index(b'\xff\xda')
  tables = jpeg.index(b'\xff\xdb')
  return {'premature end of data segment': jpeg[:(scan + len(jpeg)) // 2] + b'\xff\xd9',
          '2 extraneous bytes before marker 0xdb': jpeg[:tables] + b'\x00\x00' + jpeg[tables:]}


def test_damaged_jpegs_are_told_apart_from_clean_ones_in_one_batch():
  """Expected: each damaged JPEG's info names libjpeg's warning; clean JPEGs (baseline,
  progressive, gray, CMYK, with bytes after the end marker) and PNGs say nothing; the
  damaged ones still decode everywhere, so they are stored unless --strict_jpeg."""
  damaged = _damaged_jpegs()
  clean = [photos.jpeg(1), photos.encode(photos.image(2), 'JPEG', progressive=True),
           photos.encode(photos.image(3).convert('L'), 'JPEG'), MODES['cmyk.jpg'].data,
           photos.jpeg(4) + b'trailing bytes', photos.encode(photos.image(5), 'PNG')]
  results = preparation.prepare_images([*clean[:3], *damaged.values(), *clean[3:]], 10**8)
  assert [r.info.damage for r in results[:3] + results[5:]] == [''] * len(clean)
  for warning, result in zip(damaged, results[3:5]):
    assert warning in result.info.damage
    assert_decodes_everywhere(result)


def test_what_a_failing_jpeg_prints_sends_no_decoded_jpeg_to_be_decoded_again(monkeypatch):
  """A JPEG with a stray marker in its scan (libjpeg in TensorFlow prints warnings, then fails
  it) among clean ones. Expected: rejected; the clean ones undamaged, and none of them decoded
  a second time to find out, since the failure alone printed what the batch printed."""
  cut = image_cases._marker_in_scan(photos.jpeg(7, 64, 48, quality=90))  # pylint: disable=protected-access
  probed = []
  original = tensorflow_decoding.jpeg_warnings
  monkeypatch.setattr(tensorflow_decoding, 'jpeg_warnings',
                      lambda data, decoders: probed.append(data) or original(data, decoders))
  results = preparation.prepare_images([photos.jpeg(1), cut, photos.jpeg(2)], 10**8)
  assert isinstance(results[1], Rejected)
  assert [r.info.damage for r in (results[0], results[2])] == ['', '']
  assert probed == []
  damaged = list(_damaged_jpegs().values())[0]
  results = preparation.prepare_images([photos.jpeg(1), cut, damaged], 10**8)
  assert results[2].info.damage and len(probed) == 2  # a decoded JPEG warned: both decoded ones looked at
