"""The catalog's lookups by uri and by content (core/output/catalog_lookup.py): read for an
update, and written again for the commit where a run changes them.

Only what changed crosses a shuffle on its way to a lookup file: the entries written (new
shards, records merged or touched) and the identities of the records that went. One worker per
file they reach adds them to the file's delta, or where that grows past its share
(catalog_lookup.DELTA_FRACTION) writes the file again with them, its other lines copied
unparsed; the files nothing reached stay as they are.
"""
import collections
import dataclasses
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

import apache_beam as beam
from apache_beam.pvalue import AsSingleton

from beam_pipeline.pipeline.output import output_dir
from beam_pipeline.core.output import catalog_lookup, incremental_update, output_layout
from beam_pipeline.core.output.catalog_entries import Entry
from beam_pipeline.core.output.catalog_lookup import Lookup
from beam_pipeline.core.output.run_record import LookupFile, RunRecord
from beam_pipeline.core.settings import Settings


def read_checked(output: str, found: LookupFile, lookup: Lookup) -> str:
  """The text of ``lookup``'s file ``found`` with its delta's changes made (read_changes)."""
  data, changes = read_changes(output, found, lookup)
  return (lookup.with_changes(data, changes) if changes else data).decode('utf-8', 'surrogateescape')


def read_changes(output: str, found: LookupFile, lookup: Lookup) -> Tuple[bytes, Dict[Any, Optional[str]]]:
  """The bytes of ``lookup``'s file ``found`` and its delta's changes (Lookup.delta_changes), each
  checked against the run record (catalog_lookup.check, check_delta): for a reader to whom the
  lines' order does not matter, which need not make them."""
  data = output_dir.read_listed(output, found.file)
  catalog_lookup.check(found, data)
  return data, _delta_changes(output, found, lookup)


def _delta_changes(output: str, found: LookupFile, lookup: Lookup) -> Dict[Any, Optional[str]]:
  """The changes in the delta of ``lookup``'s file ``found``, checked against the run record; none without one."""
  if found.delta_entries is None:
    return {}
  delta = output_dir.read_listed(output, output_layout.lookup_delta_file(found.file))
  catalog_lookup.check_delta(found, delta)
  return lookup.delta_changes(delta.decode('utf-8', 'surrogateescape'))


def files_of(record: RunRecord, lookup: Lookup) -> List[LookupFile]:
  """The files of ``lookup`` that ``record`` lists."""
  if record.catalog_lookup is None:
    return []
  return record.catalog_lookup.content_files if lookup.by_content else record.catalog_lookup.files


class WriteLookup(beam.PTransform):
  """From (shard id, catalog entries) of what a run wrote (WriteOutputs' tags.CATALOGUED) to the
  LookupFile of each file of ``lookup`` it wrote again, staged for the commit.

  An update that keeps the earlier lookups gives its run record (``earlier``) and the (slot,
  identity) of each record it dropped (``dropped``); one that builds them again gives (slot,
  line) of every earlier entry instead (``rebuilt``). A first conversion gives neither."""

  def __init__(self, lookup: Lookup, output: str, run_id: str, count: beam.PCollection,
               earlier: Optional[beam.PCollection] = None, dropped: Optional[beam.PCollection] = None,
               rebuilt: Optional[beam.PCollection] = None):
    """A step that writes the files of a lookup that a run changes.

    Args:
      lookup: the lookup written (catalog_lookup.BY_URI or BY_CONTENT).
      output: the output folder, whose earlier lookup files are read.
      run_id: the run, whose staging folder the files go to.
      count: one element: how many files the lookup has (catalog_lookup.count_for).
      earlier: one element: the run record of the dataset an update keeps the lookups of; None otherwise.
      dropped: (slot, incremental.Dropped) of each record an update dropped (a file removed or changed).
      rebuilt: (slot, line) of every entry of the earlier catalog, where the lookups are built again, each line as the
        file holds it (output_layout.encoded).
    """
    super().__init__()
    self._lookup = lookup
    self._output = output
    self._run_id = run_id
    self._count = count
    self._earlier = earlier
    self._dropped = dropped
    self._rebuilt = rebuilt

  def expand(self, catalogued):
    lookup = self._lookup
    sides = {'added': catalogued | 'LookupLines' >> beam.FlatMap(_lines, lookup, AsSingleton(self._count))}
    if self._earlier is not None:
      sides['earlier'] = self._earlier | 'LookupFiles' >> beam.FlatMap(
          lambda record: [(found.slot, found) for found in files_of(record, lookup)])
    if self._dropped is not None:
      sides['dropped'] = self._dropped
    if self._rebuilt is not None:
      sides['rebuilt'] = self._rebuilt
    return (sides
            | 'BySlot' >> beam.CoGroupByKey()
            | 'WriteLookupFiles' >> beam.FlatMap(_written, lookup, self._output, self._run_id,
                                                 AsSingleton(self._count)))


def _lines(catalogued: Tuple[str, List[Entry]], lookup: Lookup, count: int) -> Iterator[Tuple[int, bytes]]:
  """The lines of one shard's entries in ``lookup``, encoded together per file they go to
  (output_layout.encoded: lines cross a shuffle as the files hold them, since a name that is not
  UTF-8 holds lone surrogates, which Beam's string coders refuse)."""
  shard, shard_entries = catalogued
  by_slot: Dict[int, List[str]] = collections.defaultdict(list)
  for entry in shard_entries:
    by_slot[lookup.slot_of(entry, count)].append(lookup.line(shard, entry))
  for slot, lines in by_slot.items():
    yield slot, output_layout.encoded(''.join(lines))


def _written(joined: Tuple[int, Mapping[str, Iterable[Any]]], lookup: Lookup, output: str, run_id: str,
             count: int) -> Iterator[LookupFile]:
  """One lookup file's changes, if anything reached it: the identities dropped and the lines
  added, with its delta's earlier ones in its delta; or, past the delta's share or without an
  earlier file, the file written again whole: its earlier text (the file, or the lines of a
  lookup built again) with them.

  Args:
    joined: (slot, {'added': lines (_lines), 'dropped': incremental.Dropped, 'earlier': its LookupFile, 'rebuilt':
      lines}), lines as the files hold them.
    lookup: the lookup the file is of.
    output: the output folder, whose earlier lookup file is read.
    run_id: the run, whose staging folder the file goes to.
    count: how many files the lookup has.
  """
  slot, sides = joined
  added = [line for data in sides['added'] for line in data.decode('utf-8').splitlines(keepends=True)]
  dropped = {value.identity for value in sides.get('dropped', ())}
  rebuilt = [data.decode('utf-8') for data in sides.get('rebuilt', ())]
  if not (added or dropped or rebuilt):
    return
  earlier = list(sides.get('earlier', ()))
  name = lookup.file_name(slot, count)
  if earlier:  # its changes added to its delta's, or with them the file written again, sorted
    found = earlier[0]
    changes = _delta_changes(output, found, lookup)
    changes.update(dict.fromkeys(dropped))
    changes.update((lookup.identity(line), line) for line in added)
    if len(changes) * catalog_lookup.DELTA_FRACTION <= found.own_entries:
      delta = lookup.delta(changes)
      output_dir.stage_bytes(output, run_id, output_layout.lookup_delta_file(name), delta)
      yield dataclasses.replace(found, num_entries=found.own_entries + len(changes), delta_entries=len(changes),
                                delta_sha256=catalog_lookup.checksum(delta))
      return
    data = lookup.with_changes(output_dir.read_listed(output, found.file), changes)
  else:
    data = output_layout.encoded(lookup.updated(''.join(rebuilt), dropped, added))
  output_dir.stage_bytes(output, run_id, name, data)
  yield LookupFile(slot=slot, file=name, num_entries=data.count(b'\n'), sha256=catalog_lookup.checksum(data))


class WriteLookups(beam.PTransform):
  """Both lookups of an --incremental run (WriteLookup each): {'count': how many files each has,
  one element; 'by_uri' and 'by_content': the LookupFile of each file written again}."""

  def __init__(self, settings: Settings, decision: incremental_update.Decision, num_listed: beam.PCollection,
               earlier: Optional[beam.PCollection], changes: Optional[Any]):
    """A step that writes the files of both lookups that a run changes.

    Args:
      settings: the run's settings: its output and id.
      decision: the dataset an update updates, how many files its lookups have, and whether it builds them again.
      num_listed: one element: how many inputs were listed, which sets the number of files of new lookups.
      earlier: one element: the updated dataset's run record; None for a run that updates nothing.
      changes: an update's incremental.Changes: the records it dropped, or every line of lookups built again.
    """
    super().__init__()
    self._settings = settings
    self._decision = decision
    self._num_listed = num_listed
    self._earlier = earlier
    self._changes = changes

  def expand(self, catalogued):
    decision, changes, output, run = self._decision, self._changes, self._settings.output, self._settings.run_id
    count = (catalogued.pipeline | 'Count' >> beam.Create([decision.lookup_count]) if decision.updates
             else self._num_listed | 'Count' >> beam.Map(catalog_lookup.count_for))
    kept = self._earlier if changes and not decision.lookup_rebuilt else None
    return {'count': count,
            'by_uri': catalogued | 'ByUri' >> WriteLookup(catalog_lookup.BY_URI, output, run, count, kept,
                                                          changes and changes.dropped, changes and changes.rebuilt),
            'by_content': catalogued | 'ByContent' >> WriteLookup(
                catalog_lookup.BY_CONTENT, output, run, count, kept, changes and changes.dropped_content,
                changes and changes.rebuilt_content)}
