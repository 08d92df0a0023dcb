"""Manifest rows made into input items, and the reasons a row is refused."""
import re

import pytest

from beam_pipeline.core.inputs import annotations, manifest_rows
from beam_pipeline.core.messages import InputItem
from beam_pipeline.core.rejections import Rejected


def _item(*cells: str) -> InputItem:
  return manifest_rows.csv_row_item('gs://b/m.csv', None, list(cells))


def test_automl_rows_with_and_without_a_set_value():
  assert _item('TRAIN', 'imgs/a.jpg', 'apple') == InputItem('gs://b/imgs/a.jpg', 'apple', 'train')
  assert _item('unassigned', 'imgs/a.jpg', 'apple') == InputItem('gs://b/imgs/a.jpg', 'apple', None)
  assert _item('imgs/a.jpg', 'apple') == InputItem('gs://b/imgs/a.jpg', 'apple', None)


@pytest.mark.parametrize('value, split', [('VAL', 'validation'), ('dev', 'validation'), ('Valid', 'validation'),
                                          ('Training', 'train'), ('testing', 'test'), ('VALIDATION', 'validation')])
def test_a_split_is_read_by_the_words_split_folders_and_splits_take(value, split):
  assert _item(value, 'imgs/a.jpg', 'apple').split == split
  assert manifest_rows.jsonl_line_item('gs://b/m.jsonl', f'{{"uri": "a.jpg", "split": "{value}"}}').split == split


@pytest.mark.parametrize('cells, message', [
    (('FOO', 'imgs/a.jpg', 'apple'), "set value 'FOO' is not one of train (training), validation (valid, val, "
                                     "dev), test (testing), unassigned"),
    (('imgs/a.jpg', 'apple', 'pear'), "row has 2 labels ['apple', 'pear']; one label per image is supported: "
                                      "use --multi_label"),
    (('TRAIN', '', 'apple'), 'row has no image uri'),
])
def test_a_row_that_names_no_usable_input_says_why(cells, message):
  with pytest.raises(Rejected) as raised:
    _item(*cells)
  assert raised.value.detail == message


def test_automl_detection_rows_give_one_normalized_box_or_none():
  row = ['TEST', 'a.jpg', 'cat', '0.1', '0.2', '', '', '0.5', '0.6', '', '']
  two = manifest_rows.csv_row_item('gs://b/m.csv', None, row, 'm.csv:row 4')
  [box] = two.objects
  assert (two.uri, two.split, two.label, two.annotated_size) == ('gs://b/a.jpg', 'test', None, annotations.NORMALIZED)
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


def _multi(*cells: str) -> InputItem:
  return manifest_rows.csv_row_item('gs://b/m.csv', None, list(cells), 'm.csv:row 1', multi_label=True)


def test_multi_label_automl_rows_keep_every_label_once_in_the_rows_order():
  assert _multi('TRAIN', 'a.jpg', 'pear', ' apple', 'pear', '') == InputItem(
      'gs://b/a.jpg', 'pear', 'train', labels=('pear', 'apple'))
  # Four cells and more are labels, not a detection row's vertices.
  many = _multi('a.jpg', 'd', 'c', 'b', 'a')
  assert (many.label, many.labels, many.objects) == ('d', ('d', 'c', 'b', 'a'), ())
  assert _multi('a.jpg', 'cat') == InputItem('gs://b/a.jpg', 'cat', None, labels=('cat',))
  assert _multi('VALIDATION', 'a.jpg') == InputItem('gs://b/a.jpg', None, 'validation')


def test_multi_label_json_lines_take_a_list_as_label_or_labels():
  def item(line: str, multi_label: bool = True) -> InputItem:
    return manifest_rows.jsonl_line_item('gs://b/m.jsonl', line, multi_label)

  assert item('{"uri": "a.jpg", "label": ["dog", "cat", "dog"], "split": "test", "k": 1}') == InputItem(
      'gs://b/a.jpg', 'dog', 'test', (('k', 1),), labels=('dog', 'cat'))
  assert item('{"uri": "a.jpg", "labels": ["cat"]}').labels == ('cat',)
  assert item('{"uri": "a.jpg", "label": "cat"}').labels == ('cat',)
  assert item('{"uri": "a.jpg", "labels": []}') == InputItem('gs://b/a.jpg')
  # Without --multi_label a list of one label is that label, and "labels" an ordinary field.
  assert item('{"uri": "a.jpg", "label": ["cat"]}', False) == InputItem('gs://b/a.jpg', 'cat')
  assert item('{"uri": "a.jpg", "labels": "x"}', False).extras == (('labels', 'x'),)


@pytest.mark.parametrize('line, multi_label, message', [
    ('{"uri": "a.jpg", "label": ["cat", "dog"]}', False,
     "row has 2 labels ['cat', 'dog']; one label per image is supported: use --multi_label"),
    ('{"uri": "a.jpg", "labels": ["cat", "dog"]}', False,
     "row has 2 labels ['cat', 'dog']; one label per image is supported: use --multi_label"),
    ('{"uri": "a.jpg", "labels": ["cat", 3]}', True, "labels ['cat', 3] are not all strings"),
])
def test_json_lines_with_labels_that_cannot_be_used_say_why(line, multi_label, message):
  with pytest.raises(Rejected) as raised:
    manifest_rows.jsonl_line_item('gs://b/m.jsonl', line, multi_label)
  assert raised.value.detail == message


def test_a_row_of_several_labels_read_as_a_box_points_to_multi_label():
  with pytest.raises(Rejected) as raised:
    _item('a.jpg', 'cat', 'dog', 'eel')
  assert raised.value.detail.endswith('(several labels in a row need --multi_label)')


@pytest.mark.parametrize('row, label', [
    (('imgs/a.jpg',), None),  # no label column: an unlabelled row
    (('imgs/a.jpg', ''), ''),  # an empty label cell: no label (labels.label_for rejects it)
    (('imgs/a.jpg', ' '), ''),
    (('TRAIN', 'imgs/a.jpg', ''), ''),
    (('imgs/a.jpg', ' dog '), 'dog'),
    (('imgs/a.jpg', 'null'), ''),  # what a DataFrame's None is in JSON, and SQL and pandas write for none
    (('imgs/a.jpg', 'NaN'), ''),
])
def test_an_empty_label_cell_is_told_from_no_label_column(row, label):
  assert _item(*row).label == label
  header = ['uri', 'label'][:len(row)] if row[0] != 'TRAIN' else ['set', 'uri', 'label']
  assert manifest_rows.csv_row_item('gs://b/m.csv', header, list(row)).label == label


@pytest.mark.parametrize('line, label', [
    ('{"uri": "a.jpg"}', None),
    ('{"uri": "a.jpg", "label": null}', ''),
    ('{"uri": "a.jpg", "label": ""}', ''),
    ('{"uri": "a.jpg", "label": []}', ''),
    ('{"uri": "a.jpg", "label": " dog "}', 'dog'),
    ('{"uri": "a.jpg", "label": 3}', '3'),  # a whole number is its digits, as before
    ('{"uri": "a.jpg", "class": -2}', '-2'),
    ('{"uri": "a.jpg", "label": 3.0}', '3'),  # a DataFrame's whole numbers, made floats beside a missing one
    ('{"uri": "a.jpg", "label": NaN}', ''),  # one missing label: no label, as null is
    ('{"uri": "a.jpg", "label": "null"}', ''),
])
def test_json_labels_are_text_or_whole_numbers(line, label):
  assert manifest_rows.jsonl_line_item('gs://b/m.jsonl', line).label == label


@pytest.mark.parametrize('value, kind', [
    ('{"a": 1}', 'an object'), ('true', 'true or false'), ('false', 'true or false'),
    ('1.5', 'a number with a fraction'), ('-0.25', 'a number with a fraction'),
])
def test_a_json_label_that_is_not_text_is_a_bad_row_naming_its_type(value, kind):
  for multi_label in (False, True):
    with pytest.raises(Rejected) as raised:
      manifest_rows.jsonl_line_item('gs://b/m.jsonl', f'{{"uri": "a.jpg", "label": {value}}}', multi_label)
    assert (raised.value.reason, raised.value.detail) == (
        'bad_manifest_row', f'label {value} is {kind}, not text or a whole number')


@pytest.mark.parametrize('label, why', [('li\nne', 'holds a line break'), ('a\x00b', 'control character U+0000'),
                                        (' \x0b ', 'needs a label')])
def test_an_automl_box_label_that_is_not_one_line_is_a_bad_row(label, why):
  with pytest.raises(Rejected, match=re.escape(why)) as raised:
    _item('a.jpg', label, '0.1', '0.2', '', '', '0.5', '0.6', '', '')
  assert raised.value.reason == 'bad_manifest_row'


def test_an_automl_box_label_is_stripped():
  assert _item('a.jpg', ' cat ', '0.1', '0.2', '', '', '0.5', '0.6', '', '').objects[0].label == 'cat'
