"""Writing one planned shard: each image read again, its hash checked, encoded and framed.

A plain function, so it runs the same inline in a DoFn and in a worker process of
a local run. It writes a local file with TensorFlow's TFRecordWriter, under the
temporary name it is given; the Beam side moves or uploads it into place, so a
worker never touches a final name, and every shard is framed by the same writer.
"""
import contextlib
import dataclasses
import functools
import os
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf

from beam_pipeline.core import isolation
from beam_pipeline.core.images import image_info, kept_encodings, reencoding
from beam_pipeline.core.inputs import reading
from beam_pipeline.core.output import catalog_lookup, catalog_entries
from beam_pipeline.core.writing import examples, record_index
from beam_pipeline.core import rejections, schemas
from beam_pipeline.core.images import pillow_limit
from beam_pipeline.core.messages import CheckedImage, Rejection, ShardPlan, ShardWritten
from beam_pipeline.core.rejections import OutputError, Rejected
from beam_pipeline.core.settings import COMPRESSIONS, Settings
from beam_pipeline.core.output import output_layout, run_totals


REENCODE_THREADS = 2  # images re-encoded at once while a shard is written, and so held at once

# What the model is given, a batch of stored images, and gives: one flattened embedding each.
Embed = Callable[[Sequence[bytes]], Sequence[np.ndarray]]


def write_shard(plan: ShardPlan, file_path: str, settings: Settings, class_names: List[str],
                remote: Optional[reading.Remote] = None, embed: Optional[Embed] = None) -> ShardWritten:
  """Writes ``plan``'s records in order to the local ``file_path``.

  Each record's steps run behind the isolation boundary, so a record that fails
  any of them is rejected alone: a file whose bytes changed since validation
  (``changed_during_run``: its record would not match what was planned and
  checked), or any unexpected error. Writing the file itself is not: an output
  that cannot be written fails the shard, and the run.

  Args:
    plan: the shard: its split, its place among the split's shards, and its records in order.
    file_path: the local file to write, under the temporary name the Beam side moves or uploads into place.
    settings: the run's settings.
    class_names: the labels in id order: a label's class id is its index here.
    remote: what reads Cloud Storage objects, ahead of the writer; None where no input is remote.
    embed: the model that computes the embeddings --embedding_model asks for, a batch of records at a time;
      None without it.
  """
  pillow_limit.set_for(settings.max_pixels)  # it opens what validation opened, re-encoding
  class_ids = {label: index for index, label in enumerate(class_names)}
  os.makedirs(os.path.dirname(file_path) or '.', exist_ok=True)
  rejected: List[Rejection] = []
  written: List[catalog_entries.Entry] = []
  lengths = []
  batch_size = settings.embedding.batch_size if embed else 1
  read = functools.partial(_read, settings=settings, open_remote=remote and remote.open)
  # Pillow lets go of the GIL while it decodes and encodes, so images re-encoded on threads
  # beside the writer keep every core busy on a shard of WebPs, even the run's last shard.
  reencoding_threads = (ThreadPoolExecutor(REENCODE_THREADS, thread_name_prefix='reencode', initializer=_on_any_core)
                        if any(record.reencoded for record in plan.records) else contextlib.nullcontext())
  with reencoding_threads as reencoders, tf.io.TFRecordWriter(file_path, COMPRESSIONS[settings.compression]) as writer:
    stored = _stored(reading.read_files(isolation.READ, read, plan.records, lambda record: record.uri, remote),
                     settings, rejected, reencoders)
    for batch in _batches(stored, batch_size):
      embedded = _embedded(batch, embed, settings) if embed else [None] * len(batch)
      for (record, image, original_size, turned), embedding in zip(batch, embedded):
        if isinstance(embedding, Rejected):
          rejected.append(Rejection.of(record.uri, embedding))
          continue
        example = isolation.run(isolation.WRITE, [record.uri], _example, record, image, original_size, embedding,
                                class_ids, settings)
        if isinstance(example, Rejected):
          rejected.append(Rejection.of(record.uri, example))
          continue
        try:
          writer.write(example)
        except Exception as e:  # pylint: disable=broad-except
          raise OutputError(f'{file_path}: {rejections.first_line(e)}') from e
        lengths.append(len(example))
        written.append(catalog_entries.entry(record, len(image), original_size != (record.height, record.width),
                                                 turned))
  name = output_layout.shard_file(plan, settings.compression)
  if settings.index_files:
    write_index(output_layout.index_file(file_path), lengths)
  catalog = None
  if settings.incremental:
    catalog = output_layout.catalog_file(name)
    write_text(output_layout.catalog_beside(file_path, name), catalog_entries.text(written))
  report = run_totals.shard_report(plan.split, name, written, os.path.getsize(file_path),
                                   multi_label=settings.multi_label, annotations=bool(settings.annotations),
                                   index_file=output_layout.index_file(name) if settings.index_files else None,
                                   catalog_file=catalog)
  if not settings.incremental:
    return ShardWritten(report, rejected)
  report = dataclasses.replace(report, shard_id=catalog_lookup.shard_id(report.catalog_sha256))
  return ShardWritten(report, rejected, catalogued=tuple(written))


def write_index(path: str, lengths: List[int]) -> None:
  write_text(path, record_index.text(lengths))


def write_text(path: str, text: str) -> None:
  """Writes a small local file whole (an index file, a catalog); OutputError if it cannot."""
  try:
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    with open(path, 'w', encoding='utf-8', errors='backslashreplace') as f:
      f.write(text)
  except OSError as e:
    raise OutputError(f'{path}: {rejections.first_line(e)}') from e


class _Stored(NamedTuple):
  record: CheckedImage
  image: bytes  # as stored
  original_size: Tuple[int, int]  # the source's (height, width), upright
  rotated: bool  # turned upright by its Exif orientation


def _on_any_core() -> None:
  """A re-encoding thread may run on every core of the machine, whatever core its process was
  given: a local run's worker is held to one (local/workers.py), and its shard may be the last."""
  try:
    os.sched_setaffinity(0, range(os.cpu_count() or 1))  # 0: this thread alone, on Linux
  except (AttributeError, OSError):  # not Linux, or cores taken away
    pass


def _stored(read: Iterable[Tuple[CheckedImage, Any]], settings: Settings, rejected: List[Rejection],
            reencoders: Optional[Executor] = None) -> Iterator[_Stored]:
  """(record, stored bytes, source's (height, width)) of each record read; the ones rejected
  go to ``rejected`` instead. A re-encoding's record follows what is written (_stored_image).

  Args:
    read: each record with its source's bytes, or the Rejected of a read that failed (reading.read_files).
    settings: the run's settings: how images are stored.
    rejected: the rejections of the records that fail (changed).
    reencoders: threads to make REENCODE_THREADS records ahead on, in order, so that only a few images are held
      at once; None: one at a time, as they are read.
  """

  def made(read_record: Tuple[CheckedImage, Any]) -> Union[_Stored, Rejected]:
    record, data = read_record
    if isinstance(data, Rejected):
      return data
    return isolation.run(isolation.REENCODE, [record.uri], _stored_image, record, data, settings)

  for (record, _), data in reading.prefetched(made, read, reencoders, REENCODE_THREADS if reencoders else 0):
    if isinstance(data, Rejected):
      rejected.append(Rejection.of(record.uri, data))
      continue
    yield data


def _batches(stored: Iterable[_Stored], size: int) -> Iterator[List[_Stored]]:
  """``stored`` in batches of ``size`` (the last one smaller)."""
  batch = []
  for item in stored:
    batch.append(item)
    if len(batch) == size:
      yield batch
      batch = []
  if batch:
    yield batch


def _embedded(batch: List[_Stored], embed: Embed, settings: Settings) -> List[Any]:
  """The embedding of each image of ``batch``, or the Rejected of an image the model fails
  on: the batch is embedded again image by image, so one image cannot fail the others."""

  def embedded(items: Sequence[_Stored]) -> List[Dict[str, Any]]:
    isolation.fault_point(isolation.EMBED)
    return [_embedding_fields(embedding, settings) for embedding in embed([item.image for item in items])]

  return isolation.each_alone(isolation.EMBED, batch, lambda item: item[0].uri, embedded)


def _example(record: CheckedImage, image: bytes, original_size: Tuple[int, int], embedding: Optional[Dict[str, Any]],
             class_ids: Dict[str, int], settings: Settings) -> bytes:
  """The record's serialized Example.

  Args:
    record: the record: its metadata, labels, objects and extra fields.
    image: the image as stored; left out under --embedding_only.
    original_size: the source's (height, width), upright.
    embedding: the image's embedding fields (_embedding_fields); None without --embedding_model.
    class_ids: each label's class id.
    settings: the run's settings: the schema, and which fields it holds.
  """
  isolation.fault_point(isolation.WRITE)
  fields = {
      schemas.IMAGE: image, schemas.FORMAT: record.format.encode('ascii'), schemas.HEIGHT: record.height,
      schemas.WIDTH: record.width, schemas.ORIGINAL_HEIGHT: original_size[0],
      schemas.ORIGINAL_WIDTH: original_size[1], schemas.CHANNELS: record.channels,
      schemas.LABEL: class_ids.get(record.label, schemas.UNLABELED),
      schemas.TEXT: (record.label or '').encode('utf-8'), schemas.URI: examples.uri_bytes(record.uri),
      schemas.SHA256: record.sha256.encode('ascii'), schemas.SOURCE_ID: examples.source_id(record.order_key)}
  if settings.multi_label:
    fields.update(examples.multi_label_fields(record.labels, class_ids))
  if embedding is not None:
    fields.update(embedding)
    if settings.embedding.only:
      del fields[schemas.IMAGE]
  if settings.annotations:
    fields.update(examples.object_fields(record.objects, class_ids,
                                         (record.width, record.height) if settings.include_masks else None))
  return examples.encode_example(fields, dict(record.extras), settings.schema)


def _embedding_fields(embedding: np.ndarray, settings: Settings) -> Dict[str, Any]:
  """The record's embedding and its shape, checked against the model's check before the run."""
  spec = settings.embedding
  if embedding.shape != (spec.num_values,):
    raise RuntimeError(f'{spec.model} gave an embedding of {embedding.size} values; its check gave shape '
                       f'{spec.output_shape}')
  return {schemas.EMBEDDING: embedding, schemas.EMBEDDING_SHAPE: spec.output_shape}


def _read(record: CheckedImage, settings: Settings, open_remote) -> bytes:
  """The source's bytes, as validation read them."""
  data = reading.read_file(record.uri, settings.max_file_bytes, open_remote)
  if image_info.sha256_hex(data) != record.source_sha256:
    raise Rejected(rejections.CHANGED_DURING_RUN, 'file content changed after it was validated')
  return data


def _stored_image(record: CheckedImage, data: bytes, settings: Settings) -> _Stored:
  """The bytes ``record`` stores (the source's, or its re-encoding made again) and the
  source's (height, width).

  Re-encoding is deterministic, so it gives the bytes validation checked. Should a
  library here encode otherwise, what is written wins: checked as validation checks,
  with its own hash and size in the record, rather than the image lost.
  """
  if not record.reencoded:
    return _Stored(record, data, (record.height, record.width), False)
  kept = kept_encodings.taken(record.source_sha256, record.sha256)
  if kept:
    return _Stored(record, kept.stored, kept.original_size, kept.rotated)
  again = reencoding.reencode_again(data, settings.stored)
  if image_info.sha256_hex(again.stored) != record.sha256:
    reencoding.check_stored(again.stored, record.format, record.height, record.width)
    record = record._replace(sha256=image_info.sha256_hex(again.stored), num_bytes=len(again.stored))
  return _Stored(record, again.stored, (again.original_height, again.original_width), again.orientation != 1)
