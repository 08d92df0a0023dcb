"""An --incremental update's planning at scale, simulated (issue 36): N catalogued records and
today's listing of them with a change, through the pipeline's own incremental transforms.

Usage: python -m benchmarks.incremental_planning [--records 1000000] [--change-pct 1] [--modes in_process]
                                                 [--joins lookup,by_uri] [--near-copies off,group,index,memory,direct]
       (also: python -m benchmarks.planning --incremental [--records 1000000,5000000])

As benchmarks.planning does for a first conversion, each N runs in a child process under
benchmarks.measure. The child writes the earlier dataset's catalog (one JSON-lines file per
shard, shards of 150 MiB of ~110 KB records in three splits, a copy every hundredth record),
its lookups by uri and by content (catalog_lookup.py; none with --joins by_uri: an output from
before them) and its run record under a scratch folder, then builds a pipeline that generates
today's listing in chunks (a thousand InputItems an element) and runs it through

* incremental.FindChanges: each slot of the lookup by uri read by one worker and met with
  today's items of its uris (without a lookup, the catalog read shard by shard and each entry
  sent to its slot, the lookups built on the way), catalog_entries.change per uri, the
  dropped records grouped by shard into ShardRewrites, incremental_update.merges' merges;
* a stand-in for validation (todo items to CheckedImages, no pixels);
* earlier_copies.EarlierCopies: each slot of the lookup by content read whole and met with the
  new records of its content hashes, a new copy of an earlier picture placed in its split;
* with --near-copies group, earlier_copies.NearEarlierCopies: every catalogued perceptual hash
  read from the lookup by content and grouped with the new ones, as Dataflow groups them (the
  simulated pictures' hashes are random bits, copies sharing theirs); with index, only the new
  and dropped ones queried in the index; with memory, every hash grouped in one step, as a small
  dataset's update on the DirectRunner groups them; with direct, grouped in one step and the
  index built from it, as a large dataset's first update on the DirectRunner;
* graph.plan with the earlier dataset's Decision and the Changes: KeptCounts per (class,
  split) as AssignSplits' side input, then planning's own groupings;
* lookup_files.WriteLookup, both lookups: each file a change reaches written again.

Today's listing: of the catalogued files, change_pct/3 % changed (new fingerprint and
content) and as many removed; as many new ones added, one in ten a copy of a catalogued
picture under a new name. The largest group each keyed step held (Beam distributions:
planning's records_per_key_*, and BySlot, ByContentSlot and ByShard counted here) must not
grow with N, only with the change and the lookup's files; the size of what the graph carries
(the pickled Decision) is reported beside them, as is the time per record, and that time less
what generating the listing alone takes (a real update lists its input instead).
"""
import argparse
import dataclasses
import gc
import hashlib
import itertools
import json
import logging
import pickle
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np

from benchmarks import planning
from benchmarks.planning import CHUNK, CLASSES, DUPLICATE_EVERY, RESULTS, SPLITS

SCRATCH = Path(__file__).resolve().parents[1] / 'work' / 'bench-out' / 'incremental-planning'
TARGET_SHARD_BYTES = 150 * 2**20
MEAN_BYTES = 110_000
STAGES = ('BySlot', 'ByContentSlot', 'ByShard', 'GroupByContent', 'GroupByOrder', 'GroupByShard')
JOINS = ('lookup', 'by_uri')  # through the catalog's lookup; as before it (and as it is built again)
_SPREAD = 2654435761  # Knuth's multiplicative hash: changes spread over the whole catalog


def _fate(index: int, change_pct: float) -> str:
  """What became of catalogued file ``index`` since the earlier run."""
  every = round(300 / change_pct)  # change_pct/3 % each changed and removed
  slot = (index * _SPREAD) % every
  return 'removed' if slot == 0 else 'changed' if slot == 1 else 'unchanged'


def num_added(count: int, change_pct: float) -> int:
  return max(1, round(count * change_pct / 300))


def _label(rng: np.random.Generator, count: int) -> np.ndarray:
  return np.minimum(rng.zipf(1.3, count), CLASSES) - 1


def _uri(index: int, label: str) -> str:
  return f'gs://photo-collection/scraped/2026/{label}/{index:010d}.jpg'


def _sha(index: int, version: int = 0) -> str:
  return hashlib.sha256(index.to_bytes(8, 'little') + version.to_bytes(1, 'little')).hexdigest()


def _content(index: int) -> str:
  """A catalogued record's content hash: a copy every DUPLICATE_EVERY records."""
  return _sha(index - 1 if index % DUPLICATE_EVERY == DUPLICATE_EVERY - 1 else index)


def _fingerprint(index: int, version: int = 0) -> str:
  """A Cloud Storage object's: a changed one has new bytes, so a new CRC32C as well as a new generation."""
  return f'gcs:{1700000000000000 + index * 10 + version}:{(index * 4 + version) & 0xffffffff:08x}:110000'


def _labels(start: int, count: int) -> List[str]:
  classes = _label(np.random.default_rng(start), count)
  return [f'class_{c:04d}' for c in classes]


def _phash(sha: str) -> str:
  """A picture's perceptual hash: random bits, the same for its copies, so that near copies are as
  rare as among unrelated photos and the grouping's cost is that of its hashes alone."""
  return sha[-16:]


def _split(sha: str) -> str:
  value = int(sha[:8], 16) / 2**32
  return 'train' if value < 0.8 else 'validation' if value < 0.9 else 'test'


def write_catalog(count: int, folder: Path, lookup: bool = True, near_distance: int = 0,
                  delta_share: float = 0.0) -> Any:
  """The earlier dataset of ``count`` records: catalog files under ``folder``, and its lookup by
  uri unless ``lookup`` is False (an output from before lookups, which an update joins by uri
  and builds the lookup of), with its near-copy index of the grouping at ``near_distance`` (0:
  none); its RunRecord (which lists every shard) and the Decision of an update of it. Each
  lookup file holds ``delta_share`` of the most entries its delta may hold
  (catalog_lookup.DELTA_FRACTION) in its delta, as earlier updates would have left them: 0 as a
  first conversion writes it, 1 where the next change writes it again whole."""
  from beam_pipeline.core.output import catalog_lookup, catalog_entries, incremental_update, run_totals  # pylint: disable=import-outside-toplevel
  from beam_pipeline.core.output.catalog_entries import Entry  # pylint: disable=import-outside-toplevel
  from beam_pipeline.core.images import perceptual_hash  # pylint: disable=import-outside-toplevel
  from beam_pipeline.core.output.run_record import CatalogLookup, LookupFile  # pylint: disable=import-outside-toplevel
  shutil.rmtree(folder, ignore_errors=True)
  (folder / 'catalog').mkdir(parents=True)
  per_shard = TARGET_SHARD_BYTES // MEAN_BYTES
  open_shards: Dict[str, Tuple[int, List[Entry]]] = {}
  reports = []
  lookup_count = catalog_lookup.count_for(count)
  lookups = (catalog_lookup.BY_URI, catalog_lookup.BY_CONTENT)
  lookup_lines: Dict[Tuple[int, int], List[str]] = {}  # (lookup, slot): lines

  def close(split: str) -> None:
    number, entries = open_shards.pop(split)
    name = f'{split}-{number:05d}.tfrecord'
    (folder / 'catalog' / f'{split}-{number:05d}.jsonl').write_text(catalog_entries.text(entries))
    size = sum(e.stored_bytes for e in entries)
    with open(folder / name, 'wb') as shard:  # sparse: of the size the update checks, holding no disk
      shard.truncate(size)
    report = run_totals.shard_report(split, name, entries, size, multi_label=False, annotations=False,
                                        catalog_file=f'catalog/{split}-{number:05d}.jsonl')
    if lookup:
      report = dataclasses.replace(report, shard_id=catalog_lookup.shard_id(report.catalog_sha256))
      for entry in entries:
        for kind, by in enumerate(lookups):
          lookup_lines.setdefault((kind, by.slot_of(entry, lookup_count)), []).append(
              by.line(report.shard_id, entry))
    reports.append(report)

  numbers = {'train': 0, 'validation': 0, 'test': 0}
  for start in range(0, count, CHUNK):
    labels = _labels(start, min(CHUNK, count - start))
    for offset, label in enumerate(labels):
      index = start + offset
      sha = _content(index)
      split = _split(sha)
      entry = Entry(_uri(index, label), _fingerprint(index), sha, split, label, (), (), 500, MEAN_BYTES, False,
                    False, False, False, (), _phash(sha))
      if split not in open_shards:
        open_shards[split] = (numbers[split], [])
        numbers[split] += 1
      open_shards[split][1].append(entry)
      if len(open_shards[split][1]) >= per_shard:
        close(split)
  for split in list(open_shards):
    close(split)
  settings = {'input': 'gs://photo-collection/**', 'output': str(folder), 'incremental': True, 'schema': 'default',
              'compression': 'none', 'splits': {'train': 0.8, 'validation': 0.1, 'test': 0.1}}
  labels = sorted({label for report in reports for label in report.classes})
  files: Tuple[List[Any], List[Any]] = ([], [])
  for (kind, slot), lines in sorted(lookup_lines.items()):
    lines = lookups[kind].updated('', set(), lines).splitlines(keepends=True)
    name = lookups[kind].file_name(slot, lookup_count)
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    moved = int(delta_share * len(lines) / catalog_lookup.DELTA_FRACTION)  # lines the file's delta adds back
    kept_apart = set(lines[::len(lines) // moved][:moved]) if moved else set()  # each line is of its own identity
    delta = {lookups[kind].identity(line): line for line in kept_apart}
    text = ''.join(line for line in lines if line not in kept_apart)
    (folder / name).write_text(text)
    found = LookupFile(slot=slot, file=name, num_entries=len(lines), sha256=catalog_lookup.checksum(text.encode()))
    if delta:
      data = lookups[kind].delta(delta)
      found = dataclasses.replace(found, delta_entries=len(delta), delta_sha256=catalog_lookup.checksum(data))
      (folder / found.files[1]).write_bytes(data)
    files[kind].append(found)
  record = run_totals.build(written=run_totals.written_totals(reports), labels=labels, errors_by_reason={},
                            num_errors_files=0, duplicates={'num_groups': 0, 'num_extra_copies': 0, 'groups': []},
                            dedupe=False, num_removed=0, settings=settings, runner='DirectRunner',
                            catalog_lookup=(CatalogLookup(count=lookup_count, files=files[0], content_files=files[1],
                                                          near_index=write_index(count, folder, near_distance,
                                                                                 lookup_count)
                                                          if near_distance else None)
                                            if lookup else None))
  started = time.monotonic()
  merges = incremental_update.merges(record, TARGET_SHARD_BYTES)
  merges_s = time.monotonic() - started
  return record, incremental_update.Decision.update(record, tuple(merges), perceptual_hash.NAME), merges_s


def write_index(count: int, folder: Path, distance: int, files_count: int) -> Any:
  """The near-copy index of the catalogued pictures of write_catalog, grouped at ``distance`` in
  memory (near_copies.anchors over every node) and written as an update writes it; its NearIndex."""
  from beam_pipeline.core.images import perceptual_hash  # pylint: disable=import-outside-toplevel
  from beam_pipeline.core.output import catalog_lookup, output_layout  # pylint: disable=import-outside-toplevel
  from beam_pipeline.core.output.run_record import LookupFile, NearIndex  # pylint: disable=import-outside-toplevel
  from beam_pipeline.core.planning import near_copies, near_copy_nodes, near_index  # pylint: disable=import-outside-toplevel
  priority = near_copies.priority(False, 500, MEAN_BYTES)
  shas = sorted({_content(index) for index in range(count)})
  table = near_copy_nodes.file_table((sha, _phash(sha), priority, '') for sha in shas)
  nodes = near_copy_nodes.nodes_of(table).nodes
  ranks = near_index.ranks(nodes['priority'], nodes['phash'], nodes['colour'])
  order = np.argsort(ranks)
  nodes, ranks = nodes[order], ranks[order]
  anchor = near_copies.anchors(nodes['phash'].view(np.uint64), distance,
                               colours=near_copies.parse_colours(nodes['colour']),
                               blocks=nodes['blocks'].view(np.uint64)).anchor
  other = np.flatnonzero(anchor != np.arange(len(anchor)))
  finals = np.empty(len(other), near_index.FOUND)
  finals['rank'], finals['blocks'], finals['anchor'] = ranks[other], nodes['blocks'][other], ranks[anchor[other]]
  listed = {'nodes': [], 'bands': []}

  def write(kind: str, slot: int, name: str, data: bytes, entries: int) -> None:
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)
    listed[kind].append(LookupFile(slot=slot, file=name, num_entries=entries,
                                   sha256=catalog_lookup.checksum(data)))

  # A slot, then a band, at a time, as BuildIndex writes them: the simulation's own memory is not the update's.
  keys = near_index.file_keys_of(table)
  del table, nodes, anchor
  slots = near_index.node_slots(near_index.file_nodes(keys), files_count)
  final_slots = near_index.node_slots(near_index.nodes_of(finals['rank']), files_count)
  taken = near_index.nodes_of(finals['anchor'])
  taken_slots = near_index.node_slots(taken, files_count)
  grouped = []
  for slot in range(files_count):
    node_slot = near_index.built_slot(keys[slots == slot], finals[final_slots == slot], taken[taken_slots == slot])
    if len(node_slot.files):
      write('nodes', slot, output_layout.near_node_file(slot, files_count), node_slot.encoded(), len(node_slot.files))
    found = near_index.nodes(node_slot.files)
    rows = np.empty(len(found.rank), near_index.FOUND)
    rows['rank'], rows['blocks'], rows['anchor'] = found.rank, found.blocks, node_slot.anchors
    grouped.append(rows)
  del keys
  every = np.concatenate(grouped)
  layout = near_index.Bands(distance, files_count)
  for band in range(distance + 1):
    for file, rows in layout.by_file(every, band):
      rows = layout.rows(rows, band, rows['anchor'])
      write('bands', layout.file_slot(band, file), output_layout.near_band_file(band, file, files_count),
            rows.tobytes(), len(rows))
  return NearIndex(distance=distance, hash=perceptual_hash.NAME, **listed)


def listing_chunk(chunk: Tuple[int, int], catalogued: int, change_pct: float) -> List[Any]:
  """Today's listing of items ``start`` to ``start + count``: catalogued ones below
  ``catalogued`` (removed ones left out, changed ones with a new fingerprint), new ones above."""
  from beam_pipeline.core.messages import InputItem  # pylint: disable=import-outside-toplevel
  start, count = chunk
  items = []
  for offset, label in enumerate(_labels(start, count) if start < catalogued else
                                 [f'class_{c:04d}' for c in _label(np.random.default_rng(start), count)]):
    index = start + offset
    if index < catalogued:
      fate = _fate(index, change_pct)
      if fate == 'removed':
        continue
      items.append(InputItem(_uri(index, label), label=label, fingerprint=_fingerprint(index, fate == 'changed')))
    else:
      items.append(InputItem(_uri(index, label), label=label, fingerprint=_fingerprint(index)))
  return items


def validated(batch: List[Any], catalogued: int) -> List[Any]:
  """Validation's stand-in: CheckedImages of the items to convert, without pixels; a changed
  file has new content, one new file in ten is a copy of a catalogued picture."""
  from beam_pipeline.core.messages import CheckedImage  # pylint: disable=import-outside-toplevel
  from beam_pipeline.core.planning import sharding  # pylint: disable=import-outside-toplevel
  records = []
  for item in batch:
    index = int(item.uri.rsplit('/', 1)[1].split('.')[0])
    if index < catalogued:
      content = _sha(index, 1)
    elif index % 10 == 0:
      content = _content((index * _SPREAD) % catalogued)
    else:
      content = _sha(index)
    records.append(CheckedImage(item.uri, item.label, None, (), content, content, MEAN_BYTES, 'jpeg', 375, 500, 3,
                                False, sharding.order_key(content, item.uri), fingerprint=item.fingerprint,
                                phash=_phash(content)))
  return records


def _counted(stage: str, function):
  """``function`` of a grouped element, counting the element's group into stage's distribution."""
  def counted(grouped, *args):
    from beam_pipeline.pipeline import tags  # pylint: disable=import-outside-toplevel
    _, values = grouped
    size = sum(len(list(v)) for v in values.values()) if isinstance(values, dict) else len(list(values))
    tags.records_per_key(stage).update(size)
    return function(grouped, *args)
  return counted


def _measured_rewrite(grouped, merges):
  from beam_pipeline.pipeline import incremental  # pylint: disable=import-outside-toplevel
  _instrument()  # in a worker process of its own, too
  return _counted('ByShard', incremental._ORIGINAL['rewrite'])(grouped, merges)  # pylint: disable=protected-access


def _measured_slot(self, joined, *args):
  """_CompareSlot.process, counting the items one slot of the lookup by uri meets."""
  from beam_pipeline.pipeline import incremental, tags  # pylint: disable=import-outside-toplevel
  _instrument()  # in a worker process of its own, too
  _, items = joined
  gathered = items['listed'] if isinstance(items, dict) else items
  tags.records_per_key('BySlot').update(sum(len(value.uris) for value in gathered))
  return incremental._ORIGINAL['slot'](self, joined, *args)  # pylint: disable=protected-access


def _measured_content_slot(joined, *args):
  """earlier_copies._placed_in_slot, counting the new records one slot of the lookup by content meets."""
  from beam_pipeline.pipeline import incremental, tags  # pylint: disable=import-outside-toplevel
  _instrument()  # in a worker process of its own, too
  _, sides = joined
  tags.records_per_key('ByContentSlot').update(sum(len(list(values)) for values in sides['new']))
  return incremental._ORIGINAL['content_slot'](joined, *args)  # pylint: disable=protected-access


def _instrument() -> None:
  """The update's per-group functions, counting each group's size as they run."""
  from beam_pipeline.pipeline import earlier_copies, incremental  # pylint: disable=import-outside-toplevel
  if not hasattr(incremental, '_ORIGINAL'):
    incremental._ORIGINAL = {'rewrite': incremental._rewrite,  # pylint: disable=protected-access
                             'slot': incremental._CompareSlot.process,  # pylint: disable=protected-access
                             'content_slot': earlier_copies._placed_in_slot}  # pylint: disable=protected-access
    incremental._rewrite = _measured_rewrite  # pylint: disable=protected-access
    incremental._CompareSlot.process = _measured_slot  # pylint: disable=protected-access
    earlier_copies._placed_in_slot = _measured_content_slot  # pylint: disable=protected-access


def run_update(count: int, mode: str, change_pct: float, join: str = 'lookup', near: str = 'off',
               delta_share: float = 0.0) -> Dict[str, Any]:
  """Plans an update of ``count`` catalogued records in this process's pipeline, through the
  catalog's lookup or (``join`` 'by_uri') as before it, building it; with ``near`` 'group', its
  new records' perceptual hashes grouped with every catalogued one (earlier_copies.NearEarlierCopies,
  as --near_copies=group does where the dataset has no near-copy index), the index built on the
  way; with 'index', queried in the index the earlier run left; with 'memory', every hash grouped in
  one step and no index kept (earlier_copies.grouped_in_memory); with 'direct', grouped in one step
  and the index built from it (NearEarlierCopies's ``one_machine``); what the child reports. Beam
  looks at each DoFn once, as it does in the launcher (beam_internals.dofn_specs_kept)."""
  from beam_pipeline.compat import beam_internals  # pylint: disable=import-outside-toplevel
  with beam_internals.dofn_specs_kept():
    return _run_update(count, mode, change_pct, join, near, delta_share)


def _run_update(count: int, mode: str, change_pct: float, join: str, near: str, delta_share: float
                ) -> Dict[str, Any]:
  """run_update's work, its arguments as run_update takes them."""
  import apache_beam as beam  # pylint: disable=import-outside-toplevel
  from apache_beam.metrics.metric import MetricsFilter  # pylint: disable=import-outside-toplevel

  from beam_pipeline.compat import beam_internals  # pylint: disable=import-outside-toplevel
  from beam_pipeline.pipeline import coders, earlier_copies, graph, incremental, local_runner  # pylint: disable=import-outside-toplevel
  from beam_pipeline.pipeline.output import lookup_files  # pylint: disable=import-outside-toplevel
  from beam_pipeline.core.output import catalog_lookup, catalog_entries  # pylint: disable=import-outside-toplevel
  from beam_pipeline.core.messages import CheckedImage, InputItem  # pylint: disable=import-outside-toplevel
  from beam_pipeline.core.images import perceptual_hash  # pylint: disable=import-outside-toplevel
  from beam_pipeline.core.planning import near_copies, splitting  # pylint: disable=import-outside-toplevel
  from beam_pipeline.core.settings import InputSpec, LabelSource, Settings  # pylint: disable=import-outside-toplevel

  _instrument()
  folder = SCRATCH / str(count)
  started = time.monotonic()
  added = num_added(count, change_pct)
  total = count + added
  listed = total - sum(1 for i in range(count) if _fate(i, change_pct) == 'removed')
  record, decision, merges_s = write_catalog(
      count, folder, lookup=join == 'lookup',
      near_distance=near_copies.distance_for(listed, perceptual_hash.NEAR_DISTANCE) if near == 'index' else 0,
      delta_share=delta_share)
  catalog_s = time.monotonic() - started
  shards = sum(len(split.shards) for split in record.splits.values())
  flags = ['--direct_running_mode=multi_processing', '--direct_num_workers=2'] if mode == 'multi_processing' else []
  options = beam_internals.OptionsViewedOnce(flags)  # as the launcher makes them
  settings = Settings(InputSpec('glob', 'gs://photo-collection/**'), str(folder), LabelSource('manifest'),
                      'default', TARGET_SHARD_BYTES, 'none', 10**8, 100 * 2**20, splitting.parse_splits(SPLITS), False,
                      224, True, 32, 0.05, incremental=True, near_copies='off' if near == 'off' else 'group',
                      run_id='bench')
  coders.register()
  p = beam.Pipeline(runner=local_runner.runner_for(options), options=options)
  chunks = ([(start, min(CHUNK, count - start)) for start in range(0, count, CHUNK)] +
            [(start, min(CHUNK, total - start)) for start in range(count, total, CHUNK)])
  batches = (p
             | 'Chunks' >> beam.Create(chunks)
             | 'Listing' >> beam.Map(listing_chunk, count, change_pct).with_output_types(List[InputItem]))
  num_listed = batches | 'Sizes' >> beam.Map(len) | 'CountListed' >> beam.CombineGlobally(sum)
  # The pipeline reads it from the output; a Create of it would infer a schema of its dataclass
  # fields, and Beam finds no type for the optional ones.
  earlier = p | 'Output' >> beam.Create([None]) | 'EarlierRecord' >> beam.Map(lambda _: record)
  changes = batches | 'FindChanges' >> incremental.FindChanges(str(folder), earlier, decision, settings.max_file_bytes)
  records = changes.todo | 'Validate' >> beam.Map(validated, count).with_output_types(List[CheckedImage])
  catalog = earlier_copies.Catalog.of(str(folder), earlier, decision.lookup_count, changes)
  found = (records | 'NearEarlierCopies' >> earlier_copies.NearEarlierCopies(
      catalog, num_listed, settings, near == 'memory', decision.near_index_distance, near == 'direct')
           if near != 'off' else None)
  placed = records | 'EarlierCopies' >> earlier_copies.EarlierCopies(catalog, False, found and found['near'])
  planned = graph.plan(placed['records'], num_listed, settings, decision=decision, changes=changes)
  # The lookup files the update changes, written again as the commit finds them staged.
  catalogued = planned.plans | 'Catalogued' >> beam.Map(
      lambda plan: (f'new-{plan.split}-{plan.index}',
                    [catalog_entries.entry(record, MEAN_BYTES, False, False) for record in plan.records]))
  files = p | 'LookupCount' >> beam.Create([decision.lookup_count])
  kept = None if decision.lookup_rebuilt else earlier
  lookup = ((catalogued | 'WriteLookup' >> lookup_files.WriteLookup(
      catalog_lookup.BY_URI, str(folder), 'bench', files, kept, changes.dropped, changes.rebuilt),
             catalogued | 'WriteContentLookup' >> lookup_files.WriteLookup(
      catalog_lookup.BY_CONTENT, str(folder), 'bench', files, kept, changes.dropped_content, changes.rebuilt_content))
            | 'AllLookupFiles' >> beam.Flatten())
  _ = (lookup
       | 'LookupWritten' >> beam.combiners.Count.Globally()
       | 'KeepLookup' >> beam.Map(lambda n: Path(folder / 'lookup.json').write_text(json.dumps(n))))
  _ = (planned.plans
       | 'PlanSizes' >> beam.Map(lambda plan: len(plan.records))
       | 'Planned' >> beam.CombineGlobally(sum)
       | 'KeepPlanned' >> beam.Map(lambda n: Path(folder / 'planned.json').write_text(json.dumps(n))))
  _ = (changes.rewrites
       | 'RewriteSizes' >> beam.Map(lambda rewrite: len(rewrite.dropped))
       | 'Rewrites' >> beam.combiners.ToList()
       | 'KeepRewrites' >> beam.Map(lambda sizes: Path(folder / 'rewrites.json').write_text(
           json.dumps([len(sizes), sum(sizes)]))))
  _ = (changes.counts | 'KeepCounts' >> beam.Map(lambda c: Path(folder / 'counts.json').write_text(json.dumps(c))))
  _ = (changes.kept
       | 'KeptCountsAgain' >> incremental.KeptCounts()  # plan's own is inside it: its number of keys
       | 'KeptKeys' >> beam.combiners.Count.Globally()
       | 'KeepKeptKeys' >> beam.Map(lambda n: Path(folder / 'kept_keys.json').write_text(json.dumps(n))))
  # What lives as long as the run (the earlier catalog's record and the graph) is frozen first, as
  # the launcher freezes what it built (launch._long_lived_objects), so that full collections
  # during the run do not rescan it.
  gc.freeze()
  started = time.monotonic()
  result = p.run()
  result.wait_until_finish()
  seconds = time.monotonic() - started
  gc.unfreeze()
  # What the simulation's own listing costs, generated again alone: a real update lists its input
  # instead, which the issue counts apart (one pass over the listing).
  started = time.monotonic()
  for chunk in chunks:
    listing_chunk(chunk, count, change_pct)
  listing_s = time.monotonic() - started
  distributions = result.metrics().query(MetricsFilter().with_namespace('beam_pipeline'))['distributions']
  largest = {d.key.metric.name.replace('records_per_key_', ''): d.committed.max for d in distributions}
  keys = {d.key.metric.name.replace('records_per_key_', ''): d.committed.count for d in distributions}
  rewrites, dropped = json.loads((folder / 'rewrites.json').read_text())
  report = {'records': count, 'mode': mode, 'join': join, 'near_copies': near, 'change_pct': change_pct,
            'seconds': round(seconds, 2),
            'us_per_record': round(seconds / count * 1e6, 2), 'listing_s': round(listing_s, 2),
            'us_per_record_past_listing': round((seconds - listing_s) / count * 1e6, 2),
            'catalog_write_s': round(catalog_s, 1),
            'merges_s': round(merges_s, 4), 'largest_key': largest, 'keys': keys,
            'counts': json.loads((folder / 'counts.json').read_text()),
            'planned': json.loads((folder / 'planned.json').read_text()),
            'shards': shards, 'shards_rewritten': rewrites, 'records_dropped': dropped,
            'kept_count_keys': json.loads((folder / 'kept_keys.json').read_text()),
            'decision_pickle_bytes': len(pickle.dumps(decision)),
            'catalog_bytes': sum(path.stat().st_size for path in (folder / 'catalog').glob('*.jsonl')),
            'lookup_files': decision.lookup_count,
            'lookup_files_written': json.loads((folder / 'lookup.json').read_text())}
  report['listed'] = listed
  shutil.rmtree(folder, ignore_errors=True)
  return report


def main(argv: List[str] = None) -> int:
  parser = argparse.ArgumentParser(prog='python -m benchmarks.incremental_planning',
                                   description=__doc__.splitlines()[0])
  parser.add_argument('--records', default='1000000', help='catalogued records, comma-separated (5000000: ~x5 time)')
  parser.add_argument('--change-pct', type=float, default=1.0, help='changed + removed + added, in %% of the records')
  parser.add_argument('--modes', default='in_process')
  parser.add_argument('--joins', default=','.join(JOINS),
                      help='through the catalog\'s lookup (lookup), as before it (by_uri), or both, in turn')
  parser.add_argument('--near-copies', default='off,group,index',
                      help='without near copies (off), with every catalogued hash grouped with the new ones and the '
                           'near-copy index built (group), with the new ones queried in the index (index), with every '
                           'hash grouped in memory and no index kept, as a small dataset\'s update on the DirectRunner '
                           '(memory), with every hash grouped in memory and the index built from it, as a large '
                           'dataset\'s first update on the DirectRunner (direct); in turn')
  parser.add_argument('--delta-share', type=float, default=0.0,
                      help='how full each lookup file\'s delta is before the update, of the most it may hold: 0 '
                           '(as a first conversion leaves them), 0.5 (an average update), 1 (the update writes every '
                           'file again whole)')
  parser.add_argument('--child', nargs=5, metavar=('N', 'MODE', 'JOIN', 'NEAR', 'RESULT'), help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.child:
    logging.getLogger('apache_beam').setLevel(logging.ERROR)
    count, mode, join, near, path = args.child
    Path(path).write_text(json.dumps(run_update(int(count), mode, args.change_pct, join, near, args.delta_share)))
    return 0
  RESULTS.mkdir(parents=True, exist_ok=True)
  rows = []
  for count in map(int, args.records.split(',')):
    for mode, join, near in itertools.product(args.modes.split(','), args.joins.split(','),
                                              args.near_copies.split(',')):
      row = planning.measured_child(f'incremental-planning-{count}-{mode}-{join}-{near}', [
          'benchmarks.incremental_planning', '--change-pct', str(args.change_pct), '--delta-share',
          str(args.delta_share), '--child', str(count), mode, join, near])
      rows.append(row)
      largest = ', '.join(f'{stage} {row["largest_key"].get(stage, 0):,} of {row["keys"].get(stage, 0):,} keys'
                          for stage in STAGES)
      print(f'{count:>11,} {mode:<16} {join:<7} near copies {near:<5} {row["seconds"]:>8.1f} s '
            f'{row["us_per_record"]:>6.2f} us/record ({row["us_per_record_past_listing"]:.2f} past generating the '
            f'listing, {row["listing_s"]} s) largest process {row["largest_process_mb"]:>6.0f} MB; '
            f'largest key: {largest}', flush=True)
      print(f'{"":>12} changes {row["counts"]}; planned {row["planned"]:,} new records; '
            f'{row["shards_rewritten"]:,} of {row["shards"]:,} shards rewritten ({row["records_dropped"]:,} records '
            f'dropped); KeptCounts keys {row["kept_count_keys"]:,}; the graph carries a Decision of '
            f'{row["decision_pickle_bytes"] / 2**20:.1f} MiB; catalog {row["catalog_bytes"] / 2**20:.0f} MiB '
            f'(written in {row["catalog_write_s"]} s); merges() {row["merges_s"] * 1000:.1f} ms; '
            f'{row["lookup_files_written"]:,} of {row["lookup_files"]:,} lookup files written', flush=True)
  destination = RESULTS / 'incremental-planning.json'
  destination.write_text(json.dumps({'rows': rows}, indent=2))
  print(f'results: {destination}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
