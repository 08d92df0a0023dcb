"""Writing an --incremental output's shard again without the records of files deleted or changed
since: its other records copied as they are, byte for byte, their images unread.

A plain function, as shard_writer is: the Beam side gives it the earlier shard and its
catalog as local files and moves or uploads what it writes into place.
"""
import dataclasses
import os
from typing import List, Sequence, Tuple

import tensorflow as tf

from beam_pipeline.core import rejections
from beam_pipeline.core.messages import ShardRewrite, ShardWritten
from beam_pipeline.core.output import incremental_catalog, output_layout
from beam_pipeline.core.rejections import OutputError
from beam_pipeline.core.settings import COMPRESSIONS, Settings
from beam_pipeline.core.writing import shard_writer


def rewrite_shard(unit: ShardRewrite, earlier: Sequence[Tuple[str, str]], file_path: str,
                  settings: Settings) -> ShardWritten:
  """Writes ``unit``'s shard to the local ``file_path``, with its catalog and index file beside
  it: the records of its sources (``earlier``: each one's local shard and catalog, in order) but
  those of ``unit.dropped``. OutputError if a shard and its catalog disagree: the output is not
  what its record says."""
  dropped = set(unit.dropped)
  options = {'multi_label': settings.multi_label, 'annotations': bool(settings.annotations),
             'index_file': output_layout.index_file(unit.file) if settings.index_files else None}
  kept: List[Tuple[incremental_catalog.Entry, bytes]] = []
  replaced = []
  for source, (shard, catalog) in zip(unit.sources, earlier):
    entries = _entries(shard, catalog, settings)
    kept.extend((entry, example) for entry, example in entries if entry.uri not in dropped)
    replaced.append(dataclasses.replace(incremental_catalog.report(
        unit.split, source, [entry for entry, _ in entries], os.path.getsize(shard), **options,
        catalog_file=output_layout.catalog_file(source)), replaced=True))
  os.makedirs(os.path.dirname(file_path) or '.', exist_ok=True)
  with tf.io.TFRecordWriter(file_path, COMPRESSIONS[settings.compression]) as writer:
    for _, example in kept:
      writer.write(example)
  if settings.index_files:
    shard_writer.write_index(output_layout.index_file(file_path), [len(example) for _, example in kept])
  shard_writer.write_text(output_layout.catalog_beside(file_path, unit.file),
                          incremental_catalog.text(entry for entry, _ in kept))
  report = incremental_catalog.report(unit.split, unit.file, [entry for entry, _ in kept], os.path.getsize(file_path),
                                      **options, catalog_file=output_layout.catalog_file(unit.file))
  return ShardWritten(dataclasses.replace(report, rewritten=True), [], tuple(replaced))


def _entries(shard: str, catalog: str, settings: Settings) -> List[Tuple[incremental_catalog.Entry, bytes]]:
  """(catalog entry, serialized Example) of each record of the local ``shard``."""
  with open(catalog, encoding='utf-8', errors='surrogateescape') as f:
    entries = incremental_catalog.entries(f.read())
  try:
    examples = list(tf.data.TFRecordDataset(shard, compression_type=COMPRESSIONS[settings.compression]
                                            ).as_numpy_iterator())
  except tf.errors.OpError as e:
    raise OutputError(f'{shard}: {rejections.first_line(e)}') from e
  if len(examples) != len(entries):
    raise OutputError(f'{shard} holds {len(examples)} records where its catalog lists {len(entries)}; '
                      'convert again without --incremental')
  return list(zip(entries, examples))
