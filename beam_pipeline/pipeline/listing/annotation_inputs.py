"""--annotations: the annotation files read where they lie, and joined to the listed images.

A COCO file is one JSON document, read whole by one worker; a folder of Pascal VOC
files is listed in parts like an input folder (listing/parts.py), so no step holds
all their names.
"""
from typing import Any, Iterable, Iterator, List, NamedTuple, Tuple, Union

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from beam_pipeline.pipeline import tags
from beam_pipeline.pipeline.listing import local_files, parts
from beam_pipeline.pipeline.tags import REJECTED
from beam_pipeline.core import rejections, uris
from beam_pipeline.core.console import progress_counts
from beam_pipeline.core.inputs import annotated_items, annotations
from beam_pipeline.core.inputs.annotations import ImageAnnotation
from beam_pipeline.core.messages import InputItem, Rejection
from beam_pipeline.core.rejections import InputFileError
from beam_pipeline.core.settings import DIRECTORY, InputSpec, Settings
from beam_pipeline.core.user_errors import UsageError

# Images go on to validation in lists of about this many, as listing makes them.
BATCH_SIZE = parts.LIST_BATCH_SIZE
# COCO files up to this size are checked at launch (parsed in about half a second); COCO
# val2017's instances file is 25 MB, train2017's 448 MB.
LAUNCH_CHECK_BYTES = 32 * 2**20


class Annotated(NamedTuple):
  batches: beam.PCollection  # of List[InputItem], annotated
  rejected: beam.PCollection  # of Rejection: annotations that cannot be used, images dropped


def annotated(pipeline: beam.Pipeline, batches: beam.PCollection, settings: Settings) -> Annotated:
  """The listed ``batches`` with their annotations: joined from --annotations, or an AutoML
  detection CSV's rows of one image (one box each) merged."""
  if settings.annotations == settings.input.path:
    merged = (batches
              | 'RowsByUri' >> beam.FlatMap(_keyed_by_uri)
              | 'GroupRows' >> beam.GroupByKey()
              | 'MergeRows' >> beam.FlatMap(_merged, settings.drop_unannotated).with_outputs(REJECTED, main='items'))
    return Annotated(_rebatched(merged.items), merged[REJECTED])
  root = settings.input.path[:-len('/**')]
  read = (pipeline
          | 'Annotations' >> beam.Create([settings.annotations])
          | 'AnnotationParts' >> beam.FlatMap(annotation_parts)
          | 'SpreadAnnotationParts' >> beam.Reshuffle()
          | 'ReadAnnotations' >> beam.FlatMap(read_part, root, settings.annotations).with_outputs(
              REJECTED, main='images'))
  items = batches | 'ItemsByUri' >> beam.FlatMap(_keyed_by_uri)
  joined = ({'items': items, 'annotations': read.images}
            | 'JoinAnnotations' >> beam.CoGroupByKey()
            | 'Annotate' >> beam.FlatMap(_joined, settings.annotations, settings.drop_unannotated).with_outputs(
                REJECTED, main='items'))
  rejected = (read[REJECTED], joined[REJECTED]) | 'AnnotationRejections' >> beam.Flatten()
  return Annotated(_rebatched(joined.items), rejected)


def _keyed_by_uri(batch: List[InputItem]) -> Iterator[Tuple[str, InputItem]]:
  return ((item.uri, item) for item in batch)


def _rebatched(items: beam.PCollection) -> beam.PCollection:
  return items | 'Rebatch' >> beam.BatchElements(min_batch_size=BATCH_SIZE, max_batch_size=BATCH_SIZE
                                                 ).with_output_types(List[InputItem])


def annotation_format(path: str) -> str:
  """annotations.COCO or annotations.VOC; ValueError (one line) for anything else."""
  if _is_folder(path):
    return annotations.format_of(path.rstrip('/') + '/', b'')
  with FileSystems.open(path) as f:
    return annotations.format_of(path, f.read(64))


def check_coco(path: str) -> None:
  """UsageError, at launch, for a COCO file of at most LAUNCH_CHECK_BYTES that is not COCO as a
  whole (invalid JSON, 'images' not a list). A larger one is left to the worker that reads it
  whole anyway, rather than read twice and held by the launcher: the run then stops with the
  same line (failures.report)."""
  if FileSystems.match([path], limits=[1])[0].metadata_list[0].size_in_bytes > LAUNCH_CHECK_BYTES:
    return
  with FileSystems.open(path) as f:
    data = f.read()
  try:
    annotations.coco_document(data)
  except InputFileError as e:
    raise UsageError(f'--annotations={path} {e}') from None


def annotation_parts(path: str) -> Iterator[Tuple[str, Any]]:
  """(format, what to read): a COCO or VOC file whole, or each part of a folder of VOC files."""
  if not _is_folder(path):
    yield annotation_format(path), path
    return
  for part in parts.input_parts(InputSpec(DIRECTORY, path.rstrip('/') + '/**')):
    yield annotations.VOC, part


def _is_folder(path: str) -> bool:
  """A local folder, or a remote path with no object of its own (a prefix)."""
  return local_files.is_local_dir(path) or (uris.is_remote(path) and not FileSystems.exists(path))


def read_part(part: Tuple[str, Any], root: str, source: str) -> Iterator[Any]:
  """(uri, ImageAnnotation) for each image the part annotates; its problems, tagged."""
  for value in _parsed(*part):
    if isinstance(value, ImageAnnotation):
      yield annotated_items.image_uri(root, value), value
    else:
      yield tags.rejected(Rejection(source, rejections.BAD_ANNOTATION, f'{value.where}: {value.detail}'))


def _parsed(kind: str, what: Any) -> Iterator[Any]:
  """The ImageAnnotations and Problems of a COCO file, a VOC file, or a part of a folder of VOC files."""
  if kind == annotations.COCO:
    with FileSystems.open(what) as f:
      data = f.read()
    try:
      yield from annotations.parse_coco(data)
    except InputFileError as e:  # the file's own words, said for the command line
      raise InputFileError(f'--annotations={what} {e}') from None
    return
  files = [what] if isinstance(what, str) else (
      item.uri for item in parts.list_part(what, skip_non_images=False)
      if not isinstance(item, Rejection) and item.uri.lower().endswith('.xml'))
  for path in files:
    with FileSystems.open(path) as f:
      annotation, problems = annotations.parse_voc(f.read(), path)
    yield from problems
    if annotation is not None:
      yield annotation


def _joined(keyed: Tuple[str, dict], source: str, drop_unannotated: bool) -> Iterator[Union[InputItem, Any]]:
  uri, grouped = keyed
  for value in annotated_items.joined(uri, grouped['items'], grouped['annotations'], source, drop_unannotated):
    yield _emitted(value)


def _merged(keyed: Tuple[str, Iterable[InputItem]], drop_unannotated: bool) -> Iterator[Any]:
  """One item of an image's rows: listed once per row, it is one image now."""
  uri, rows = keyed
  rows = list(rows)
  if len(rows) > 1:
    progress_counts.counts().listed(1 - len(rows))
  yield _emitted(annotated_items.merged(rows, drop_unannotated))


def _emitted(value: Union[InputItem, Rejection]) -> Any:
  """An item as it is, a rejection tagged; an image --drop_unannotated left out is one the
  progress line counts as done."""
  if not isinstance(value, Rejection):
    return value
  if value.reason == rejections.UNANNOTATED:
    progress_counts.counts().checked(1, rejected=1)
  return tags.rejected(value)
