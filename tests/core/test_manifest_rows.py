"""Manifest rows made into input items, and the reasons a row is refused."""
import pytest

from beam_pipeline.core import boxes, manifest_rows
from beam_pipeline.core.records import InputItem
from beam_pipeline.core.rejections import Rejected


def _item(*cells: str) -> InputItem:
  return manifest_rows.csv_row_item('gs://b/m.csv', None, list(cells))


def test_automl_rows_with_and_without_a_set_value():
  assert _item('TRAIN', 'imgs/a.jpg', 'apple') == InputItem('gs://b/imgs/a.jpg', 'apple', 'train')
  assert _item('unassigned', 'imgs/a.jpg', 'apple') == InputItem('gs://b/imgs/a.jpg', 'apple', None)
  assert _item('imgs/a.jpg', 'apple') == InputItem('gs://b/imgs/a.jpg', 'apple', None)


@pytest.mark.parametrize('cells, message', [
    (('FOO', 'imgs/a.jpg', 'apple'), "set value 'FOO' is not one of TRAIN, VALIDATION, TEST, UNASSIGNED"),
    (('Training', 'imgs/a.jpg', ''), "set value 'Training' is not one of TRAIN, VALIDATION, TEST, UNASSIGNED"),
    (('imgs/a.jpg', 'apple', 'pear'), "row has 2 labels ['apple', 'pear']; one label per image is supported"),
    (('TRAIN', '', 'apple'), 'row has no image uri'),
])
def test_a_row_that_names_no_usable_input_says_why(cells, message):
  with pytest.raises(Rejected) as raised:
    _item(*cells)
  assert raised.value.detail == message


def test_automl_detection_rows_give_one_normalized_box_or_none():
  two = manifest_rows.csv_row_item('gs://b/m.csv', None, ['TEST', 'a.jpg', 'cat', '0.1', '0.2', '', '', '0.5', '0.6', '', ''],
                                   'm.csv:row 4')
  [box] = two.objects
  assert (two.uri, two.split, two.label, two.annotated_size) == ('gs://b/a.jpg', 'test', None, boxes.NORMALIZED)
  assert (box.label, box.xmin, box.ymin, box.xmax, box.ymax, box.where) == ('cat', 0.1, 0.2, 0.5, 0.6, 'm.csv:row 4')
  four = _item('a.jpg', 'dog', '0.5', '0.2', '0.9', '0.2', '0.9', '0.7', '0.5', '0.7')
  assert four.objects[0][1:5] == (0.5, 0.2, 0.9, 0.7)
  assert _item('TRAIN', 'a.jpg', '', '', '', '', '', '', '', '', '').objects == ()
  assert manifest_rows.is_detection_row(['TRAIN', 'a.jpg', '', '', '']) and not manifest_rows.is_detection_row(
      ['TRAIN', 'a.jpg', 'cat'])


@pytest.mark.parametrize('cells, message', [
    (('a.jpg', 'cat', '0.5', '0.5', '', '', '0.2', '0.9', '', ''), 'is inverted'),
    (('a.jpg', 'cat', '0.5', '0.5', '', '', '0.5', '0.9', '', ''), 'no width'),
    (('a.jpg', 'cat', 'left', '0.5', '', '', '0.6', '0.9', '', ''), 'are not all numbers'),
    (('a.jpg', '', '0.1', '0.5', '', '', '0.6', '0.9', '', ''), 'needs a label'),
    (('a.jpg', 'cat', '0.1', '0.5', '', '', '', '', '', ''), 'at least two vertices'),
])
def test_automl_detection_rows_with_a_box_that_cannot_be_used_are_refused(cells, message):
  with pytest.raises(Rejected, match=message):
    _item(*cells)
