"""Object-detection annotations read from COCO JSON and Pascal VOC XML files.

An annotation that cannot be used becomes a Problem in plain words and is left out, so one
bad box costs that box and not the whole dataset; only a file that is not of its format at
all raises. Boxes stay in the pixels of the image they were made on: boxes.py moves them.
"""
import json
import math
import xml.etree.ElementTree as ElementTree
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Tuple, Union

from beam_pipeline.core.inputs import class_names
from beam_pipeline.core.rejections import InputFileError


# The annotated size of boxes given normalized (AutoML Vision's CSV), on the file's frame.
NORMALIZED = (0, 0)


class AnnotatedObject(NamedTuple):
  label: str
  xmin: float  # pixels of the image the annotation was made on (ImageAnnotation.width, height)
  ymin: float
  xmax: float
  ymax: float
  area: float = 0.0  # pixels squared: COCO's 'area' when given and positive, else the box's (boxes.py clips it)
  is_crowd: int = 0
  difficult: int = 0
  truncated: int = 0
  where: str = ''  # 'annotation id 17' (COCO) or 'object 2' (VOC, 1-based)
  segmentation: Any = None  # COCO's: polygons [[x, y, ...], ...] or RLE {'size', 'counts'}, in the same pixels


class ImageAnnotation(NamedTuple):
  name: str  # the image's path as the file gives it, relative to the images' root
  width: Optional[int]  # the size the annotations were made on, when the file says
  height: Optional[int]
  objects: Tuple[AnnotatedObject, ...]
  where: str = ''  # 'image id 3' (COCO) or the VOC file's name


class Problem(NamedTuple):
  where: str
  detail: str  # one line in plain words


COCO, VOC = 'coco', 'voc'


def format_of(path: str, head: bytes) -> str:
  """COCO for a JSON object, VOC for a folder (a trailing '/') or an .xml file: the choice
  is made once per input, so that a wrong input fails in one line before any image is read."""
  if path.endswith(('/', '\\')):
    return VOC
  if head.lstrip(b'\xef\xbb\xbf \t\r\n').startswith(b'{'):
    return COCO
  if path.lower().endswith('.xml'):
    return VOC
  raise ValueError(f'{path} is neither a COCO JSON file (an object, starting with "{{") '
                   'nor a Pascal VOC .xml file or folder of them')


def _number(value: Any) -> Optional[float]:
  """A finite number as a float; None for anything else (bool, text, NaN)."""
  if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
    return None
  return float(value)


def _size(value: Any) -> Optional[int]:
  number = _number(value)
  return int(number) if number is not None and number > 0 and number == int(number) else None


def _flag(value: Any) -> Optional[int]:
  """A 0/1 flag (iscrowd, difficult, truncated) as 0 or 1: None when missing (0), a bool, a
  number 0 or 1, or such a number as text ('1', '0.0'; 'true' and 'false' too, as XML writes
  bools); None for anything else ('yes', 2), which must not silently become 0."""
  if value is None or isinstance(value, bool):
    return int(bool(value))
  if isinstance(value, str):
    text = value.strip().lower()
    if text in ('true', 'false'):
      return int(text == 'true')
    try:
      value = float(text)
    except ValueError:
      return None
  number = _number(value)
  return int(number) if number in (0.0, 1.0) else None


def _shape_problem(width: float, height: float) -> Optional[str]:
  """Why a box of this width and height holds nothing, or None."""
  for side, length in (('width', width), ('height', height)):
    if length <= 0:
      return f'has {"zero" if length == 0 else "negative"} {side}'
  return None


# What a COCO instances file must be as a whole: the fix an InputFileError names.
_COCO_SHAPE = 'give a COCO instances file: a JSON object with the lists images, annotations and categories'
_JSON_KINDS = {list: 'an array', str: 'a string', int: 'a number', float: 'a number', bool: 'true or false',
               type(None): 'null', dict: 'an object'}


def _list(document: Dict[str, Any], key: str, required: bool) -> List[Any]:
  value = document.get(key, None if required else [])
  if not isinstance(value, list):
    found = 'no' if key not in document else f'{_JSON_KINDS[type(value)]} as its'
    raise InputFileError(f'is not a COCO instances file: it has {found} {key!r}, not a list; {_COCO_SHAPE}')
  return value


def coco_document(data: bytes) -> Dict[str, Any]:
  """A COCO file's JSON object, its lists checked. InputFileError, its cause and fix in one
  line, for a file that is not a COCO instances file as a whole: the user's to fix, as no entry
  of it can be used; each entry that cannot is a Problem of parse_coco."""
  try:
    document = json.loads(data)
  except ValueError as e:  # UnicodeDecodeError too
    raise InputFileError(f'is not valid JSON ({str(e).splitlines()[0]}); fix it, or export it again') from None
  if not isinstance(document, dict):
    raise InputFileError(f'is not a COCO instances file: its JSON is {_JSON_KINDS[type(document)]}, not an '
                         f'object; {_COCO_SHAPE}')
  for key, required in (('images', True), ('annotations', False), ('categories', False)):
    _list(document, key, required)
  return document


def parse_coco(data: bytes) -> Iterator[Union[ImageAnnotation, Problem]]:
  """Every image, sorted by file_name (those without annotations too: they are negatives),
  its objects in annotation-id order; a Problem for each entry left out. InputFileError
  (coco_document) before anything is yielded, for a file that is not COCO as a whole."""
  document = coco_document(data)
  images, annotations = _list(document, 'images', True), _list(document, 'annotations', False)
  categories: Dict[Any, Optional[str]] = {}  # None: listed without a usable name
  for category in _list(document, 'categories', False):
    category = category if isinstance(category, dict) else {}
    name, where = category.get('name'), f'category id {category.get("id")}'
    if category.get('id') in categories:
      yield Problem(where, f'appears again (as {name!r}); the first entry is kept')
      continue
    categories[category.get('id')], problem = _category_name(name)
    if problem:
      yield Problem(where, problem)
  entries: Dict[Any, Optional[Tuple[str, Optional[int], Optional[int]]]] = {}  # None: without a file_name
  for image in images:
    image = image if isinstance(image, dict) else {}
    name, where = image.get('file_name'), f'image id {image.get("id")}'
    if image.get('id') in entries:
      yield Problem(where, f'appears again (file_name {name!r}); the first entry is kept')
      continue
    entries[image.get('id')] = (name, _size(image.get('width')), _size(image.get('height'))) if (
        isinstance(name, str) and name) else None
    if entries[image.get('id')] is None:
      yield Problem(where, 'has no file_name; it and its annotations are left out')
  objects: Dict[Any, List[AnnotatedObject]] = {key: [] for key in entries}
  dicts = (annotation if isinstance(annotation, dict) else {} for annotation in annotations)
  for annotation in sorted(dicts, key=lambda annotation: _id_order(annotation.get('id'))):
    found = _coco_object(annotation, entries, categories)
    if isinstance(found, AnnotatedObject):
      objects[annotation['image_id']].append(found)
    elif entries.get(annotation.get('image_id'), ()) is not None:  # not one of an image left out already
      yield found
  usable = ((key, entry) for key, entry in entries.items() if entry is not None)
  for key, (name, width, height) in sorted(usable, key=lambda item: item[1][0]):
    yield ImageAnnotation(name, width, height, tuple(objects[key]), f'image id {key}')


def _category_name(name: Any) -> Tuple[Optional[str], Optional[str]]:
  """(the class a category's name gives, None if none) and why it gives none."""
  if name in (None, ''):
    return None, 'has no name'
  if not isinstance(name, str):
    return None, f'name {name!r} is not text'
  try:
    return class_names.class_name(name), None
  except class_names.BadClassName as e:
    return None, f'name {name!r} {e}'


def _id_order(value: Any) -> Tuple[bool, Any]:
  """Numeric ids in numeric order; any others (not COCO, but seen) after them, as text."""
  return (False, value) if _number(value) is not None else (True, str(value))


def _coco_object(annotation: Dict[str, Any], images: Dict[Any, Any],
                 categories: Dict[Any, Optional[str]]) -> Union[AnnotatedObject, Problem]:
  where = f'annotation id {annotation.get("id")}'
  if images.get(annotation.get('image_id')) is None:
    return Problem(where, f'refers to image id {annotation.get("image_id")}, which the file does not list')
  if categories.get(annotation.get('category_id')) is None:
    listed = 'has no name' if annotation.get('category_id') in categories else 'the file does not list'
    return Problem(where, f'refers to category id {annotation.get("category_id")}, which {listed}')
  bbox = annotation.get('bbox')
  numbers = [_number(value) for value in bbox] if isinstance(bbox, list) else []
  if len(numbers) != 4 or None in numbers:
    return Problem(where, f'bbox {json.dumps(bbox)} is not 4 finite numbers [x, y, width, height]')
  x, y, width, height = numbers
  shape = _shape_problem(width, height)
  if shape:
    return Problem(where, f'box {json.dumps(bbox)} {shape}')
  is_crowd = _flag(annotation.get('iscrowd'))
  if is_crowd is None:
    return Problem(where, f'iscrowd {json.dumps(annotation.get("iscrowd"))} is not 0 or 1')
  area = _number(annotation.get('area')) or 0.0
  return AnnotatedObject(categories[annotation['category_id']], x, y, x + width, y + height,
                         area if area > 0 else width * height, is_crowd,
                         where=where, segmentation=annotation.get('segmentation') or None)


def parse_voc(data: bytes, name: str) -> Tuple[Optional[ImageAnnotation], List[Problem]]:
  """One VOC file's image (None if the file is unusable) and the problems of the file or of
  objects left out. Coordinates are stored as given: VOC's 1-based inclusive pixels are not
  shifted, as tools disagree on them and a pixel's difference is within any labeller's aim."""
  try:
    root = ElementTree.fromstring(data)
  except ElementTree.ParseError as e:
    return None, [Problem(name, f'is not well-formed XML ({e})')]
  filename = (root.findtext('filename') or '').strip()
  if root.tag != 'annotation' or not filename:
    detail = 'has no <filename>' if root.tag == 'annotation' else f'is not a VOC annotation (its root is <{root.tag}>)'
    return None, [Problem(name, detail)]
  problems, sizes = [], []
  for side in ('width', 'height'):
    text = root.findtext(f'size/{side}')
    sizes.append(_size(_voc_number(text)) if text is not None else None)
    if text is not None and sizes[-1] is None:
      problems.append(Problem(name, f'<size><{side}> {text.strip()!r} is not a positive whole number; ignored'))
  objects = []
  for index, element in enumerate(root.findall('object'), 1):
    found = _voc_object(element, f'object {index}')
    if isinstance(found, str):
      problems.append(Problem(f'{name} object {index}', found))
    else:
      objects.append(found)
  return ImageAnnotation(filename, sizes[0], sizes[1], tuple(objects), name), problems


def _voc_number(text: Optional[str]) -> Optional[float]:
  try:
    return _number(float((text or '').strip()))
  except ValueError:
    return None


def _voc_object(element: ElementTree.Element, where: str) -> Union[AnnotatedObject, str]:
  """The object, or why it is left out."""
  label = (element.findtext('name') or '').strip()
  if not label:
    return 'has no <name>'
  try:
    label = class_names.class_name(label)
  except class_names.BadClassName as e:
    return f'<name> {label!r} {e}'
  coordinates = []
  for key in ('xmin', 'ymin', 'xmax', 'ymax'):
    text = element.findtext(f'bndbox/{key}')
    if text is None:
      return f'has no <bndbox><{key}>'
    coordinates.append(_voc_number(text))
    if coordinates[-1] is None:
      return f'<{key}> {text.strip()!r} is not a number'
  xmin, ymin, xmax, ymax = coordinates
  shape = _shape_problem(xmax - xmin, ymax - ymin)
  if shape:
    box = ', '.join(f'{value:g}' for value in coordinates)
    return f'box [{box}] (xmin, ymin, xmax, ymax) {shape}'
  flags = []
  for key in ('difficult', 'truncated'):
    text = element.findtext(key)
    flags.append(_flag(text.strip() or None if text is not None else None))
    if flags[-1] is None:
      return f'<{key}> {text.strip()!r} is not 0 or 1'
  return AnnotatedObject(label, xmin, ymin, xmax, ymax, (xmax - xmin) * (ymax - ymin), 0, *flags, where)
