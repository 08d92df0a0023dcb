"""Manifest rows made into input items: AutoML Vision's CSV layouts ([set,]uri[,label], and
its object detection's [set,]uri[,label,x_min,y_min,,,x_max,y_max,,], one box a row), CSV
with a header, and JSON Lines; a row that names no usable input is Rejected with the reason.
With --multi_label (``multi_label``), a header-less AutoML row may name several labels
([set,]uri,label1,label2,...) and a JSON line a list of them ("label" or "labels"): each
counts once, in the row's order (InputItem.labels).

Plain functions of one row, free of Beam: the Beam side (pipeline/listing/parts.py) reads the
manifest, in parts, and hands each row here behind the isolation boundary.
"""
import functools
import json
import math
import re
from typing import Any, Callable, Dict, List, Optional, Tuple

from beam_pipeline.core import isolation, rejections, split_names, uris
from beam_pipeline.core.inputs import annotations, class_names
from beam_pipeline.core.inputs.annotations import AnnotatedObject
from beam_pipeline.core.messages import InputItem
from beam_pipeline.core.rejections import Rejected
from beam_pipeline.core.settings import CSV, InputSpec

# The set values a row may give: AutoML Vision's ML_USE (TRAIN, VALIDATION, TEST; UNASSIGNED leaves
# the choice to the split rules) and the words --splits and split folders take (split_names).
_SET_VALUES = f'{split_names.ACCEPTED}, {split_names.UNASSIGNED}'
# What a set value looks like: a word, without the dots and slashes of a path.
_SET_VALUE = re.compile(r'[A-Za-z_]+')
_URI_COLUMNS = ('uri', 'image_uri', 'gcs_file_path', 'path', 'image_path', 'image', 'filename', 'file')
_LABEL_COLUMNS = ('label', 'class', 'category')
_SPLIT_COLUMNS = ('split', 'set', 'ml_use')


def csv_row_item(manifest: str, header: Optional[List[str]], row: List[str], where: str = '',
                 multi_label: bool = False) -> InputItem:
  """The item of one CSV row.

  Args:
    manifest: the manifest's path, which a relative uri in it is resolved against.
    header: the manifest's column names, lowercased, if its first row names them; None for AutoML Vision's layouts.
    row: the row's cells.
    where: names the row ('m.csv:row 3'), for the errors of its box.
    multi_label: --multi_label: the item keeps a list of labels (InputItem.labels), and a header-less row may
      name several.
  """
  isolation.fault_point(isolation.LIST)
  _check_text(''.join(row))
  if header:
    return _csv_item(manifest, header, row, multi_label)
  return _automl_item(manifest, row, where, multi_label)


def row_name(manifest: str, csv: bool, number: int) -> str:
  """How the errors file names a manifest's row: 'm.csv:row 3' (a CSV row may span lines), 'm.jsonl:line 3'."""
  return f'{manifest}:{"row" if csv else "line"} {number}'


def row_names(spec: InputSpec) -> Optional[Callable[[int], str]]:
  """row_name for the rows of the manifest ``spec`` names; None for an input that is no manifest."""
  return functools.partial(row_name, spec.path, spec.kind == CSV) if spec.is_manifest else None


def is_detection_row(row: List[str]) -> bool:
  """Whether a header-less row is in AutoML Vision's object-detection layout: more cells than
  [set,]uri,label, the vertices of a box."""
  cells = row[1:] if row and _is_set_value(row[0]) else row
  return len(cells) > 3


def is_header(row) -> bool:
  return any(cell.strip().lower() in _URI_COLUMNS for cell in row)


def _automl_item(manifest: str, row, where: str = '', multi_label: bool = False) -> InputItem:
  """AutoML Vision layout without a header: [set,]uri[,label], or [set,]uri,label and a box's
  vertices (object detection; a row with none is a negative), or with ``multi_label``
  [set,]uri,label1,label2,... The uri is kept as written.

  Args:
    manifest: the manifest's path, which a relative uri is resolved against.
    row: the row's cells.
    where: names the row, for the errors of its box.
    multi_label: --multi_label: the cells after the uri are labels, never a box.
  """
  cells = list(row)
  split = None
  if len(cells) >= 2 and _is_set_value(cells[0]):
    split = split_names.usual(cells[0])
    cells = cells[1:]
  elif len(cells) >= 3 and _SET_VALUE.fullmatch(cells[0].strip()):
    # A bare word before a path is a set value mistyped, not an image named FOO with two labels.
    raise Rejected(rejections.BAD_MANIFEST_ROW, f'set value {cells[0].strip()!r} is not one of {_SET_VALUES}')
  if not cells[0]:
    raise Rejected(rejections.BAD_MANIFEST_ROW, 'row has no image uri')
  if multi_label:
    return _multi_label_item(_resolve_uri(manifest, cells[0]), cells[1:], split)
  if len(cells) > 3:
    return InputItem(_resolve_uri(manifest, cells[0]), None, split, objects=_automl_box(cells[1:], where),
                     annotated_size=annotations.NORMALIZED)
  return InputItem(_resolve_uri(manifest, cells[0]), _one_label(cells[1:]) if len(cells) > 1 else None, split)


def _is_set_value(cell: str) -> bool:
  """Whether a cell names a split (any case), or leaves it unassigned."""
  return split_names.usual(cell) is not None or cell.strip().lower() == split_names.UNASSIGNED


def _one_label(values: List[str]) -> str:
  """The one label of a row without --multi_label, which refuses a row of several; '' if its
  label cells are empty (labels.label_for: no label)."""
  labels = _unique_labels(values)
  if len(labels) > 1:
    raise Rejected(rejections.BAD_MANIFEST_ROW, f'row has {len(labels)} labels {labels}; one label per image is '
                                                f'supported: use --multi_label')
  return labels[0] if labels else ''


# What a label cell says for a missing label, whatever the input: JSON's null, a DataFrame's None
# or NaN (written as null), a CSV's empty cell, or the words pandas and SQL write for them.
MISSING_LABELS = frozenset({'', 'null', 'nan'})


def _missing(text: str) -> bool:
  return text.strip().lower() in MISSING_LABELS


def _label_text(value: Any) -> str:
  """A label value as text: a string stripped, a whole number as its digits ("label": 3 is
  class "3", and so is 3.0, as a DataFrame's whole numbers become floats beside a missing one),
  a missing label (null, NaN, MISSING_LABELS) as ''. Anything else rejects the row, naming its
  type: an object's repr or 'True' names no class anyone meant."""
  if value is None or (isinstance(value, float) and math.isnan(value)):
    return ''
  if isinstance(value, str):
    return '' if _missing(value) else value.strip()
  if isinstance(value, float) and value.is_integer():
    return str(int(value))
  if isinstance(value, int) and not isinstance(value, bool):
    return str(value)
  kind = {bool: 'true or false', float: 'a number with a fraction', dict: 'an object'}.get(type(value),
                                                                                          type(value).__name__)
  raise Rejected(rejections.BAD_MANIFEST_ROW, f'label {json.dumps(value)} is {kind}, not text or a whole number')


def _multi_label_item(uri: str, values: List[str], split: Optional[str],
                      extras: Tuple[Tuple[str, Any], ...] = ()) -> InputItem:
  """The item of a --multi_label row: each of its labels once, in order, the first of them its ``label``.

  Args:
    uri: the image's uri, a relative one resolved against the manifest's folder.
    values: the row's label values, strings all; missing ones (MISSING_LABELS) are left out.
    split: the split the row gives, if any.
    extras: the row's other fields, passed through as features.
  """
  labels = tuple(_unique_labels(values))
  return InputItem(uri, labels[0] if labels else None, split, extras, labels=labels)


def _unique_labels(values: List[Any]) -> List[str]:
  """The label texts of a row, stripped, missing ones (MISSING_LABELS) left out and repeats
  counted once, in order."""
  if not all(isinstance(value, str) for value in values):
    raise Rejected(rejections.BAD_MANIFEST_ROW, f'labels {values} are not all strings')
  return list(dict.fromkeys(value.strip() for value in values if not _missing(value)))


def _automl_box(cells: List[str], where: str) -> Tuple[AnnotatedObject, ...]:
  """The one box of a detection row, label then up to 4 vertices (x, y), normalized: AutoML
  gives two (x_min,y_min,,,x_max,y_max,,) or all four; none makes the image a negative."""
  label, values = cells[0].strip(), [cell.strip() for cell in cells[1:9]]
  if not label and not any(values):
    return ()
  try:
    points = [(float(values[i]), float(values[i + 1])) for i in range(0, len(values) - 1, 2)
              if values[i] or values[i + 1]]
  except ValueError:
    raise Rejected(rejections.BAD_MANIFEST_ROW, f'box vertices {values} are not all numbers (several labels in a '
                                                f'row need --multi_label)') from None
  if not label or len(points) < 2:
    raise Rejected(rejections.BAD_MANIFEST_ROW, 'a box needs a label and at least two vertices (x_min,y_min and '
                                                'x_max,y_max)')
  try:
    label = class_names.class_name(label)
  except class_names.BadClassName as e:
    raise Rejected(rejections.BAD_MANIFEST_ROW, f'box label {label!r} {e}') from None
  xs, ys = [x for x, _ in points], [y for _, y in points]
  if len(points) == 2 and (xs[1] < xs[0] or ys[1] < ys[0]):
    raise Rejected(rejections.BAD_MANIFEST_ROW, f'box {values} is inverted: x_max,y_max comes before x_min,y_min')
  if not all(math.isfinite(v) for v in xs + ys) or max(xs) <= min(xs) or max(ys) <= min(ys):
    raise Rejected(rejections.BAD_MANIFEST_ROW, f'box {values} is empty: it has no width or no height')
  return (AnnotatedObject(label, min(xs), min(ys), max(xs), max(ys), where=where),)


def _csv_item(manifest: str, header, row, multi_label: bool = False) -> InputItem:
  """The item of a CSV row under a header, its cells named by their columns.

  Args:
    manifest: the manifest's path, which a relative uri is resolved against.
    header: the manifest's column names, lowercased.
    row: the row's cells, one for each column.
    multi_label: --multi_label: the item keeps a list of labels (InputItem.labels).
  """
  if len(row) != len(header):
    raise Rejected(rejections.BAD_MANIFEST_ROW, f'row has {len(row)} fields, the header has {len(header)}')
  return _item_from_fields(manifest, dict(zip(header, row)), multi_label)


def jsonl_line_item(manifest: str, line: str, multi_label: bool = False) -> InputItem:
  isolation.fault_point(isolation.LIST)
  _check_text(line)
  try:
    fields = json.loads(line)
  except json.JSONDecodeError as e:
    raise Rejected(rejections.BAD_MANIFEST_ROW, f'invalid JSON: {e}') from None
  if not isinstance(fields, dict):
    raise Rejected(rejections.BAD_MANIFEST_ROW, 'line is not a JSON object')
  return _item_from_fields(manifest, fields, multi_label)


def _item_from_fields(manifest: str, fields: Dict[str, Any], multi_label: bool = False) -> InputItem:
  """A manifest row with named fields: uri, optional label and split, the rest extras. A list
  of labels ("label" or "labels", as JSON gives it) needs ``multi_label``."""
  fields = dict(fields)
  uri = _pop_first(fields, _URI_COLUMNS)
  if not isinstance(uri, str) or not uri:
    raise Rejected(rejections.BAD_MANIFEST_ROW, f'row has no image uri (one of {", ".join(_URI_COLUMNS)})')
  # A label column that is empty or null is a missing label (no_label); a row without one is unlabelled.
  labelled = any(name in fields for name in _LABEL_COLUMNS)
  label = _pop_first(fields, _LABEL_COLUMNS)
  if label is None and (multi_label or isinstance(fields.get('labels'), list)):
    labelled = labelled or 'labels' in fields
    label = fields.pop('labels', None)
  split_value = _pop_first(fields, _SPLIT_COLUMNS)
  split_value = str(split_value).strip() if split_value is not None else ''
  split = None
  if split_value:
    if not _is_set_value(split_value):
      raise Rejected(rejections.BAD_MANIFEST_ROW, f'split {split_value!r} is not one of {_SET_VALUES}')
    split = split_names.usual(split_value)
  extras = tuple(sorted((key, value) for key, value in fields.items() if value not in (None, '')))
  uri = _resolve_uri(manifest, uri)
  if isinstance(label, list):
    if multi_label:
      return _multi_label_item(uri, label, split, extras)
    return InputItem(uri, _one_label(label), split, extras)
  label = _label_text(label) if labelled else None
  if multi_label:
    return _multi_label_item(uri, [label] if label else [], split, extras)
  return InputItem(uri, label, split, extras)


def _pop_first(fields: Dict[str, Any], names) -> Any:
  for name in names:
    if name in fields:
      return fields.pop(name)
  return None


def _check_text(text: str) -> None:
  try:
    text.encode('utf-8')
  except UnicodeEncodeError:
    raise Rejected(rejections.BAD_MANIFEST_ROW, 'row is not UTF-8 text (save the manifest as UTF-8)') from None


def _resolve_uri(manifest: str, uri: str) -> str:
  """Manifest paths may be relative to the manifest's own directory."""
  if '://' in uri or uri.startswith('/'):
    return uri
  return uris.join(uris.split(manifest)[0], uri)
