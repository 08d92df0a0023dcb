"""Quality flags: the statistics (numpy, no TensorFlow), the flags from them, and each flag
raised on an image made to have it, through prepare_images, and not on ordinary photos."""
import numpy as np
import pytest

from beam_pipeline.core.images import image_quality, perceptual_hash, preparation
from beam_pipeline.core.images.image_quality import Statistics
from beam_pipeline.synthetic import natural_photos, pet_photos, quality_cases
from beam_pipeline.synthetic.quality_cases import encode

GRID = perceptual_hash.SIDE
PLAIN = Statistics(brightness=0.5, shadows=0.2, highlights=0.9, sharpness=1.0, entropy=7.0, colour_spread=0.3)


def _summaries(grids: np.ndarray, channels: np.ndarray):
  gray = perceptual_hash.thumbnails(grids, channels)
  return gray, image_quality.statistics(grids, gray, channels)


def _statistics(grid: np.ndarray, channels: int) -> Statistics:
  _, values = _summaries(grid[None], np.array([channels]))
  return Statistics._make(values[0].tolist())


def test_a_flat_grid_has_no_sharpness_no_entropy_and_its_level_everywhere():
  values = _statistics(np.full((GRID, GRID, 3), 51.0, np.float32), 3)
  assert values == pytest.approx(Statistics(0.2, 0.2, 0.2, 0.0, 0.0, 0.0))


def test_gray_is_the_luma_of_rgb_and_the_first_channel_of_gray_and_alpha():
  red = np.zeros((GRID, GRID, 3), np.float32)
  red[..., 0] = 255
  assert _statistics(red, 3).brightness == pytest.approx(0.299)
  assert _statistics(red, 3).colour_spread == pytest.approx(1.0)
  gray_alpha = np.zeros((GRID, GRID, 2), np.float32)
  gray_alpha[..., 0], gray_alpha[..., 1] = 102, 255
  assert (_statistics(gray_alpha, 2).brightness, _statistics(gray_alpha, 2).colour_spread) == pytest.approx((0.4, 0))


def test_two_equal_halves_have_one_bit_and_a_sharp_edge():
  grid = np.zeros((GRID, GRID, 1), np.float32)
  grid[:, GRID // 2:] = 255
  values = _statistics(grid, 1)
  assert (values.entropy, values.shadows, values.highlights) == pytest.approx((1.0, 0.0, 1.0))
  assert values.sharpness > image_quality.BLURRY_SHARPNESS


def test_sharpness_is_the_same_at_any_contrast():
  """A share of the grid's own variance: the same picture at a fifth of its contrast, darker or
  lighter, is as sharp; a nearly flat grid's few levels of noise are not scaled up."""
  rng = np.random.default_rng(1)
  grid = rng.uniform(0, 255, (GRID, GRID, 1)).astype(np.float32)
  sharp = _statistics(grid, 1).sharpness
  for low in (20 + grid / 5, 200 + grid / 5):
    assert _statistics(low.astype(np.float32), 1).sharpness == pytest.approx(sharp, rel=1e-4)
  noise = (100 + rng.uniform(0, 1, (GRID, GRID, 1))).astype(np.float32)
  assert _statistics(noise, 1).sharpness < 0.1 * sharp  # as a share of its variance, as sharp as the grid above


def test_a_batch_of_images_of_one_to_four_channels_is_summarized_each_as_alone_to_the_last_bit():
  rng = np.random.default_rng(0)
  grids = rng.uniform(0, 255, (4, GRID, GRID, 4)).astype(np.float32)
  for channels in range(1, 4):
    grids[channels - 1, :, :, channels:] = 0  # what padding gives an image of fewer channels
  together = _summaries(grids, np.arange(1, 5))
  for i in range(4):
    alone = _summaries(grids[i:i + 1, :, :, :i + 1], np.array([i + 1]))
    assert np.array_equal(together[0][i], alone[0][0]) and np.array_equal(together[1][i], alone[1][0])


@pytest.mark.parametrize('changed, flag', [
    ({'highlights': 0.3}, 'dark'), ({'shadows': 0.97}, 'light'), ({'sharpness': 0.02}, 'blurry'),
    ({'entropy': 1.0}, 'low_information'), ({'colour_spread': 0.001}, 'grayscale_as_rgb')])
def test_each_statistic_past_its_threshold_raises_its_flag_alone(changed, flag):
  assert image_quality.flags(PLAIN._replace(**changed), 600, 800, 3) == (flag,)


def test_shape_and_channels():
  assert image_quality.flags(PLAIN, 600, 800, 3) == ()
  assert image_quality.flags(PLAIN, 200, 800, 3) == ('extreme_aspect',)
  assert image_quality.flags(PLAIN, 2000, 600, 3) == ('extreme_aspect',)
  assert image_quality.flags(PLAIN._replace(colour_spread=0.0), 600, 800, 1) == ()
  assert image_quality.flags(None, 100, 800, 3) == ('extreme_aspect',)
  assert image_quality.flags(PLAIN._replace(highlights=0.1, sharpness=0.01), 600, 800, 3) == ('blurry', 'dark')


def _flags(datas):
  return [image_quality.flags(r.info.statistics, r.info.height, r.info.width, r.info.channels)
          for r in preparation.prepare_images(datas, 10**8)]


def _photos():
  return [natural_photos.photo(seed, *natural_photos.size(seed, (480, 800))) for seed in range(6)]


def test_ordinary_photos_raise_no_flag():
  plain = [encode(photo) for photo in _photos()]
  pets = [encode(pet_photos.photo(np.random.default_rng(i), 500, 375, 2.0), quality=85) for i in range(6)]
  assert _flags(plain + pets) == [()] * 12


def test_low_contrast_is_no_blur():
  """Over- and under-exposed photos and pages of small text were blurry when sharpness was
  counted in levels; as a share of their own contrast they are not."""
  made = [encode(make(photo)) for photo in _photos() for make in (quality_cases.dark, quality_cases.light)]
  pages = [encode(quality_cases.text_page(seed)) for seed in range(3)]
  assert not any('blurry' in flags for flags in _flags(made + pages))


@pytest.mark.parametrize('make, flag', [
    (quality_cases.dark, 'dark'), (quality_cases.light, 'light'), (quality_cases.blurred, 'blurry'),
    (quality_cases.gray_as_rgb, 'grayscale_as_rgb')])
def test_a_photo_made_to_have_a_flag_raises_it(make, flag):
  assert all(flag in flags for flags in _flags([encode(make(photo)) for photo in _photos()]))


def test_blank_and_two_tone_images_are_low_information_and_a_wide_strip_extreme():
  assert all('low_information' in flags for flags in _flags(
      [encode(quality_cases.blank(seed)) for seed in range(3)] + [encode(quality_cases.two_tone(seed))
                                                                   for seed in range(3)]))
  assert _flags([encode(natural_photos.photo(1, 1200, 300))]) == [('extreme_aspect',)]


def test_gray_stored_as_gray_is_not_grayscale_as_rgb():
  photo = _photos()[0]
  assert _flags([encode(photo.convert('L')), encode(photo.convert('L'), 'PNG')]) == [(), ()]


def test_sharp_textures_of_low_contrast_are_not_blurry():
  """Wood grain and tile outlines finer than the grid: cleanvision's edge measure calls such
  photos blurry; a share of their own contrast does not."""
  assert not any('blurry' in flags for flags in _flags([encode(quality_cases.texture(seed)) for seed in range(4)]))
