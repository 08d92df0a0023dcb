"""Listed images and their annotations, met by uri: each image takes the objects its
annotation gives it. An annotation that names no listed image, or a second one of an
image, is an error of the annotation file, never dropped unsaid; an image no annotation
gives no box is a negative, or rejected under --drop_unannotated."""
from typing import Iterable, Iterator, List, Union

from beam_pipeline.core import rejections, uris
from beam_pipeline.core.inputs import fingerprints
from beam_pipeline.core.inputs.annotations import ImageAnnotation
from beam_pipeline.core.messages import InputItem, Rejection


def image_uri(root: str, annotation: ImageAnnotation) -> str:
  """The uri of the image an annotation names, relative to the input's root folder."""
  return uris.join(root, annotation.name.lstrip('/'))


def joined(uri: str, items: Iterable[InputItem], annotations: Iterable[ImageAnnotation], source: str,
           drop_unannotated: bool) -> Iterator[Union[InputItem, Rejection]]:
  """The items listed under ``uri``, annotated.

  Args:
    uri: the image's uri, by which its listed items and its annotations met.
    items: the inputs listed under ``uri``; none if no image there was listed, which makes each annotation an error.
    annotations: the annotations that name ``uri``, in any order: the first by its place in the files is used.
    source: --annotations, what the errors of the annotation files are reported under.
    drop_unannotated: --drop_unannotated: an item no annotation gives a box is rejected, not kept as a negative.
  """
  items = list(items)
  annotations = sorted(annotations, key=lambda annotation: annotation.where)  # whatever order they met in
  if not items:
    for annotation in annotations:
      yield Rejection(source, rejections.BAD_ANNOTATION,
                      f'{annotation.where}: names {uri}, which is not an image listed under --input')
    return
  kept = annotations[0] if annotations else None
  for annotation in annotations[1:]:
    yield Rejection(source, rejections.BAD_ANNOTATION,
                    f'{annotation.where}: a second annotation of {uri}; {kept.where} is used')
  for item in items:
    if drop_unannotated and not (kept and kept.objects):
      yield Rejection(item.uri, rejections.UNANNOTATED, 'no annotation gives it a box (--drop_unannotated)')
    elif kept is not None:
      size = (kept.width, kept.height) if kept.width and kept.height else None
      yield item._replace(objects=kept.objects, annotated_size=size)
    else:
      yield item


def merged(rows: List[InputItem], drop_unannotated: bool) -> Union[InputItem, Rejection]:
  """The item of one image of an AutoML detection CSV, from its rows (one box each, or none):
  its boxes in row order, its split the first row's that gives one."""
  rows = sorted(rows, key=lambda row: _row_number(row.objects[0].where) if row.objects else 0)
  objects = tuple(obj for row in rows for obj in row.objects)
  if drop_unannotated and not objects:
    return Rejection(rows[0].uri, rejections.UNANNOTATED, 'no row gives it a box (--drop_unannotated)')
  split = next((row.split for row in rows if row.split), None)
  fingerprint = fingerprints.of_rows(row.fingerprint for row in sorted(rows, key=lambda row: row.row))
  return rows[0]._replace(objects=objects, split=split, fingerprint=fingerprint)


def _row_number(where: str) -> int:
  """The number of a manifest row from its name ('path:row 12'), for the rows' order."""
  return int(where.rpartition(' ')[2]) if where.rpartition(' ')[2].isdigit() else 0
