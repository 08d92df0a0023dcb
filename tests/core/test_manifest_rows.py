"""Manifest rows made into input items, and the reasons a row is refused."""
import pytest

from beam_pipeline.core import manifest_rows
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
