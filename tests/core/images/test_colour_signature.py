"""The colour signature beside the perceptual hash: near copies keep it, a gray copy has none to
be apart from, pictures that differ only in hue hash alike but are apart in it, and it is
turned upright as the hash is."""
import itertools

import numpy as np
import pytest
from PIL import Image

from beam_pipeline.core.images import colour_signature, image_plans, perceptual_hash, preparation, tensorflow_decoding
from beam_pipeline.core.planning import near_copies
from beam_pipeline.core.settings import StoredImages
from beam_pipeline.synthetic import natural_photos, near_copy_kinds
from beam_pipeline.synthetic.image_files import encode

_ORIENTATION_TAG = 0x0112


def _infos(files):
  return [result.info for result in preparation.prepare_images(files, 10**8)]


def _apart(a: str, b: str) -> bool:
  return bool(near_copies.colours_apart(*near_copies.parse_colours([near_copies.colour_value(a),
                                                                     near_copies.colour_value(b)])))


def test_a_colour_image_has_16_hex_digits_and_a_gray_one_zeros_or_none():
  photo = natural_photos.photo(3, 320, 240)
  colour, gray_rgb, gray = _infos([encode(photo, 'JPEG', quality=90), encode(photo.convert('L').convert('RGB'), 'PNG'),
                                   encode(photo.convert('L'), 'PNG')])
  assert len(colour.colour) == 16 and int(colour.colour, 16)
  assert gray_rgb.colour == '0' * 16 and gray.colour == ''


@pytest.mark.parametrize('kind', list(near_copy_kinds.COPIES))
def test_each_kind_of_near_copy_keeps_its_originals_colours(kind):
  for seed in range(6):
    original = near_copy_kinds.original(seed)
    first, copy = _infos([original, near_copy_kinds.copy(original, kind, seed)])
    assert not _apart(first.colour, copy.colour), (kind, seed)


def test_a_gray_copy_of_a_colour_photo_is_apart_from_nothing():
  original = near_copy_kinds.original(2)
  first, gray = _infos([original, near_copy_kinds.gray_copy(original)])
  assert not _apart(first.colour, gray.colour)
  assert perceptual_hash.near(first.phash, gray.phash)


def test_gradients_that_differ_only_in_hue_hash_alike_and_are_apart_in_colour():
  """Of 40 two-colour gradients whose hues lie 9 degrees apart (18 between two of one direction),
  many pairs lie within the hash's distance; the colour signature tells every one of those pairs
  apart."""
  infos = _infos(near_copy_kinds.hue_gradients(40))
  close = [(a, b) for a, b in itertools.combinations(infos, 2)
           if perceptual_hash.near(a.phash, b.phash)]
  assert len(close) >= 20
  assert all(_apart(a.colour, b.colour) for a, b in close)


@pytest.mark.parametrize('orientation', [3, 6, 8])
def test_a_photo_stored_sideways_has_its_upright_copys_colours(orientation):
  """Its hash is turned upright by its Exif orientation, and so is its signature: the quarters
  are the upright picture's. (Not photo 5, whose centre weighs nearly alike on both sides: a
  re-save may tip it to face the other way.)"""
  upright = natural_photos.photo(6, 400, 300)
  inverse = {6: Image.Transpose.ROTATE_90, 8: Image.Transpose.ROTATE_270, 3: Image.Transpose.ROTATE_180}
  exif = Image.Exif()
  exif[_ORIENTATION_TAG] = orientation
  turned = encode(upright.transpose(inverse[orientation]), 'JPEG', quality=92, exif=exif.tobytes())
  stored = StoredImages(exif_orientation='ignore')
  sideways = preparation.prepare_image(turned, 10**8, stored).info
  plain = preparation.prepare_image(encode(upright, 'JPEG', quality=92), 10**8, stored).info
  quarters = lambda info: np.frombuffer(bytes.fromhex(info.colour), np.int8).astype(int)  # noqa: E731
  assert np.abs(quarters(sideways) - quarters(plain)).max() <= 2
  rotated = preparation.prepare_image(encode(upright.transpose(Image.Transpose.ROTATE_90), 'JPEG', quality=92),
                                      10**8, stored).info
  assert np.abs(quarters(rotated) - quarters(plain)).max() > 2


def test_the_one_by_one_decode_gives_the_batchs_signature():
  data = encode(natural_photos.photo(9, 320, 240), 'PNG')
  plan = image_plans.plan(data, 10**8, StoredImages(), quick=False)
  alone = tensorflow_decoding.checked_by_tensorflow(plan).info
  assert alone.colour == preparation.prepare_image(data, 10**8).info.colour


def test_signatures_are_opponent_colours_by_quarter():
  """A grid red on the left half, blue on the right: red - green is +255 then 0, (red + green) /
  2 - blue is +127.5 then -255, halved and rounded, quarter by quarter."""
  grid = np.zeros((1, perceptual_hash.SIDE, perceptual_hash.SIDE, 3), np.float32)
  grid[0, :, :16, 0] = 255
  grid[0, :, 16:, 2] = 255
  found, = colour_signature.signatures(grid, np.array([3]), [1])
  assert list(np.frombuffer(bytes.fromhex(found), np.int8)) == [127, 64, 0, -127, 127, 64, 0, -127]
