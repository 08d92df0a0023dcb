"""Writing an --incremental output's shard again without the records of files deleted or changed
since: its other records copied as they are, byte for byte, their images unread.

A plain function, as shard_writer is: the Beam side gives it the earlier shard and its
catalog as local files and moves or uploads what it writes into place.
"""
import dataclasses
import os

import tensorflow as tf

from beam_pipeline.core import rejections
from beam_pipeline.core.messages import ShardRewrite, ShardWritten
from beam_pipeline.core.output import incremental_catalog, output_layout
from beam_pipeline.core.rejections import OutputError
from beam_pipeline.core.settings import COMPRESSIONS, Settings
from beam_pipeline.core.writing import shard_writer


def rewrite_shard(unit: ShardRewrite, earlier_shard: str, earlier_catalog: str, file_path: str,
                  settings: Settings) -> ShardWritten:
  """Writes ``unit``'s shard to the local ``file_path``, with its catalog and index file beside
  it: the records of the local ``earlier_shard`` but those of ``unit.dropped``, in their order.
  OutputError if the shard and its catalog disagree: the output is not what its record says."""
  with open(earlier_catalog, encoding='utf-8', errors='surrogateescape') as f:
    entries = incremental_catalog.entries(f.read())
  compression = COMPRESSIONS[settings.compression]
  try:
    examples = list(tf.data.TFRecordDataset(earlier_shard, compression_type=compression).as_numpy_iterator())
  except tf.errors.OpError as e:
    raise OutputError(f'{earlier_shard}: {rejections.first_line(e)}') from e
  if len(examples) != len(entries):
    raise OutputError(f'{earlier_shard} holds {len(examples)} records where its catalog lists {len(entries)}; '
                      'convert again without --incremental')
  dropped = set(unit.dropped)
  kept = [(entry, example) for entry, example in zip(entries, examples) if entry.uri not in dropped]
  os.makedirs(os.path.dirname(file_path) or '.', exist_ok=True)
  with tf.io.TFRecordWriter(file_path, compression) as writer:
    for _, example in kept:
      writer.write(example)
  index = output_layout.index_file(unit.file) if settings.index_files else None
  if index:
    shard_writer.write_index(output_layout.index_file(file_path), [len(example) for _, example in kept])
  catalog = output_layout.catalog_file(unit.file)
  shard_writer.write_text(output_layout.catalog_beside(file_path, unit.file),
                          incremental_catalog.text(entry for entry, _ in kept))
  options = {'multi_label': settings.multi_label, 'annotations': bool(settings.annotations), 'index_file': index,
             'catalog_file': catalog}
  report = incremental_catalog.report(unit.split, unit.file, [entry for entry, _ in kept],
                                      os.path.getsize(file_path), **options)
  before = incremental_catalog.report(unit.split, unit.file, entries, os.path.getsize(earlier_shard), **options)
  return ShardWritten(report, [], dataclasses.replace(before, replaced=True))
