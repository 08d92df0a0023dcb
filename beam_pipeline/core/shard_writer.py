"""Writing one planned shard: each image read again, its hash checked, encoded and framed.

A plain function, so it runs the same inline in a DoFn and in a worker process of
a local run. It writes a local file with TensorFlow's TFRecordWriter, under the
temporary name it is given; the Beam side moves or uploads it into place, so a
worker never touches a final name, and every shard is framed by the same writer.
"""
import functools
import os
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from beam_pipeline.core import dataset_info, examples, images, reading, rejections, schemas
from beam_pipeline.core.records import ImageRecord, Rejection, ShardPlan, ShardWritten
from beam_pipeline.core.rejections import Rejected
from beam_pipeline.core.settings import COMPRESSIONS, Settings


# What the model is given, a batch of stored images, and gives: one flattened embedding each.
Embed = Callable[[Sequence[bytes]], Sequence[np.ndarray]]


def write_shard(plan: ShardPlan, file_path: str, settings: Settings, class_names: List[str],
                remote: Optional[reading.Remote] = None, embed: Optional[Embed] = None) -> ShardWritten:
  """Writes ``plan``'s records in order to the local ``file_path``; ``remote`` reads Cloud
  Storage objects (ahead), and ``embed`` computes the embeddings --embedding_model asks for,
  a batch of records at a time.

  A file whose bytes changed since validation is rejected (``changed_during_run``):
  its record would not match what was planned and checked.
  """
  class_ids = {label: index for index, label in enumerate(class_names)}
  os.makedirs(os.path.dirname(file_path) or '.', exist_ok=True)
  rejected, labels, longer_sides, stored_bytes = [], [], [], []
  reencoded = resized = 0
  batch_size = settings.embedding.batch_size if embed else 1
  stored_image = functools.partial(_stored_image, settings=settings, open_remote=remote and remote.open)
  with tf.io.TFRecordWriter(file_path, COMPRESSIONS[settings.compression]) as writer:
    read = reading.read_files(stored_image, plan.records, lambda record: record.uri, remote)
    for batch in _batches(read, batch_size, rejected):
      embedded = embed([image for _, (image, _) in batch]) if embed else [None] * len(batch)
      for (record, (image, original_size)), embedding in zip(batch, embedded):
        fields = {
            schemas.IMAGE: image, schemas.FORMAT: record.format.encode('ascii'), schemas.HEIGHT: record.height,
            schemas.WIDTH: record.width, schemas.ORIGINAL_HEIGHT: original_size[0],
            schemas.ORIGINAL_WIDTH: original_size[1], schemas.CHANNELS: record.channels,
            schemas.LABEL: class_ids.get(record.label, schemas.UNLABELED),
            schemas.TEXT: (record.label or '').encode('utf-8'), schemas.URI: examples.uri_bytes(record.uri),
            schemas.SHA256: record.sha256.encode('ascii')}
        if embed:
          fields.update(_embedding_fields(embedding, settings))
          if settings.embedding.only:
            del fields[schemas.IMAGE]
        writer.write(examples.encode_example(fields, dict(record.extras), settings.schema))
        labels.append(record.label)
        longer_sides.append(max(record.height, record.width))
        stored_bytes.append(len(image))
        reencoded += record.reencoded
        resized += original_size != (record.height, record.width)
  shard = {'split': plan.split, 'file': plan.file_name(settings.compression), 'num_examples': len(labels),
           'num_bytes': os.path.getsize(file_path), 'num_reencoded': reencoded, 'num_resized': resized,
           **dataset_info.image_statistics(labels, longer_sides, stored_bytes)}
  return ShardWritten(shard, rejected)


def _batches(read: Iterable[Tuple[ImageRecord, Any]], size: int,
             rejected: List[Rejection]) -> Iterator[List[Tuple[ImageRecord, Tuple[bytes, Tuple[int, int]]]]]:
  """The records read, with their stored images, in batches of ``size`` (the last one
  smaller); the ones rejected go to ``rejected`` instead."""
  batch = []
  for record, stored in read:
    if isinstance(stored, Rejected):
      rejected.append(Rejection.of(record.uri, stored))
      continue
    batch.append((record, stored))
    if len(batch) == size:
      yield batch
      batch = []
  if batch:
    yield batch


def _embedding_fields(embedding: np.ndarray, settings: Settings) -> Dict[str, Any]:
  """The record's embedding and its shape, checked against the model's check before the run."""
  spec = settings.embedding
  if embedding.shape != (spec.num_values,):
    raise RuntimeError(f'{spec.model} gave an embedding of {embedding.size} values; its check gave shape '
                       f'{spec.output_shape}')
  return {schemas.EMBEDDING: embedding, schemas.EMBEDDING_SHAPE: spec.output_shape}


def _stored_image(record: ImageRecord, settings: Settings, open_remote) -> Tuple[bytes, Tuple[int, int]]:
  """The bytes ``record`` stores, re-encoded again if they are a re-encoding, and the
  source's (height, width)."""
  data = reading.read_file(record.uri, settings.max_file_bytes, open_remote)
  if images.sha256_hex(data) != record.source_sha256:
    raise Rejected(rejections.CHANGED_DURING_RUN, 'file content changed after it was validated')
  if not record.reencoded:
    return data, (record.height, record.width)
  stored, original_height, original_width = images.reencode_again(data, settings.stored)
  if images.sha256_hex(stored) != record.sha256:
    raise RuntimeError(f'{record.uri}: re-encoding it again gave other bytes than during validation')
  return stored, (original_height, original_width)
