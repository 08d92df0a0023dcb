"""COCO and Pascal VOC files read into annotations; each unusable entry a Problem, the rest kept."""
import json

import pytest

from beam_pipeline.core.inputs.annotations import (COCO, VOC, AnnotatedObject, ImageAnnotation, Problem, format_of,
                                            parse_coco, parse_voc)
from beam_pipeline.core.rejections import InputFileError


def _coco(**changes) -> dict:
  document = {
      'images': [{'id': 1, 'file_name': 'b/two.jpg', 'width': 640, 'height': 480},
                 {'id': 2, 'file_name': 'a/one.jpg', 'width': 100, 'height': 50},
                 {'id': 3, 'file_name': 'c/empty.jpg', 'width': 30, 'height': 20}],
      'annotations': [{'id': 12, 'image_id': 1, 'category_id': 2, 'bbox': [10, 20, 30, 40], 'area': 900.5,
                       'iscrowd': 1, 'segmentation': {'counts': 'x', 'size': [480, 640]}},
                      {'id': 11, 'image_id': 1, 'category_id': 1, 'bbox': [0.5, 1.5, 2, 3], 'iscrowd': 0},
                      {'id': 13, 'image_id': 2, 'category_id': 1, 'bbox': [1, 2, 3, 4], 'area': 10}],
      'categories': [{'id': 1, 'name': 'cat'}, {'id': 2, 'name': 'dog'}],
  }
  document.update(changes)
  return document


def _parsed(document: dict) -> list:
  return list(parse_coco(json.dumps(document).encode()))


def test_coco_images_sorted_by_file_name_objects_in_id_order_and_negatives_kept():
  assert _parsed(_coco()) == [
      ImageAnnotation('a/one.jpg', 100, 50, (AnnotatedObject('cat', 1, 2, 4, 6, 10, where='annotation id 13'),),
                      'image id 2'),
      ImageAnnotation('b/two.jpg', 640, 480, (
          AnnotatedObject('cat', 0.5, 1.5, 2.5, 4.5, 6.0, where='annotation id 11'),
          AnnotatedObject('dog', 10, 20, 40, 60, 900.5, is_crowd=1, where='annotation id 12',
                          segmentation={'counts': 'x', 'size': [480, 640]})), 'image id 1'),
      ImageAnnotation('c/empty.jpg', 30, 20, (), 'image id 3')]


@pytest.mark.parametrize('change, detail', [
    ({'image_id': 9}, 'refers to image id 9, which the file does not list'),
    ({'category_id': 4}, 'refers to category id 4, which the file does not list'),
    ({'bbox': [10, 20, 0, 5]}, 'box [10, 20, 0, 5] has zero width'),
    ({'bbox': [10, 20, 5, 0]}, 'box [10, 20, 5, 0] has zero height'),
    ({'bbox': [10, 20, -3, 5]}, 'box [10, 20, -3, 5] has negative width'),
    ({'bbox': [10, 20, 5, -1.5]}, 'box [10, 20, 5, -1.5] has negative height'),
    ({'bbox': [10, 20, 5]}, 'bbox [10, 20, 5] is not 4 finite numbers [x, y, width, height]'),
    ({'bbox': [10, '20', 5, 5]}, 'bbox [10, "20", 5, 5] is not 4 finite numbers [x, y, width, height]'),
    ({'bbox': None}, 'bbox null is not 4 finite numbers [x, y, width, height]'),
])
def test_each_unusable_coco_annotation_is_one_problem_and_the_rest_is_kept(change, detail):
  document = _coco()
  document['annotations'][0].update(change)
  parsed = _parsed(document)
  assert [item for item in parsed if isinstance(item, Problem)] == [Problem('annotation id 12', detail)]
  images = {item.name: [obj.where for obj in item.objects] for item in parsed if isinstance(item, ImageAnnotation)}
  assert images == {'a/one.jpg': ['annotation id 13'], 'b/two.jpg': ['annotation id 11'], 'c/empty.jpg': []}


@pytest.mark.parametrize('given, expected', [
    (None, 0), (0, 0), (1, 1), (True, 1), (False, 0), (1.0, 1), ('1', 1), ('0', 0), (' 1 ', 1)])
def test_coco_iscrowd_is_0_or_1(given, expected):
  document = _coco()
  document['annotations'][0]['iscrowd'] = given
  objects = [obj for item in _parsed(document) if isinstance(item, ImageAnnotation) for obj in item.objects]
  assert [obj.is_crowd for obj in objects if obj.where == 'annotation id 12'] == [expected]


@pytest.mark.parametrize('given', ['yes', 2, -1, 0.5, '', [], {'crowd': 1}])
def test_coco_iscrowd_that_is_not_0_or_1_is_a_problem_and_leaves_the_object_out(given):
  """'yes' used to become 0: a crowd region a detector is then trained to find as one object."""
  document = _coco()
  document['annotations'][0]['iscrowd'] = given
  parsed = _parsed(document)
  assert [item for item in parsed if isinstance(item, Problem)] == [
      Problem('annotation id 12', f'iscrowd {json.dumps(given)} is not 0 or 1')]
  assert [obj.where for item in parsed if isinstance(item, ImageAnnotation) for obj in item.objects] == [
      'annotation id 13', 'annotation id 11']


@pytest.mark.parametrize('area', [None, 'x', -5, 0, float('inf'), float('nan')])
def test_a_coco_area_missing_or_unusable_is_the_boxs_own(area):
  document = _coco()
  document['annotations'][2]['area'] = area
  first = next(item for item in _parsed(document) if isinstance(item, ImageAnnotation))
  assert first.objects[0].area == 3 * 4


def test_non_finite_coco_box_is_a_problem():
  data = json.dumps(_coco()).replace('[10, 20, 30, 40]', '[10, 20, NaN, 40]').encode()
  assert [item for item in parse_coco(data) if isinstance(item, Problem)] == [
      Problem('annotation id 12', 'bbox [10, 20, NaN, 40] is not 4 finite numbers [x, y, width, height]')]


def test_coco_image_without_file_name_and_duplicate_image_id_are_problems():
  document = _coco()
  document['images'][2].pop('file_name')
  document['annotations'].append({'id': 14, 'image_id': 3, 'category_id': 1, 'bbox': [1, 2, 3, 4]})
  document['images'].append({'id': 1, 'file_name': 'again.jpg', 'width': 1, 'height': 1})
  parsed = _parsed(document)
  assert [item for item in parsed if isinstance(item, Problem)] == [
      Problem('image id 3', 'has no file_name; it and its annotations are left out'),
      Problem('image id 1', "appears again (file_name 'again.jpg'); the first entry is kept")]
  assert [item.name for item in parsed if isinstance(item, ImageAnnotation)] == ['a/one.jpg', 'b/two.jpg']


def test_coco_category_without_a_name_is_a_problem():
  parsed = _parsed(_coco(categories=[{'id': 1, 'name': 'cat'}, {'id': 2, 'name': ''}]))
  assert [item for item in parsed if isinstance(item, Problem)] == [
      Problem('category id 2', 'has no name'),
      Problem('annotation id 12', 'refers to category id 2, which has no name')]


_SHAPE = 'give a COCO instances file: a JSON object with the lists images, annotations and categories'


@pytest.mark.parametrize('data, message', [
    (b'[1, 2]', f'is not a COCO instances file: its JSON is an array, not an object; {_SHAPE}'),
    (b'{"annotations": []}', f"is not a COCO instances file: it has no 'images', not a list; {_SHAPE}"),
    (b'{"images": {}}', f"is not a COCO instances file: it has an object as its 'images', not a list; {_SHAPE}"),
    (b'{"images": [], "annotations": 3}',
     f"is not a COCO instances file: it has a number as its 'annotations', not a list; {_SHAPE}"),
    (b'{"images": [], "categories": null}',
     f"is not a COCO instances file: it has null as its 'categories', not a list; {_SHAPE}"),
    (b'{"images": [', 'is not valid JSON (Expecting value: line 1 column 13 (char 12)); fix it, or export it again'),
    (b'\xff\xfe{', 'is not valid JSON ('),
])
def test_a_file_that_is_not_coco_raises_its_cause_and_fix_in_one_line(data, message):
  """The user's to fix: an InputFileError, which the command reports as such (exit 2)."""
  with pytest.raises(InputFileError) as raised:
    list(parse_coco(data))
  assert str(raised.value).startswith(message) and '\n' not in str(raised.value)


_VOC = b"""<annotation>
  <folder>VOC2007</folder>
  <filename> 000005.jpg </filename>
  <size><width>500</width><height>375</height><depth>3</depth></size>
  <object><name> chair </name><pose>Rear</pose><truncated>0</truncated><difficult>1</difficult>
    <bndbox><xmin>263</xmin><ymin>211</ymin><xmax>324</xmax><ymax>339</ymax></bndbox></object>
  <object><name>chair</name><bndbox><xmin>5</xmin><ymin>2.5</ymin><xmax>5</xmax><ymax>9</ymax></bndbox></object>
  <object><name>person</name><pose>Unspecified</pose><truncated>1</truncated>
    <bndbox><xmin>1.5</xmin><ymin>2</ymin><xmax>10</xmax><ymax>20.5</ymax></bndbox></object>
  <object><name>dog</name><bndbox><xmin>a</xmin><ymin>2</ymin><xmax>10</xmax><ymax>20</ymax></bndbox></object>
  <object><name></name><bndbox><xmin>1</xmin><ymin>2</ymin><xmax>10</xmax><ymax>20</ymax></bndbox></object>
  <object><name>dog</name><bndbox><xmin>1</xmin><ymin>2</ymin><xmax>10</xmax></bndbox></object>
</annotation>"""


def test_voc_file_parsed_as_given_and_bad_objects_left_out_with_a_problem_each():
  annotation, problems = parse_voc(_VOC, '000005.xml')
  assert annotation == ImageAnnotation('000005.jpg', 500, 375, (
      AnnotatedObject('chair', 263, 211, 324, 339, 61 * 128, difficult=1, where='object 1'),
      AnnotatedObject('person', 1.5, 2, 10, 20.5, 8.5 * 18.5, truncated=1, where='object 3')), '000005.xml')
  assert problems == [Problem('000005.xml object 2', 'box [5, 2.5, 5, 9] (xmin, ymin, xmax, ymax) has zero width'),
                      Problem('000005.xml object 4', "<xmin> 'a' is not a number"),
                      Problem('000005.xml object 5', 'has no <name>'),
                      Problem('000005.xml object 6', 'has no <bndbox><ymax>')]


@pytest.mark.parametrize('difficult, truncated, expected', [
    ('0', '1', (0, 1)), ('1', '0', (1, 0)), (' 1 ', '0.0', (1, 0)), ('true', 'False', (1, 0)), ('', None, (0, 0)),
    (None, None, (0, 0))])
def test_voc_flags_are_0_or_1(difficult, truncated, expected):
  tags = ''.join(f'<{key}>{value}</{key}>' for key, value in (('difficult', difficult), ('truncated', truncated))
                 if value is not None)
  data = (f'<annotation><filename>x.jpg</filename><object><name>dog</name>{tags}<bndbox><xmin>1</xmin>'
          f'<ymin>2</ymin><xmax>10</xmax><ymax>20</ymax></bndbox></object></annotation>').encode()
  annotation, problems = parse_voc(data, 'x.xml')
  assert problems == [] and [(obj.difficult, obj.truncated) for obj in annotation.objects] == [expected]


@pytest.mark.parametrize('key, value', [('difficult', 'yes'), ('truncated', '2'), ('difficult', 'Unspecified')])
def test_a_voc_flag_that_is_not_0_or_1_is_a_problem_and_leaves_the_object_out(key, value):
  """'yes' used to become 0, '2' 1: neither is what the file says."""
  data = (f'<annotation><filename>x.jpg</filename><object><name>dog</name><{key}>{value}</{key}><bndbox>'
          f'<xmin>1</xmin><ymin>2</ymin><xmax>10</xmax><ymax>20</ymax></bndbox></object>'
          f'<object><name>cat</name><bndbox><xmin>1</xmin><ymin>2</ymin><xmax>10</xmax><ymax>20</ymax></bndbox>'
          f'</object></annotation>').encode()
  annotation, problems = parse_voc(data, 'x.xml')
  assert problems == [Problem('x.xml object 1', f'<{key}> {value!r} is not 0 or 1')]
  assert [obj.label for obj in annotation.objects] == ['cat']


def test_voc_without_size_has_no_width_or_height():
  annotation, problems = parse_voc(b'<annotation><filename>x.png</filename></annotation>', 'x.xml')
  assert (annotation, problems) == (ImageAnnotation('x.png', None, None, (), 'x.xml'), [])


@pytest.mark.parametrize('data, detail', [
    (b'<annotation><filename>x.jpg</filename>', 'is not well-formed XML (no element found: line 1, column 38)'),
    (b'<annotation><folder>f</folder></annotation>', 'has no <filename>'),
    (b'<svg><filename>x.jpg</filename></svg>', 'is not a VOC annotation (its root is <svg>)'),
])
def test_unusable_voc_file_is_one_problem(data, detail):
  assert parse_voc(data, 'x.xml') == (None, [Problem('x.xml', detail)])


@pytest.mark.parametrize('path, head, expected', [
    ('instances_val2017.json', b'  \n{"images": []}', COCO),
    ('gs://bucket/annotations', b'\xef\xbb\xbf{', COCO),
    ('Annotations/', b'', VOC),
    ('Annotations/000005.XML', b'<annotation>', VOC),
])
def test_format_of(path, head, expected):
  assert format_of(path, head) == expected


@pytest.mark.parametrize('path, head', [('labels.csv', b'path,label'), ('list.json', b'[{"a": 1}]')])
def test_format_of_anything_else_is_one_line(path, head):
  with pytest.raises(ValueError, match=f'^{path} is neither a COCO JSON file .* or folder of them$'):
    format_of(path, head)


def test_coco_category_names_are_stripped_and_one_that_is_not_one_line_is_a_problem():
  """labels.txt is one class a line: a category named 'li\\nne' (JSON's escape, or &#10; in VOC)
  would be two. Its annotations are left out, each a problem; ' cat ' is the class 'cat'."""
  parsed = _parsed(_coco(categories=[{'id': 1, 'name': ' cat '}, {'id': 2, 'name': 'li\nne'}]))
  assert [item for item in parsed if isinstance(item, Problem)] == [
      Problem('category id 2', "name 'li\\nne' holds a line break (labels.txt is one class a line)"),
      Problem('annotation id 12', 'refers to category id 2, which has no name')]
  assert {obj.label for item in parsed if isinstance(item, ImageAnnotation) for obj in item.objects} == {'cat'}


def test_voc_names_are_stripped_and_one_that_is_not_one_line_is_a_problem():
  data = (b'<annotation><filename>x.png</filename>'
          b'<object><name> li&#10;ne </name><bndbox><xmin>1</xmin><ymin>1</ymin><xmax>5</xmax><ymax>5</ymax></bndbox>'
          b'</object><object><name>\tcat </name><bndbox><xmin>1</xmin><ymin>1</ymin><xmax>5</xmax><ymax>5</ymax>'
          b'</bndbox></object></annotation>')
  annotation, problems = parse_voc(data, 'x.xml')
  assert [obj.label for obj in annotation.objects] == ['cat']
  assert problems == [Problem('x.xml object 1', "<name> 'li\\nne' holds a line break (labels.txt is one class a line)")]
