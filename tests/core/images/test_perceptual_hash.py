"""Perceptual hashes: the hash itself (no TensorFlow), then taken through prepare_images as a
conversion takes them: near copies land within NEAR_DISTANCE, other photos do not, a photo
turned by its Exif orientation hashes as its upright copy, and every stored format has one."""
import itertools
import re

import numpy as np
import pytest
from PIL import Image

from beam_pipeline.core.images import (exif_orientation, image_plans, image_quality, perceptual_hash, preparation,
                                      tensorflow_decoding)
from beam_pipeline.core.settings import StoredImages
from beam_pipeline.synthetic import natural_photos, near_copy_kinds
from beam_pipeline.synthetic.image_files import encode

HEX = re.compile(r'[0-9a-f]{16}')
_ORIENTATION_TAG = 0x0112


def _thumbnail(seed: int) -> np.ndarray:
  return np.random.default_rng(seed).uniform(0, 255, (perceptual_hash.SIDE, perceptual_hash.SIDE))


def _hash_of(data: bytes, stored: StoredImages = StoredImages()) -> str:
  return preparation.prepare_image(data, 10**8, stored).info.phash


def _photo(seed: int, size=(480, 360)) -> Image.Image:
  return natural_photos.photo(seed, *size)


def test_a_hash_is_16_hex_digits_of_31_ones_and_a_zero_dc_bit():
  """The median of the 63 AC coefficients splits them 31 above, 31 below, one at it; DC's bit,
  the first, is always 0: it would only say the image is not black."""
  for seed in range(20):
    value = perceptual_hash.phash(_thumbnail(seed))
    assert HEX.fullmatch(value)
    assert bin(int(value, 16)).count('1') == 31
    assert int(value, 16) >> 63 == 0


def test_brightness_and_contrast_do_not_change_the_hash():
  thumbnail = _thumbnail(1)
  assert perceptual_hash.phash(thumbnail * 0.9 + 12) == perceptual_hash.phash(thumbnail)


def test_distance_counts_differing_bits():
  assert perceptual_hash.distance('0000000000000000', '0000000000000000') == 0
  assert perceptual_hash.distance('0000000000000000', 'ffffffffffffffff') == 64
  assert perceptual_hash.distance('00000000000000f0', '0000000000000001') == 5


@pytest.mark.parametrize('orientation', range(2, 9))
def test_an_orientation_turns_the_thumbnail_as_pillow_turns_the_pixels(orientation):
  """Pixels stored as the camera wrote them, hashed with their orientation, hash as the same
  pixels turned upright by exif_orientation.TRANSPOSES (Pillow's exif_transpose); and but for
  orientation 2, a mirror, which the hash sees through, unlike the pixels as stored."""
  stored = _thumbnail(orientation).astype(np.float32)
  upright = np.asarray(Image.fromarray(stored, 'F').transpose(exif_orientation.TRANSPOSES[orientation]))
  assert perceptual_hash.phash(stored, orientation) == perceptual_hash.phash(upright)
  assert (perceptual_hash.phash(stored, orientation) == perceptual_hash.phash(stored)) == (orientation == 2)


@pytest.mark.parametrize('kind', list(near_copy_kinds.COPIES))
def test_each_kind_of_near_copy_hashes_within_near_distance_of_its_original(kind):
  """Photo 2's sides weigh nearly alike, so a downscaled copy of it faces the other way
  (test_a_copy_of_a_picture_whose_sides_weigh_alike_may_face_the_other_way): 2 of the 240
  copies of photos 0-39 do."""
  for seed in (0, 1, 3, 5):
    original = encode(_photo(seed), 'JPEG', quality=90)
    copy = near_copy_kinds.copy(original, kind, seed)
    assert perceptual_hash.distance(_hash_of(original), _hash_of(copy)) <= perceptual_hash.NEAR_DISTANCE


def test_distinct_photos_are_farther_apart_than_near_distance():
  results = preparation.prepare_images([encode(_photo(seed), 'JPEG', quality=90) for seed in range(16)], 10**8)
  hashes = [result.info.phash for result in results]
  assert min(perceptual_hash.distance(a, b) for a, b in itertools.combinations(hashes, 2)) > \
      perceptual_hash.NEAR_DISTANCE


def test_a_thumbnail_and_its_mirror_image_face_one_way_and_hash_alike():
  """Of a picture and its mirror image exactly one is mirrored (facing): the one whose right
  side outweighs its left. A picture facing the other way is not any copy: it hashes far."""
  for seed in range(20):
    thumbnail = _thumbnail(seed)
    both = np.stack([thumbnail, thumbnail[:, ::-1]])
    assert perceptual_hash.facing(both, [1, 1]).tolist() in ([True, False], [False, True])
    assert perceptual_hash.phash(thumbnail) == perceptual_hash.phash(thumbnail[:, ::-1])
    kept, = perceptual_hash.phashes(thumbnail[None], [1], np.array([False]))
    turned, = perceptual_hash.phashes(thumbnail[None], [1], np.array([True]))
    assert perceptual_hash.distance(kept, turned) > perceptual_hash.NEAR_DISTANCE


def test_a_copy_of_a_picture_whose_sides_weigh_alike_may_face_the_other_way():
  """The price of facing: a picture whose left and right sides weigh nearly alike is mirrored or
  not by a hair, which a re-save can tip. Its copy then hashes as its mirror image, far from it,
  though the two are near as they face."""
  thumbnail = _thumbnail(3)
  ramp = np.cos(np.pi * (2 * np.arange(perceptual_hash.SIDE) + 1) / (2 * perceptual_hash.SIDE))
  balance = thumbnail.sum(axis=0) @ ramp / (ramp @ ramp) / perceptual_hash.SIDE
  balanced = thumbnail - balance * ramp  # its first horizontal frequency 0
  left, right = balanced + 0.01 * ramp, balanced - 0.01 * ramp
  assert perceptual_hash.facing(np.stack([left, right]), [1, 1]).tolist() == [False, True]
  assert perceptual_hash.distance(perceptual_hash.phash(left), perceptual_hash.phash(right)) > \
      perceptual_hash.NEAR_DISTANCE
  as_left, = perceptual_hash.phashes(right[None], [1], np.array([False]))
  assert perceptual_hash.distance(perceptual_hash.phash(left), as_left) <= 2


def test_a_photo_whose_right_side_is_brighter_is_mirrored():
  left = np.tile(np.linspace(200, 20, perceptual_hash.SIDE), (perceptual_hash.SIDE, 1))
  assert perceptual_hash.facing(np.stack([left, left[:, ::-1]]), [1, 1]).tolist() == [False, True]
  # Turned upright first: orientation 3 (half a turn) puts the bright side on the right.
  assert perceptual_hash.facing(left[None], [3]).tolist() == [True]


def _turned_by_camera(upright: Image.Image, orientation: int, fmt: str) -> bytes:
  """``upright`` stored as a camera turned sideways stores it: pixels that the Exif
  ``orientation`` turns upright, and the tag."""
  inverse = {6: Image.Transpose.ROTATE_90, 8: Image.Transpose.ROTATE_270, 3: Image.Transpose.ROTATE_180}
  exif = Image.Exif()
  exif[_ORIENTATION_TAG] = orientation
  return encode(upright.transpose(inverse[orientation]), fmt, exif=exif.tobytes(),
                **({'quality': 92} if fmt == 'JPEG' else {}))


@pytest.mark.parametrize('exif', ['apply', 'ignore'])
@pytest.mark.parametrize('orientation, fmt', [(6, 'JPEG'), (8, 'JPEG'), (3, 'PNG')])
def test_a_photo_turned_by_its_exif_orientation_hashes_as_its_upright_copy(exif, orientation, fmt):
  """Stored upright (apply, re-encoded) or as the camera wrote it (ignore: the hash turns
  the thumbnail instead), it hashes as a copy saved upright without the tag."""
  upright = _photo(7, (400, 300))
  stored = StoredImages(exif_orientation=exif)
  turned, plain = _turned_by_camera(upright, orientation, fmt), encode(upright, 'JPEG', quality=92)
  assert preparation.prepare_image(turned, 10**8, stored).info.reencoded == (exif == 'apply')
  assert perceptual_hash.distance(_hash_of(turned, stored), _hash_of(plain, stored)) <= perceptual_hash.NEAR_DISTANCE
  assert perceptual_hash.distance(_hash_of(turned, stored), _hash_of(encode(
      upright.transpose(Image.Transpose.ROTATE_90), 'JPEG', quality=92), stored)) > perceptual_hash.NEAR_DISTANCE


def _formats():
  """Every kind of file a record may store, or be re-encoded from, made of one photo."""
  photo = _photo(11, (320, 240))
  sixteen_bit = Image.fromarray((np.asarray(photo.convert('L'), np.uint16) * 257), 'I;16')
  return {
      'jpeg': encode(photo, 'JPEG', quality=90), 'png': encode(photo, 'PNG'), 'gif': encode(photo, 'GIF'),
      'bmp': encode(photo, 'BMP'), 'tiff': encode(photo, 'TIFF'), 'webp': encode(photo, 'WEBP', quality=90),
      'cmyk jpeg': encode(photo.convert('CMYK'), 'JPEG', quality=90),
      'gray jpeg': encode(photo.convert('L'), 'JPEG', quality=90), 'gray png': encode(photo.convert('L'), 'PNG'),
      'gray+alpha png': encode(photo.convert('LA'), 'PNG'), 'rgba png': encode(photo.convert('RGBA'), 'PNG'),
      '16-bit png': encode(sixteen_bit, 'PNG'),
      'animated gif': encode(photo, 'GIF', save_all=True, append_images=[photo.rotate(90)]),
  }


def test_every_stored_format_gets_a_hash_and_all_hash_alike():
  formats = _formats()
  results = dict(zip(formats, preparation.prepare_images(list(formats.values()), 10**8)))
  for name, result in results.items():
    assert HEX.fullmatch(result.info.phash), name
    assert result.info.statistics is not None, name
    assert perceptual_hash.distance(result.info.phash, results['jpeg'].info.phash) <= 4, name


def test_the_one_by_one_decode_gives_what_the_batch_gives():
  """A batch's failures are decoded again eagerly (checked_by_tensorflow): a record made there
  has the same hash and statistics."""
  formats = _formats()
  for name, data in formats.items():
    plan = image_plans.plan(data, 10**8, StoredImages(), quick=False)
    batch = preparation.prepare_image(data, 10**8).info
    alone = tensorflow_decoding.checked_by_tensorflow(plan).info
    assert alone.phash == batch.phash, name
    np.testing.assert_allclose(alone.statistics, batch.statistics, rtol=1e-5, atol=1e-5, err_msg=name)


def test_flat_code_words_are_near_their_neighbours_only_and_far_from_any_layout_s_hash():
  """Each sets DC's bit and 52 others, where a DCT hash sets 31 and never DC's: at least 22 bits
  from any. Neighbouring levels lie 6 bits apart, near at every distance chosen by the input's
  size (6-10); levels two apart or more at least 12, farther than NEAR_DISTANCE."""
  words = [int(perceptual_hash.flat(level / perceptual_hash.FLAT_LEVELS), 16)
           for level in range(perceptual_hash.FLAT_LEVELS + 1)]
  assert all(word >> 63 and word.bit_count() == 53 for word in words)
  for (i, a), (j, b) in itertools.combinations(enumerate(words), 2):
    assert (a ^ b).bit_count() == 6 if j == i + 1 else (a ^ b).bit_count() >= 12 > perceptual_hash.NEAR_DISTANCE
  layout = int(_hash_of(encode(_photo(1), 'JPEG', quality=90)), 16)
  assert min((layout ^ word).bit_count() for word in words) >= 22


def test_a_flat_image_hashes_by_its_brightness_whatever_its_size_or_format():
  """A blank image at two sizes and formats hashes alike; blank images of other levels do not."""
  def flat(level, size, fmt='PNG'):
    return _hash_of(encode(Image.new('RGB', size, (level,) * 3), fmt, **({'quality': 80} if fmt == 'JPEG' else {})))
  assert flat(0, (64, 48)) == flat(0, (800, 600), 'JPEG') == perceptual_hash.flat(0.0)
  assert flat(255, (96, 72)) == flat(255, (30, 20), 'JPEG') == perceptual_hash.flat(1.0)
  assert flat(128, (70, 70)) == perceptual_hash.flat(0.5)
  assert perceptual_hash.distance(flat(128, (70, 70)), flat(0, (70, 70))) > perceptual_hash.NEAR_DISTANCE


def test_a_plain_image_with_a_mark_on_it_is_hashed_by_its_layout():
  """Nearly blank (low_information) but not featureless: a box on a plain page. Its hash is of
  where the box is, so its copy is near it and a page with the box lower down is not (one with
  it in the mirrored place would be: it faces the other way)."""
  def page(top):
    image = Image.new('RGB', (200, 150), (250, 250, 250))
    image.paste((20, 20, 20), (30, top, 60, top + 30))
    return image
  first, moved = page(10), page(110)
  infos = [result.info for result in preparation.prepare_images(
      [encode(first, 'PNG'), encode(first, 'JPEG', quality=60), encode(moved, 'PNG')], 10**8)]
  assert all(info.statistics.entropy < image_quality.LOW_INFORMATION_BITS and not image_quality.featureless(
      info.statistics) for info in infos)
  levels = perceptual_hash.FLAT_LEVELS
  assert not {info.phash for info in infos} & {perceptual_hash.flat(level / levels) for level in range(levels + 1)}
  assert perceptual_hash.distance(infos[0].phash, infos[1].phash) <= perceptual_hash.NEAR_DISTANCE
  assert perceptual_hash.distance(infos[0].phash, infos[2].phash) > perceptual_hash.NEAR_DISTANCE
