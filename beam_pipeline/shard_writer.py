"""Writing one planned shard: each image read again, its hash checked, encoded and framed.

A plain function, so it runs the same inline in a DoFn and in a worker process of
a local run (workers.py). It writes the file it is given, a temporary name; the
caller moves it into place, so a worker never touches a final name.
"""
import functools
import os
from concurrent.futures import Executor
from typing import List, Optional

import tensorflow as tf

from beam_pipeline import examples, images, reading, rejections, uris
from beam_pipeline.records import ImageRecord
from beam_pipeline.rejections import Rejected, Rejection
from beam_pipeline.schemas import UNLABELED
from beam_pipeline.settings import Settings
from beam_pipeline.sharding import ShardPlan, ShardWritten


def write_shard(plan: ShardPlan, file_path: str, settings: Settings, class_names: List[str],
                read_pool: Optional[Executor] = None) -> ShardWritten:
  """Writes ``plan``'s records in order to ``file_path``; reads run ahead on ``read_pool``.

  A file whose bytes changed since validation is rejected (``changed_during_run``):
  its record would not match what was planned and checked.
  """
  class_ids = {label: index for index, label in enumerate(class_names)}
  writer = _open(file_path, settings.compression)
  written, rejected = 0, []
  window = reading.reads_in_flight((record.uri for record in plan.records), settings.read_threads) if read_pool else 0
  stored_image = functools.partial(_stored_image, settings=settings)
  for record, image in reading.prefetched(stored_image, plan.records, read_pool, window):
    if isinstance(image, Rejected):
      rejected.append(Rejection.of(record.uri, image))
      continue
    writer.write(examples.encode_example(
        image=image, image_format=record.format, height=record.height, width=record.width,
        channels=record.channels, label_id=class_ids.get(record.label, UNLABELED), label=record.label,
        uri=record.uri, sha256=images.sha256_hex(image) if record.reencoded else record.sha256,
        extras=dict(record.extras), schema=settings.schema))
    written += 1
  shard = {'split': plan.split, 'file': plan.file_name(settings.compression), 'num_examples': written,
           'num_bytes': writer.close()}
  return ShardWritten(shard, rejected)


def _open(file_path: str, compression: str):
  """A TFRecord file to write: TensorFlow's writer for a local one; for Cloud Storage
  (which workers never write), Beam's framing over FileSystems, as TensorFlow's
  file system cannot reach the storage emulator."""
  if uris.is_remote(file_path):
    from beam_pipeline import output_dir  # pylint: disable=import-outside-toplevel
    return output_dir.ShardFileWriter(file_path, compression)
  return _LocalTFRecordFile(file_path, compression)


class _LocalTFRecordFile:
  """TensorFlow's TFRecordWriter, with output_dir.ShardFileWriter's interface."""

  def __init__(self, file_path: str, compression: str):
    os.makedirs(os.path.dirname(file_path), exist_ok=True)
    self._path = file_path
    self._writer = tf.io.TFRecordWriter(file_path, 'GZIP' if compression == 'gzip' else '')

  def write(self, record: bytes) -> None:
    self._writer.write(record)

  def close(self) -> int:
    """Completes the file and returns its size in bytes."""
    self._writer.close()
    return os.path.getsize(self._path)


def _stored_image(record: ImageRecord, settings: Settings) -> bytes:
  data = reading.read_file(record.uri, settings.max_file_bytes)
  if images.sha256_hex(data) != record.source_sha256:
    raise Rejected(rejections.CHANGED_DURING_RUN, 'file content changed after it was validated')
  if not record.reencoded:
    return data
  return images.prepare_image(data, settings.max_pixels).stored
