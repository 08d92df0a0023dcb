"""Annotated boxes onto the stored image: each Exif turn checked against the pixels Pillow turns."""
import pytest
from PIL import Image, ImageDraw

from beam_pipeline.core.inputs.annotations import AnnotatedObject, Problem
from beam_pipeline.core.images.boxes import StoredObject, stored_objects
from beam_pipeline.core.images.exif_orientation import TRANSPOSES


def _object(xmin: float, ymin: float, xmax: float, ymax: float, area: float = 0.0) -> AnnotatedObject:
  return AnnotatedObject('cat', xmin, ymin, xmax, ymax, area, is_crowd=1, difficult=0, truncated=1, where='object 1')


def _box(stored: StoredObject):
  return stored.xmin, stored.ymin, stored.xmax, stored.ymax


def test_plain_normalization_keeps_the_rest_of_the_object():
  objects, problems = stored_objects([_object(10, 20, 30, 60, area=700)], None, (40, 80), 1, (40, 80))
  assert problems == []
  assert objects == (StoredObject('cat', 0.25, 0.25, 0.75, 0.75, 700.0, 1, 0, 1),)
  assert all(type(value) is float for value in objects[0][1:6])  # pylint: disable=unidiomatic-typecheck


def test_a_downscaled_stored_image_keeps_the_normalized_box_and_scales_the_area():
  objects, _ = stored_objects([_object(3, 7, 11, 13, area=40), _object(3, 7, 11, 13)], (30, 20), (30, 20), 1,
                              (15, 10))
  assert [_box(found) for found in objects] == [pytest.approx((3 / 30, 7 / 20, 11 / 30, 13 / 20), abs=1e-9)] * 2
  assert [found.area for found in objects] == pytest.approx([10.0, 12.0])  # given area / 4; 4 x 3 stored pixels


def test_a_box_partly_outside_is_clipped_and_one_wholly_outside_is_a_problem():
  objects, problems = stored_objects([_object(-10, 5, 50, 30), _object(40, 0, 55, 10)], None, (40, 20), 1, (40, 20))
  assert [_box(found) for found in objects] == [(0.0, 0.25, 1.0, 1.0)]
  assert objects[0].area == pytest.approx(40 * 15)
  assert problems == [Problem('object 1', 'box [40, 0, 55, 10] lies outside the 40x20 image')]


@pytest.mark.parametrize('area', [0.0, 4e18, float('inf'), 60 * 40 + 1])
def test_an_area_larger_than_the_clipped_box_is_the_clipped_boxs_on_the_stored_image(area):
  """A box past the image's edges whose area was its unclipped w*h (4e18, or inf) gets its clipped
  box's area in stored pixels: finite, and never more than the image."""
  objects, problems = stored_objects([_object(10, 10, 10 + 1e9, 10 + 4e9, area=area)], None, (60, 40), 1, (30, 20))
  assert problems == [] and _box(objects[0]) == pytest.approx((10 / 60, 0.25, 1.0, 1.0))
  assert objects[0].area == pytest.approx(50 * 30 / 4)


def test_a_given_area_within_the_clipped_box_is_scaled_as_given():
  objects, _ = stored_objects([_object(-10, 5, 50, 30, area=300), _object(0.1, 0.1, 0.3, 0.3, area=0.2 * 0.2)],
                              None, (40, 20), 1, (20, 10))
  assert [found.area for found in objects] == [75.0, pytest.approx(0.01)]


@pytest.mark.parametrize('orientation', range(1, 9))
def test_each_orientation_turns_the_box_as_pillow_turns_the_pixels(orientation):
  source = Image.new('L', (40, 30))
  ImageDraw.Draw(source).rectangle((5, 7, 14, 18), fill=255)  # inclusive: pixels 5..14 x 7..18
  assert source.getbbox() == (5, 7, 15, 19)
  turned = source.transpose(TRANSPOSES[orientation]) if orientation > 1 else source
  objects, problems = stored_objects([_object(5, 7, 15, 19)], (40, 30), source.size, orientation, turned.size)
  assert problems == []
  width, height = turned.size
  left, upper, right, lower = turned.getbbox()
  assert _box(objects[0]) == pytest.approx((left / width, upper / height, right / width, lower / height), abs=1e-9)


def test_annotations_made_on_the_upright_picture_are_not_turned_again():
  """Orientation 6 stores a 40x30 file as 30x40; annotations that say 30x40 were made upright."""
  objects, problems = stored_objects([_object(3, 8, 12, 20)], (30, 40), (40, 30), 6, (30, 40))
  assert problems == []
  assert _box(objects[0]) == pytest.approx((0.1, 0.2, 0.4, 0.5), abs=1e-9)
  turned, _ = stored_objects([_object(3, 8, 12, 20)], (40, 30), (40, 30), 6, (30, 40))
  assert _box(turned[0]) == pytest.approx((1 - 20 / 30, 3 / 40, 1 - 8 / 30, 12 / 40), abs=1e-9)


def test_annotations_made_on_a_half_size_upright_copy_are_not_turned():
  objects, problems = stored_objects([_object(3, 8, 12, 20, area=20)], (150, 200), (400, 300), 6, (300, 400))
  assert problems == []
  assert _box(objects[0]) == pytest.approx((3 / 150, 8 / 200, 12 / 150, 20 / 200), abs=1e-9)
  assert objects[0].area == pytest.approx(80.0)


def test_annotations_made_on_a_half_size_copy_fit_by_normalizing():
  objects, problems = stored_objects([_object(10, 5, 20, 15, area=50)], (50, 25), (100, 50), 1, (100, 50))
  assert problems == []
  assert _box(objects[0]) == pytest.approx((0.2, 0.2, 0.4, 0.6), abs=1e-9)
  assert objects[0].area == pytest.approx(200.0)


@pytest.mark.parametrize('annotated, orientation', [((100, 80), 1), ((80, 100), 1), ((100, 80), 6), ((0, 50), 1)])
def test_an_annotated_size_of_another_shape_is_one_problem_and_no_objects(annotated, orientation):
  objects, problems = stored_objects([_object(1, 1, 5, 5)] * 3, annotated, (100, 50), orientation, (100, 50))
  assert objects == ()
  assert problems == [Problem('image', f'annotations are for a {annotated[0]}x{annotated[1]} image; '
                                       'the file is 100x50')]


@pytest.mark.parametrize('annotated, fits', [((201, 100), True), ((199, 100), True), ((203, 100), False)])
def test_a_size_within_1_percent_of_the_shape_fits(annotated, fits):
  objects, problems = stored_objects([_object(0, 0, 10, 10)], annotated, (100, 50), 1, (100, 50))
  assert (len(objects), len(problems)) == ((1, 0) if fits else (0, 1))
