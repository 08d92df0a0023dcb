"""A manifest that names one image twice, or gives two images one image/source_id: the first row
is kept, each later one rejected, naming both rows.

A record's image/source_id is a number of its content and uri (examples.source_id), or the
manifest's own; Model Garden's evaluation takes it for the image's id, so two records of one
id would be one image there. The rows meet where the pipeline groups them anyway (copies of
one file share a content group) or by the given id; which row is first follows the row
numbers, so the choice is the same on any runner, in any order of arrival.
"""
import collections
from typing import Callable, Iterable, Iterator, List, Tuple, Union

from beam_pipeline.core import rejections
from beam_pipeline.core.messages import CheckedImage, Rejection

RowName = Callable[[int], str]  # a row's number -> how the errors file names it (manifest_rows.row_name)


def first_of_each_uri(records: Iterable[CheckedImage], row_name: RowName) -> Tuple[List[CheckedImage], List[Rejection]]:
  """The records of distinct uris, each its first row's; every later row of a uri rejected as
  ``duplicate_row`` under its own name."""
  by_uri = collections.defaultdict(list)
  for record in records:
    by_uri[record.uri].append(record)
  kept, rejected = [], []
  for rows in by_uri.values():
    first, *later = sorted(rows, key=lambda record: record.row)
    kept.append(first)
    rejected.extend(_repeated(record, first, row_name) for record in later)
  return kept, rejected


def _repeated(record: CheckedImage, first: CheckedImage, row_name: RowName) -> Rejection:
  """The rejection of ``record``'s row, which names ``first``'s image again."""
  differs = f'; its label {_labels(record)} differs from that row\'s {_labels(first)}' if (
      _labels(record) != _labels(first)) else ''
  return Rejection(row_name(record.row), rejections.DUPLICATE_ROW,
                   f'names {record.uri} again: {row_name(first.row)} names it first, and is kept{differs}')


def first_of_one_source_id(records: Iterable[CheckedImage], source_id: str, key: str,
                           row_name: RowName) -> Iterator[Union[CheckedImage, Rejection]]:
  """Of records whose rows give them one ``source_id``, the first row's, and a rejection of each
  other row: ``duplicate_row`` if it names the same image, else ``bad_manifest_row``.

  Args:
    records: the records whose rows give ``source_id``; read twice and never held (a GroupByKey's values): a
      manifest may give every row the same id.
    source_id: the id the rows give, for the rejections' detail.
    key: the manifest field that gives it, the key the schema writes image/source_id under (schemas.source_id_key).
    row_name: how the errors file names a row, from its number.
  """
  first = min(records, key=lambda record: record.row)
  yield first
  for record in records:
    if record.row == first.row:
      continue
    if record.uri == first.uri:
      yield _repeated(record, first, row_name)
    else:
      yield Rejection(row_name(record.row), rejections.BAD_MANIFEST_ROW,
                      f'its {key} {source_id} is also {row_name(first.row)}\'s (for {first.uri}): each image needs '
                      'one of its own, or Model Garden takes the two for one image')


def _labels(record: CheckedImage) -> str:
  labels = record.labels or ((record.label,) if record.label is not None else ())
  return ', '.join(repr(label) for label in labels) or 'no label'
