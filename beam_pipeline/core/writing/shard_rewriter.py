"""Writing an --incremental output's shard again without the records of files deleted or changed
since: its other records copied as they are, byte for byte and framing and all (an uncompressed
shard's), their images unread.

A plain function, as shard_writer is: the Beam side gives it the earlier shard and its
catalog as local files and moves or uploads what it writes into place.
"""
import dataclasses
import os
from typing import Any, Dict, List, Sequence, Tuple

import tensorflow as tf

from beam_pipeline.core import rejections
from beam_pipeline.core.messages import ShardRewrite, ShardWritten
from beam_pipeline.core.output import catalog_entries, output_layout, run_totals
from beam_pipeline.core.rejections import DamagedOutput
from beam_pipeline.core.settings import COMPRESSIONS, Settings
from beam_pipeline.core.writing import record_index, shard_writer


def rewrite_shard(unit: ShardRewrite, earlier: Sequence[Tuple[str, str]], file_path: str,
                  settings: Settings) -> ShardWritten:
  """Writes ``unit``'s shard to the local ``file_path``, with its catalog and index file beside
  it: the records of its sources but those of ``unit.dropped``, those of ``unit.touched`` with
  their new fingerprints. An uncompressed shard's records are copied as bytes, framing and all,
  their checksums checked; a compressed one's are read and framed again (a compressed stream
  cannot be cut). A shard whose records only have new fingerprints keeps its file: only its
  catalog is written again. DamagedOutput if a shard and its catalog disagree, or a shard's
  framing or checksums fail: the output is not what its record says.

  Args:
    unit: the shard to write again: its split and name, its sources, the uris whose records go, and the new
      fingerprints of those kept whose files were touched.
    earlier: each source's local shard and catalog file, in ``unit.sources``' order (no shard where catalog_only).
    file_path: the local file to write, which the Beam side moves or uploads into place.
    settings: the run's settings: its compression, whether it writes index files, and what a report counts.
  """
  dropped, touched = set(unit.dropped), dict(unit.touched)
  options = {'multi_label': settings.multi_label, 'annotations': bool(settings.annotations),
             'index_file': output_layout.index_file(unit.file) if settings.index_files else None}
  if unit.catalog_only:
    return _catalog_rewritten(unit, earlier[0][1], file_path, touched, options)
  kept: List[Tuple[catalog_entries.Entry, bytes]] = []
  replaced = []
  for source, (shard, catalog) in zip(unit.sources, earlier):
    entries = _entries(shard, catalog, settings)
    kept.extend((entry._replace(fingerprint=touched.get(entry.uri, entry.fingerprint)), record)
                for entry, record in entries if entry.uri not in dropped)
    replaced.append(dataclasses.replace(run_totals.shard_report(
        unit.split, source, [entry for entry, _ in entries], os.path.getsize(shard), **options,
        catalog_file=output_layout.catalog_file(source)), replaced=True))
  os.makedirs(os.path.dirname(file_path) or '.', exist_ok=True)
  if COMPRESSIONS[settings.compression]:
    with tf.io.TFRecordWriter(file_path, COMPRESSIONS[settings.compression]) as writer:
      for _, example in kept:
        writer.write(example)
    lengths = [len(example) for _, example in kept]
  else:
    with open(file_path, 'wb') as f:
      for _, framed in kept:
        f.write(framed)
    lengths = [len(framed) - record_index.FRAMING_BYTES for _, framed in kept]
  if settings.index_files:
    shard_writer.write_index(output_layout.index_file(file_path), lengths)
  shard_writer.write_text(output_layout.catalog_beside(file_path, unit.file),
                          catalog_entries.text(entry for entry, _ in kept))
  report = run_totals.shard_report(unit.split, unit.file, [entry for entry, _ in kept], os.path.getsize(file_path),
                                   **options, catalog_file=output_layout.catalog_file(unit.file))
  # The lookup's lines that change: a merge's records now in this shard, touched records' fingerprints.
  moved = len(unit.sources) > 1
  catalogued = tuple(entry for entry, _ in kept if moved or entry.uri in touched)
  return ShardWritten(dataclasses.replace(report, rewritten=True, shard_id=unit.shard_id), [], tuple(replaced),
                      catalogued)


def _catalog_rewritten(unit: ShardRewrite, catalog: str, file_path: str, touched: Dict[str, str],
                       options: Dict[str, Any]) -> ShardWritten:
  """A shard whose records all stay, some with new fingerprints: only its catalog is written
  again, beside ``file_path``; the shard and its index file are left as they are (the report
  says so, catalog_only), unread.

  Args:
    unit: the shard (catalog_only), with its size.
    catalog: the local path of its earlier catalog, which the update checked against the run record.
    file_path: where the shard would be written: its catalog goes beside it.
    touched: the new fingerprint of each touched record's uri.
    options: what the reports count (run_totals.shard_report's keywords).
  """
  with open(catalog, encoding='utf-8', errors='surrogateescape') as f:
    entries = catalog_entries.entries(f.read())
  kept = [entry._replace(fingerprint=touched.get(entry.uri, entry.fingerprint)) for entry in entries]
  os.makedirs(os.path.dirname(file_path) or '.', exist_ok=True)
  shard_writer.write_text(output_layout.catalog_beside(file_path, unit.file), catalog_entries.text(kept))
  catalog_file = output_layout.catalog_file(unit.file)
  replaced = run_totals.shard_report(unit.split, unit.file, entries, unit.num_bytes, **options,
                                     catalog_file=catalog_file)
  report = run_totals.shard_report(unit.split, unit.file, kept, unit.num_bytes, **options, catalog_file=catalog_file)
  return ShardWritten(dataclasses.replace(report, rewritten=True, catalog_only=True, shard_id=unit.shard_id), [],
                      (dataclasses.replace(replaced, replaced=True),),
                      tuple(entry for entry in kept if entry.uri in touched))


def _entries(shard: str, catalog: str, settings: Settings) -> List[Tuple[catalog_entries.Entry, bytes]]:
  """(catalog entry, record) of each record of the local ``shard``: its framed bytes as they lie
  in an uncompressed shard, its serialized Example in a compressed one."""
  with open(catalog, encoding='utf-8', errors='surrogateescape') as f:
    entries = catalog_entries.entries(f.read())
  try:
    if COMPRESSIONS[settings.compression]:
      records = list(tf.data.TFRecordDataset(shard, compression_type=COMPRESSIONS[settings.compression]
                                             ).as_numpy_iterator())
    else:
      with open(shard, 'rb') as f:
        data = f.read()
      records = [data[offset:offset + size] for offset, size in record_index.checked_spans(data)]
  except (tf.errors.OpError, ValueError) as e:
    raise DamagedOutput(f'{shard}: {rejections.first_line(e)}') from e
  if len(records) != len(entries):
    raise DamagedOutput(f'{shard} holds {len(records)} records where its catalog lists {len(entries)}')
  return list(zip(entries, records))
