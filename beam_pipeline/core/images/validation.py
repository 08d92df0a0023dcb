"""Validating a batch of inputs: read, hash, label and fully decode each; keep only metadata.

A plain function, so it runs the same inline in a DoFn (Dataflow, Cloud Storage
inputs) and in a worker process of a local run. Each step runs behind the
isolation boundary: an image that trips any of them is rejected alone.
"""
import collections
import functools
from typing import List, NamedTuple, Optional, Sequence, Tuple

from beam_pipeline.core import isolation, rejections, schemas
from beam_pipeline.core.images import boxes, image_info, image_quality, kept_encodings, preparation
from beam_pipeline.core.inputs import input_root, labels, reading
from beam_pipeline.core.planning import sharding
from beam_pipeline.core.messages import CheckedImage, InputItem, Rejection, Validated
from beam_pipeline.core.rejections import Rejected
from beam_pipeline.core.settings import Settings

# Images are decoded in chunks of at most this many bytes (plus one image), so a
# batch of large images is never held whole.
CHUNK_BYTES = 32 * 2**20


class _Loaded(NamedTuple):
  item: InputItem
  label: Optional[str]
  data: bytes
  sha256: str


def validate_batch(items: Sequence[InputItem], settings: Settings, remote: Optional[reading.Remote] = None,
                   chunk_bytes: int = CHUNK_BYTES) -> Validated:
  """Every item becomes a record or a rejection.

  Raises TransientReadError when storage keeps failing: the whole batch is then
  retried, and no image is rejected for it.

  Args:
    items: the listed inputs to validate.
    settings: the run's settings: how inputs are labelled, checked and stored.
    remote: what reads Cloud Storage objects, ahead of their use; None in a process that reads local files only.
    chunk_bytes: at most how many bytes of images (plus one image) are decoded at once, so that a batch of large
      images is never held whole.
  """
  result = Validated([], [], collections.Counter(), [])
  load = functools.partial(_load, settings=settings, open_remote=remote and remote.open)
  chunk: List[_Loaded] = []
  size = 0
  for item, loaded in reading.read_files(isolation.READ, load, items, lambda item: item.uri, remote):
    if isinstance(loaded, Rejected):
      result.rejections.append(Rejection.of(item.uri, loaded))
      continue
    chunk.append(loaded)
    size += len(loaded.data)
    if size >= chunk_bytes:
      _decode(chunk, settings, result)
      chunk, size = [], 0
  if chunk:
    _decode(chunk, settings, result)
  return result._replace(source_formats=dict(result.source_formats))


def _load(item: InputItem, settings: Settings, open_remote) -> _Loaded:
  input_root.check(item.uri, settings.input_root)
  label = labels.label_for(item.uri, item.label, settings.label_source)
  if item.labels:
    item = item._replace(labels=labels.labels_for(item.uri, item.labels, settings.label_source))
  schemas.check_extras(dict(item.extras), settings.schema)
  item = item._replace(extras=schemas.with_given_source_id(item.extras, settings.schema))
  data = reading.read_file(item.uri, settings.max_file_bytes, open_remote)
  return _Loaded(item, label, data, image_info.sha256_hex(data))


def _decode(chunk: List[_Loaded], settings: Settings, result: Validated) -> None:
  """TensorFlow decodes the chunk on every core; each image becomes a record or a rejection."""
  prepared = isolation.each_alone(isolation.VALIDATE, chunk, lambda loaded: loaded.item.uri, functools.partial(
      _prepared, settings=settings))
  for loaded, made in zip(chunk, prepared):
    image = made if isinstance(made, Rejected) else isolation.run(isolation.VALIDATE, [loaded.item.uri], _record,
                                                                   loaded, made, settings)
    if isinstance(image, Rejected):
      result.rejections.append(Rejection.of(loaded.item.uri, image))
      continue
    result.source_formats[image.info.source_format] += 1
    result.records.append(image.record)
    result.annotation_problems.extend(image.problems)
    if image.info.reencoded:  # for the shard writer, which would make the same bytes again
      kept_encodings.keep(image.record.source_sha256, image.record.sha256, made.stored,
                          (image.info.original_height, image.info.original_width), image.info.orientation != 1)


def _prepared(chunk: Sequence[_Loaded], settings: Settings) -> List:
  return preparation.prepare_images([loaded.data for loaded in chunk], settings.max_pixels, settings.stored)


class _Checked(NamedTuple):
  info: image_info.ImageInfo
  record: CheckedImage
  problems: List[Rejection]  # of its annotations: boxes that lie outside it


def _record(loaded: _Loaded, prepared: image_info.PreparedImage, settings: Settings) -> _Checked:
  """The record of an image that decoded; a damaged JPEG is rejected under --strict_jpeg, and an
  image that raises a flag --reject_quality names."""
  info = prepared.info
  if min(info.height, info.width) < settings.min_side:
    raise Rejected(rejections.TOO_SMALL, f'{info.width}x{info.height} pixels{" as stored" if info.reencoded else ""}: '
                                         f'a side is shorter than --min_side={settings.min_side}')
  if info.damage and settings.strict_jpeg:
    raise Rejected(rejections.DAMAGED_JPEG, f'libjpeg warns while decoding it (--strict_jpeg): {info.damage}')
  objects, problems = _stored_objects(loaded.item, info, settings)
  checked = _Checked(info, CheckedImage(
      uri=loaded.item.uri, label=loaded.label, split=loaded.item.split, extras=loaded.item.extras,
      source_sha256=loaded.sha256,
      sha256=image_info.sha256_hex(prepared.stored) if info.reencoded else loaded.sha256,
      num_bytes=len(prepared.stored), format=info.format, height=info.height, width=info.width,
      channels=info.channels, reencoded=info.reencoded,
      order_key=sharding.order_key(loaded.sha256, loaded.item.uri), damaged=bool(info.damage),
      objects=objects, labels=loaded.item.labels if loaded.label is not None else (), row=loaded.item.row,
      fingerprint=loaded.item.fingerprint, phash=info.phash, colour=info.colour,
      quality=image_quality.flags(info.statistics, info.height, info.width, info.channels)), problems)
  raised = [flag for flag in checked.record.quality if flag in settings.reject_quality]
  if raised:
    raise Rejected(rejections.POOR_QUALITY, f'it raises {", ".join(raised)}, which --reject_quality='
                                            f'{",".join(settings.reject_quality)} rejects (README: Data quality)')
  return checked


def _stored_objects(item: InputItem, info: image_info.ImageInfo, settings: Settings
                    ) -> Tuple[Tuple[boxes.StoredObject, ...], List[Rejection]]:
  """The item's annotated objects on its stored image, which may be turned upright and
  downscaled; each that cannot be placed is an error of the annotation file."""
  if not item.objects:
    return (), []
  turned = info.orientation if info.reencoded else 1
  upright = (info.original_width, info.original_height)
  source_size = upright if turned < 5 else upright[::-1]
  objects, problems = boxes.stored_objects(item.objects, item.annotated_size, source_size, turned,
                                           (info.width, info.height), settings.include_masks)
  return objects, [Rejection(settings.annotations, rejections.BAD_ANNOTATION,
                             f'{problem.where} of {item.uri}: {problem.detail}') for problem in problems]
