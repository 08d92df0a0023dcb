"""An --incremental update's new records met with the catalogued pictures they copy, through the
catalog's lookup by content (core/output/catalog_lookup.py): a copy of a picture the dataset
held goes to that picture's split (or, under --dedupe, is rejected), a near copy likewise, and
the groups of copies and near copies are those of the whole updated dataset, not of the
increment.

Each step keyed by content takes one slot of the lookup at a time: the new records, the
catalogued records dropped and what else it needs of that slot cross a shuffle to it, while
the slot's catalogued records are read from its file by the one worker that takes it, never
shuffled. The near-copy grouping takes from it only the files that came or went where it
queries the near-copy index (pipeline/planning/indexed_near_copies.py); the perceptual hash of
every record the dataset keeps where it groups them all (in one process, or to build the index).
"""
import bisect
import itertools
import operator
from typing import Any, Dict, Iterable, Iterator, List, Mapping, NamedTuple, Optional, Set, Tuple

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.pvalue import AsList, AsSingleton

from beam_pipeline.pipeline import coders, tags
from beam_pipeline.pipeline.incremental import Changes
from beam_pipeline.pipeline.output import lookup_files
from beam_pipeline.pipeline.planning import content_groups, indexed_near_copies, near_copy_groups
from beam_pipeline.pipeline.planning.steps import BeamSteps
from beam_pipeline.core import rejections
from beam_pipeline.core.console import progress_counts
from beam_pipeline.core.messages import CheckedImage, Rejection
from beam_pipeline.core.output import catalog_lookup, incremental_update
from beam_pipeline.core.planning import near_copies, splitting
from beam_pipeline.core.settings import Settings

_EARLIER, _NEW = 'earlier', 'new'
_BATCH_SIZE = 256  # as listing and validation batch items
BY_CONTENT = catalog_lookup.BY_CONTENT


class Catalog(NamedTuple):
  """Where an update's steps by content find the catalogued records of a slot, as sides of a
  CoGroupByKey by slot (``by_slot``): 'dropped', the identities of the records the update
  dropped (Changes.dropped_content), grouped; and 'lookup', the lookup files the run record
  lists, or 'lines', the lines of the lookup built again (Changes.rebuilt_content), grouped.
  Each is grouped once, whichever steps read it."""
  output: str
  count: int  # the lookup's files
  by_slot: Mapping[str, beam.PCollection]
  record: beam.PCollection  # one element: the run record of the dataset updated

  @classmethod
  def of(cls, output: str, earlier: beam.PCollection, count: int, changes: Changes) -> 'Catalog':
    """The catalog of the dataset an update updates.

    Args:
      output: the dataset's output folder.
      earlier: one element: its run record.
      count: how many files each of its lookups has.
      changes: what the update found changed (FindChanges).
    """
    by_slot = {'dropped': changes.dropped_content | 'CatalogDropped' >> beam.GroupByKey()}
    if changes.rebuilt_content is not None:
      by_slot['lines'] = changes.rebuilt_content | 'CatalogLines' >> beam.GroupByKey()
    else:
      by_slot['lookup'] = earlier | 'CatalogFiles' >> beam.FlatMap(
          lambda record: [(found.slot, found) for found in lookup_files.files_of(record, BY_CONTENT)])
    return cls(output, count, by_slot, earlier)


def slot_lines(sides: Mapping[str, Iterable[Any]], output: str) -> List[str]:
  """The lines of one slot of the lookup by content, sorted: its file's (checked against the run
  record), or those of the lookup built again."""
  for found in sides.get('lookup', ()):
    return lookup_files.read_checked(output, found, BY_CONTENT).splitlines(keepends=True)
  return sorted(line.decode('utf-8') for lines in sides.get('lines', ()) for line in lines)


def slot_dropped(sides: Mapping[str, Iterable[Any]]) -> Set[Tuple[str, str]]:
  """The (content hash, uri) of the slot's catalogued records that the update dropped."""
  return {value.identity for values in sides.get('dropped', ()) for value in values}


def of_hashes(lines: List[str], wanted: Iterable[str], repeated: bool = False) -> Iterator[Tuple[str, List[str]]]:
  """(content hash, its lines) of a slot's sorted lines, in hash order, for each hash of ``wanted``
  the slot holds and, if ``repeated``, each hash of several lines: a hash's lines found by
  bisection, the hashes read without parsing. A slot holds about ENTRIES_PER_FILE lines and an
  update reaches a few of its hashes, so no Python loop walks every line."""
  keys, key, found = lines, _content_hash, set(wanted)
  if repeated:
    keys, key = [line[2:66] for line in lines], None
    found.update(itertools.compress(keys[1:], map(operator.eq, keys[1:], keys)))
  for sha in sorted(found):
    start = bisect.bisect_left(keys, sha, key=key)
    end = bisect.bisect_right(keys, sha, start, key=key)
    if end > start:
      yield sha, lines[start:end]


def _content_hash(line: str) -> str:
  """The content hash a line of the lookup by content starts with."""
  return line[2:66]


def catalogued(lines: List[str], dropped: Set[Tuple[str, str]]) -> List['Catalogued']:
  """What the steps by content need of the catalogued records of one content hash."""
  found = []
  for line in lines:
    _, entry = BY_CONTENT.parse(line)
    found.append(Catalogued(entry.uri, entry.split, (entry.source_sha256, entry.uri) not in dropped, entry.label,
                            entry.labels))
  return found


def _keyed(pcoll: beam.PCollection, label: str, count: int) -> beam.PCollection:
  """(content hash, value) elements grouped by their slot: (slot, [(content hash, value), ...])."""
  return (pcoll
          | f'{label}BySlot' >> beam.MapTuple(lambda sha, value: (BY_CONTENT.slot(sha, count), (sha, value)))
          | f'Group{label}' >> beam.GroupByKey())


def _of_slot(sides: Mapping[str, Iterable[Any]], side: str) -> Dict[str, List[Any]]:
  """A side of (content hash, value) elements grouped by slot (_keyed), as values per content hash."""
  found: Dict[str, List[Any]] = {}
  for values in sides.get(side, ()):
    for sha, value in values:
      found.setdefault(sha, []).append(value)
  return found


class EarlierCopies(beam.PTransform):
  """Lists of new records, each copy of a picture the dataset held (a renamed file, a copy of a
  kept one) in that picture's split, so splits stay stable and leak-free; under ``dedupe`` a
  copy of a picture the dataset keeps is rejected as its duplicate, tagged REJECTED.

  Every group of identical files the updated dataset holds goes on tagged DUPLICATES, as
  content_groups.GroupCopies lists them: each slot of the lookup by content is read whole, its
  lines grouped by content hash unparsed, and only a hash with several files or a new one
  parsed; so beam_pipeline.json describes the dataset, not the increment (and planning's own
  list, of the increment, is left unused).

  ``near`` (NearEarlierCopies's) places a near copy of a catalogued picture the same way, unless
  a manifest or a folder gave it a split (likeness may be wrong); under ``drop_near`` a near copy
  of a picture the dataset keeps is rejected, the dataset's image kept."""

  def __init__(self, catalog: Catalog, dedupe: bool, near: Optional[beam.PCollection] = None,
               drop_near: bool = False):
    """A step that meets the new records with the catalogued ones by content hash.

    Args:
      catalog: where the catalogued records of each slot of the lookup by content are found.
      dedupe: --dedupe, which keeps one copy of each picture.
      near: (source_sha256, Catalogued) of each new near copy of a catalogued record (NearEarlierCopies's 'near');
        None under --near_copies=off.
      drop_near: --near_copies=drop, which keeps one picture of each group of near copies.
    """
    super().__init__()
    self._catalog = catalog
    self._dedupe = dedupe
    self._near = near
    self._drop_near = drop_near

  def expand(self, batches):
    count = self._catalog.count
    records = batches | 'Records' >> beam.FlatMap(lambda batch: [(record.source_sha256, record) for record in batch])
    sides = {'new': _keyed(records, 'New', count), **self._catalog.by_slot}
    if self._near is not None:
      sides['near'] = _keyed(self._near, 'Near', count)
    placed = (sides
              | 'BySlot' >> beam.CoGroupByKey()
              | 'Place' >> beam.FlatMap(_placed_in_slot, self._catalog.output, self._dedupe, self._drop_near
                                        ).with_outputs(tags.REJECTED, tags.DUPLICATES, main='records'))
    batched = placed.records | 'Batch' >> beam.BatchElements(min_batch_size=_BATCH_SIZE, max_batch_size=_BATCH_SIZE
                                                            ).with_output_types(List[CheckedImage])
    return {'records': batched, tags.REJECTED: placed[tags.REJECTED], tags.DUPLICATES: placed[tags.DUPLICATES]}


def _placed_in_slot(joined: Tuple[int, Mapping[str, Iterable[Any]]], output: str, dedupe: bool,
                    drop_near: bool) -> Iterator[Any]:
  """_placed for each content hash of one slot that has new records or several catalogued ones:
  a lone catalogued record with nothing new is neither placed nor a group, and stays unparsed.

  Args:
    joined: (slot, {'new': its new records, 'near': its near copies' Catalogued, and its catalog (Catalog.by_slot)}).
    output: the output folder, whose lookup file is read.
    dedupe: --dedupe, which keeps one copy of each picture.
    drop_near: --near_copies=drop, which keeps one picture of each group of near copies.
  """
  _, sides = joined
  new, near, dropped = _of_slot(sides, 'new'), _of_slot(sides, 'near'), slot_dropped(sides)
  for sha, lines in of_hashes(slot_lines(sides, output), new, repeated=True):
    yield from _placed((sha, {'new': new.pop(sha, []), 'earlier': catalogued(lines, dropped),
                              'near': near.get(sha, [])}), dedupe, drop_near)
  for sha in sorted(new):
    yield from _placed((sha, {'new': new[sha], 'earlier': [], 'near': near.get(sha, [])}), dedupe, drop_near)


class Catalogued(NamedTuple):
  """What a content hash's join needs of a catalogued record: where it is, whether it is kept,
  and its labels for the list of identical files (splitting.duplicate_group_entry)."""
  uri: str
  split: str
  kept: bool  # its file is unchanged: the updated dataset holds the record
  label: Optional[str]
  labels: Tuple[str, ...]


def _placed(joined: Tuple[str, Mapping[str, Iterable[Any]]], dedupe: bool, drop_near: bool = False) -> Iterator[Any]:
  _, sides = joined
  new = sorted(sides['new'], key=lambda record: record.uri)
  earlier = sorted(sides['earlier'])  # by uri, as copies are grouped
  duplicates = _duplicate_group(earlier, new, dedupe)
  if duplicates:
    yield beam.pvalue.TaggedOutput(tags.DUPLICATES, coders.PickledDict(duplicates))
  if not new:
    return
  if earlier:
    split = earlier[0].split
    kept = next((value.uri for value in earlier if value.kept), None)
    for record in new:
      if dedupe and kept:
        progress_counts.counts().rejected(1)
        yield tags.rejected(Rejection(record.uri, rejections.DUPLICATE,
                                      f'same content as {kept}, which the dataset holds (--dedupe keeps one copy)'))
      else:
        yield record._replace(split=split)
    return
  near = min(sides.get('near', ()), key=_kept_first, default=None)
  if near is None:
    yield from new
    return
  uri, split, kept = near.uri, near.split, near.kept
  Metrics.counter(tags.NAMESPACE, 'near_copies_of_earlier').inc(len(new))
  for record in new:
    if drop_near and kept:
      progress_counts.counts().rejected(1)
      yield tags.rejected(Rejection(record.uri, rejections.NEAR_DUPLICATE,
                                    f'a near copy of {uri}, which the dataset holds (--near_copies=drop keeps it)'))
    else:
      yield record if record.split else record._replace(split=split)


def _duplicate_group(earlier: List[Catalogued], new: List[CheckedImage], dedupe: bool) -> Optional[Dict[str, Any]]:
  """The entry of the updated dataset's files of one content hash, if there are several: its kept
  records and today's new files (a new file of a hash the dataset does not hold is planned, and
  under ``dedupe`` its group keeps the copy planning keeps)."""
  unique = list({record.uri: record for record in new}.values())  # a manifest may name a file twice
  kept = [value for value in earlier if value.kept]
  if len(kept) + len(unique) < 2:
    return None
  if kept:
    return splitting.duplicate_group_entry([*kept, *unique], kept[0], dedupe)
  group, _ = splitting.group_duplicates(unique, dedupe)
  return splitting.duplicate_group_entry(unique, group.records[0] if group.records else None, dedupe)


def _kept_first(earlier: Catalogued) -> Tuple[bool, str]:
  return not earlier.kept, earlier.uri


# An update on one machine (the DirectRunner) keeps a near-copy index from this many catalogued
# records, or where the dataset has one: below it, grouping every hash again in memory costs about
# what the index's steps do, and the update that builds the index more. But not where more than
# LOOK_ALIKE_SHARE of the records were look-alikes: their band values are dense, and querying them
# cost more than grouping every hash again in memory (benchmarks/README.md, Near copies through
# the index).
INDEXED_FROM = 100_000
LOOK_ALIKE_SHARE = 0.01


def grouped_in_memory(one_machine: bool, decision: incremental_update.Decision) -> bool:
  """Whether an update groups every near-copy hash in memory and keeps no index (NearEarlierCopies's
  ``in_memory``): on one machine, for a dataset of look-alikes, or one that has no index and
  fewer than INDEXED_FROM records. Elsewhere it keeps the index, built by the first update that
  groups every node."""
  if not one_machine:
    return False
  return (decision.look_alikes > LOOK_ALIKE_SHARE * decision.catalogued or
          not decision.near_index_distance and decision.catalogued < INDEXED_FROM)


class NearEarlierCopies(beam.PTransform):
  """Lists of new records to (source_sha256, Catalogued) for each new file that is a near
  copy of a catalogued record (their perceptual hashes grouped as planning groups near copies,
  near_copy_groups.grouped), naming one such record, a kept one first: EarlierCopies's ``near``.

  The groups are the whole dataset's. Where the dataset has a near-copy index of the grouping's
  distance (indexed_near_copies.UpdateIndex) only the files each slot of the lookup by content
  lost or gained go on, and the index is queried for them; otherwise the catalog's hashes join
  the new ones, read slot by slot from the lookup by content, and every node is grouped again
  (and, unless they are grouped in memory, the index built from it). Each group then meets its
  members by representative: its catalogued ones found slot by slot, its new ones by content
  hash; no key holds more than a group or a slot. Returns {'near': EarlierCopies's ``near``,
  'members': (representative, members) of every group, for NearGroupsOfDataset, 'found': the
  grouping's summary, as near_copy_groups.find_near_copies's 'found', and 'index': one
  incremental_update.IndexWritten, or None where the hashes are grouped in memory}."""

  def __init__(self, catalog: Catalog, num_listed: beam.PCollection, settings: Settings, in_memory: bool,
               index_distance: int = 0, one_machine: bool = False):
    """A step that groups the new records' perceptual hashes with the catalog's.

    Args:
      catalog: where the catalogued records of each slot of the lookup by content are found.
      num_listed: one element: how many inputs were listed, which sets the distance and the largest group
        (near_copy_groups.near_distance, largest_group).
      settings: the conversion's settings.
      in_memory: group the hashes in memory (near_copy_groups.grouped) and keep no index: an update of a small
        dataset on the DirectRunner (grouped_in_memory).
      index_distance: the distance of the dataset's near-copy index (incremental_update.Decision's); 0: none.
      one_machine: the runner holds every element in one process (the DirectRunner): where every node is grouped,
        it is grouped in memory, and an index kept is built from that grouping, not through NearCopies's shuffles.
    """
    super().__init__()
    self._catalog = catalog
    self._num_listed = num_listed
    self._settings = settings
    self._in_memory = in_memory
    self._one_machine = one_machine or in_memory
    self._index_distance = 0 if in_memory else index_distance

  def expand(self, records):
    catalog, count, settings = self._catalog, self._catalog.count, self._settings
    steps = BeamSteps(records.pipeline)
    distance = near_copy_groups.near_distance(steps, self._num_listed, settings.near_distance)
    new = records | 'NewHashes' >> beam.FlatMap(lambda batch: [
        (hashed[0], hashed) for hashed in content_groups.perceptual_hashes(batch)])
    joined = {**catalog.by_slot, 'hashes': _keyed(new, 'NewHash', count)} | 'HashesBySlot' >> beam.CoGroupByKey()
    cap = near_copy_groups.largest_group(steps, self._num_listed, settings)
    pairs, summary, index = self._grouped(joined, distance, cap)
    files = records | 'NewFiles' >> beam.FlatMap(
        lambda batch: [(record.source_sha256, NewFile(record.uri, record.label, record.labels)) for record in batch])
    earlier_members = ({'pairs': _keyed(pairs, 'Pairs', count), **catalog.by_slot}
                       | 'MembersBySlot' >> beam.CoGroupByKey()
                       | 'EarlierMembers' >> beam.FlatMap(_earlier_members_of_slot, catalog.output))
    new_members = ({'pairs': pairs, 'new': files}
                   | 'NewByContent' >> beam.CoGroupByKey()
                   | 'NewMembers' >> beam.FlatMap(_new_members_of_group))
    members = ((earlier_members, new_members)
               | 'ByGroup' >> beam.Flatten()
               | 'GroupMembers' >> beam.GroupByKey())
    summary = summary | 'WithDistance' >> beam.Map(
        near_copy_groups.left_out, beam.pvalue.AsSingleton(distance), beam.pvalue.AsSingleton(cap))
    return {'near': members | 'NearSplits' >> beam.FlatMap(_near_earlier), 'members': members, 'found': summary,
            'index': index}


  def _grouped(self, joined: beam.PCollection, distance: beam.PCollection, cap: beam.PCollection
               ) -> Tuple[beam.PCollection, beam.PCollection, Optional[beam.PCollection]]:
    """The groups of the slots' hashes: (pairs, summary, index), as expand returns them.

    Where the dataset has an index, whether it is used waits on the distance (a side input): the
    slots send their changed files to UpdateIndex, or every hash to the grouping of every node.
    Either branch runs on what it is sent, and the summary of the one used goes on."""
    catalog, count, settings = self._catalog, self._catalog.count, self._settings
    use = None
    if self._index_distance:
      use = distance | 'UseIndex' >> beam.Map(lambda today, kept: today == kept, self._index_distance)
      sides = joined | 'SlotHashes' >> beam.FlatMap(
          _slot_changes, catalog.output, count, AsSingleton(use)).with_outputs(
              indexed_near_copies.DROPPED, indexed_near_copies.ADDED, main='hashes')
      hashes = sides.hashes
    else:
      hashes = joined | 'SlotHashes' >> beam.FlatMap(_slot_hashes, catalog.output)
    found = near_copy_groups.grouped(hashes, distance, cap, self._one_machine, one_per_file=True,
                                     indexed=not self._in_memory)
    if self._in_memory:
      return found['pairs'], found[tags.NEAR_COPIES], None
    pairs, summary = found['pairs'], found[tags.NEAR_COPIES]
    place = indexed_near_copies.Place(settings.output, settings.run_id, count)
    written = found | 'BuildIndex' >> indexed_near_copies.BuildIndex(place, AsSingleton(distance), self._one_machine)
    if use is not None:
      deltas = {tag: sides[tag] for tag in (indexed_near_copies.DROPPED, indexed_near_copies.ADDED)}
      updated = deltas | 'UpdateIndex' >> indexed_near_copies.UpdateIndex(
          catalog.record, place, AsSingleton(distance), AsSingleton(cap), AsSingleton(use))
      pairs = (pairs, updated['pairs']) | 'AllPairs' >> beam.Flatten()
      summary = ((summary | 'IfGrouped' >> beam.Filter(lambda _, used: not used, AsSingleton(use)),
                  updated[tags.NEAR_COPIES] | 'IfIndexed' >> beam.Filter(lambda _, used: used, AsSingleton(use)))
                 | 'OneSummary' >> beam.Flatten())
      written = (written, updated['files']) | 'IndexFiles' >> beam.Flatten()
    index = joined.pipeline | 'Index' >> beam.Create([None]) | 'IndexWritten' >> beam.Map(
        indexed_near_copies.index_written, AsList(written), AsSingleton(distance),
        AsSingleton(use) if use is not None else False)
    return pairs, summary, index


def _slot_hashes(joined: Tuple[int, Mapping[str, Iterable[Any]]], output: str
                 ) -> Iterator[List[Tuple[str, str, int, str]]]:
  """The (source_sha256, phash, priority, colour) of each file of one slot that the updated
  dataset holds, once: a kept catalogued record's (_earlier_hash) or a new record's
  (content_groups.perceptual_hashes), the smallest where a file is both or several (copies of
  one picture share their slot), in lists of up to _BATCH_SIZE. So the grouping needs no
  shuffle of every file to keep one hash of each. A dropped record's hash is left out, as a
  fresh conversion of today's files would not have it: it could anchor a group, or count in a
  set of look-alikes."""
  _, sides = joined
  dropped = slot_dropped(sides)
  dropped_hashes = {sha for sha, _ in dropped}
  found = {sha: min(values) for sha, values in _of_slot(sides, 'hashes').items()}
  for line in slot_lines(sides, output):
    if line[2:66] in dropped_hashes and BY_CONTENT.identity(line) in dropped:
      continue
    for hashed in _earlier_hash(line):
      found[hashed[0]] = min(found.get(hashed[0], hashed), hashed)
  hashes = list(found.values())
  for start in range(0, len(hashes), _BATCH_SIZE):
    yield hashes[start:start + _BATCH_SIZE]


def _slot_changes(joined: Tuple[int, Mapping[str, Iterable[Any]]], output: str, count: int, use: bool
                  ) -> Iterator[Any]:
  """What the near-copy grouping takes of one slot of the lookup by content: where the index is
  used, the files whose hash the slot lost and gained (near_index.FILE_KEY bytes, tagged
  indexed_near_copies.DROPPED and ADDED, keyed by node slot), found from the lines of the
  content hashes the update reached alone; otherwise every hash (_slot_hashes).

  A file's hash is the smallest of its records' (_slot_hashes): before the update, of every line
  of its content hash; after it, of the lines kept and the new records.

  Args:
    joined: (slot, the sides of Catalog.by_slot and 'hashes', the new records' hashes).
    output: the output folder, whose lookup file is read.
    count: the index's node files.
    use: whether the index is used.
  """
  if not use:
    yield from _slot_hashes(joined, output)
    return
  _, sides = joined
  new = {sha: min(values) for sha, values in _of_slot(sides, 'hashes').items()}
  dropped = slot_dropped(sides)
  touched = set(new) | {sha for sha, _ in dropped}
  if not touched:
    return
  catalogued = dict(of_hashes(slot_lines(sides, output), touched))
  before, after = [], []
  for sha in sorted(touched):
    hashed = [(BY_CONTENT.identity(line) in dropped, value)
              for line in catalogued.get(sha, ()) for value in _earlier_hash(line)]
    earlier = [value for _, value in hashed]
    kept = [value for gone, value in hashed if not gone]
    was, now = min(earlier, default=None), min(kept + ([new[sha]] if sha in new else []), default=None)
    if was != now:
      before.extend([was] if was else [])
      after.extend([now] if now else [])
  yield from indexed_near_copies.file_changes(before, after, count)


def _earlier_hash(line: str) -> List[Tuple[str, str, int, str]]:
  """The (source_sha256, phash, priority, colour) of a catalogued record, from its line of the
  lookup by content, as content_groups.perceptual_hashes lists a new one's: none from a catalog
  written before hashes were."""
  fields = BY_CONTENT.near_fields(line)
  if fields is None:  # a catalog's from before colour signatures
    entry = BY_CONTENT.parse(line)[1]
    fields = (entry.source_sha256, entry.phash, entry.colour, entry.damaged, entry.longer_side, entry.stored_bytes)
  sha, phash, colour, damaged, longer_side, stored_bytes = fields
  if not phash:
    return []
  return [(sha, phash, near_copies.priority(damaged, longer_side, stored_bytes), colour)]


class NewFile(NamedTuple):
  """A new file as a group of near copies lists it. A NamedTuple, not a plain tuple, so that it
  crosses a shuffle pickled: a name that is not UTF-8 holds lone surrogates, which Beam's string
  coders refuse."""
  uri: str
  label: Optional[str]
  labels: Tuple[str, ...]


def _earlier_members_of_slot(joined: Tuple[int, Mapping[str, Iterable[Any]]], output: str
                             ) -> Iterator[Tuple[str, Tuple[str, str, Any]]]:
  """The catalogued records of one slot that are in a group of near copies, under the group's
  representative: (representative, (_EARLIER, sha, Catalogued))."""
  _, sides = joined
  representatives = {sha: values[0] for sha, values in _of_slot(sides, 'pairs').items()}
  if not representatives:
    return
  dropped = slot_dropped(sides)
  for sha, lines in of_hashes(slot_lines(sides, output), representatives):
    yield from ((representatives[sha], (_EARLIER, sha, value)) for value in catalogued(lines, dropped))


def _new_members_of_group(joined: Tuple[str, Mapping[str, Iterable[Any]]]
                          ) -> Iterator[Tuple[str, Tuple[str, str, Any]]]:
  """The new files of one content hash in a group of near copies, under the group's
  representative: (representative, (_NEW, sha, NewFile list))."""
  sha, sides = joined
  representative = next(iter(sides['pairs']), None)
  new = {file.uri: file for file in sides['new']}  # a manifest may name a file twice
  if representative is not None and new:
    yield representative, (_NEW, sha, [new[uri] for uri in sorted(new)])


def _near_earlier(grouped: Tuple[str, Iterable[Tuple[str, str, Any]]]) -> Iterator[Tuple[str, Catalogued]]:
  _, members = grouped
  members = list(members)
  earlier = min((value for kind, _, value in members if kind == _EARLIER), key=_kept_first, default=None)
  if earlier is None:
    return
  for sha in sorted({sha for kind, sha, _ in members if kind == _NEW}):
    yield sha, earlier


class WrittenFile(NamedTuple):
  """A new file written, and its split: a NamedTuple, pickled across a shuffle (NewFile says why)."""
  uri: str
  split: str


class NearMember(NamedTuple):
  """A file of the updated dataset in a group of near copies, as its entry lists it
  (splitting.near_group_entry)."""
  uri: str
  source_sha256: str
  label: Optional[str]
  labels: Tuple[str, ...]
  split: Optional[str]  # None: a new file not written (a copy or near copy dropped)
  earlier: bool = False  # a kept catalogued record


class NearGroupsOfDataset(beam.PTransform):
  """The near-copy groups of the updated dataset, summed up as beam_pipeline.json lists them
  (content_groups.NearGroups, with the grouping's distance and what it left out), as a fresh
  conversion of the same files lists them: the groups NearEarlierCopies found among catalogued
  and new hashes together, each with its kept records and its new files, these with the splits
  planning gave them. Only the increment and the groups' members cross the shuffles it adds."""

  def __init__(self, near: Mapping[str, beam.PCollection], plans: beam.PCollection, drop: bool, dedupe: bool):
    """A step that lists the groups of the updated dataset's catalogued and new files.

    Args:
      near: NearEarlierCopies's output: its groups' 'members' and the grouping's summary ('found').
      plans: ShardPlan of the new records written, which give the new files their splits.
      drop: --near_copies=drop: a group's entry names the picture kept, and lists the near copies dropped.
      dedupe: --dedupe: of identical files only the one kept is listed (a kept record, not a new copy of it).
    """
    super().__init__()
    self._members = near['members']
    self._found = near['found']
    self._plans = plans
    self._drop = drop
    self._dedupe = dedupe

  def expand(self, pipeline):
    listed = self._members | 'Members' >> beam.FlatMap(_earlier_members).with_outputs(_NEW, main='earlier')
    written = self._plans | 'WrittenFiles' >> beam.FlatMap(
        lambda plan: [(record.source_sha256, WrittenFile(record.uri, plan.split)) for record in plan.records])
    joined = ({'group': listed[_NEW], 'written': written}
              | 'NewByContent' >> beam.CoGroupByKey()
              | 'NewMembers' >> beam.FlatMap(_new_members, self._drop, self._dedupe))
    entries = ((listed.earlier, joined)
               | 'AllMembers' >> beam.Flatten()
               | 'ByRepresentative' >> beam.GroupByKey()
               | 'Entries' >> beam.FlatMap(_near_entry, self._drop, self._dedupe))
    groups = entries | 'SumUp' >> beam.CombineGlobally(content_groups.NearGroups()).without_defaults()
    return self._found | 'WithGroups' >> beam.Map(
        lambda summary, groups: coders.PickledDict({**groups, **summary}),  # the groups list uris
        beam.pvalue.AsSingleton(groups, default_value=content_groups.NearGroups().apply([]))).with_output_types(Any)


def _earlier_members(grouped: Tuple[str, Iterable[Tuple[str, str, Any]]]) -> Iterator[Any]:
  """A group's kept catalogued records as (representative, NearMember); its new files as
  (source_sha256, (representative, NewFile list)), tagged, to meet the splits they were written to."""
  representative, members = grouped
  for kind, sha, value in members:
    if kind == _NEW:
      yield beam.pvalue.TaggedOutput(_NEW, (sha, (representative, value)))
    elif value.kept:
      yield representative, NearMember(value.uri, sha, value.label, value.labels, value.split, earlier=True)


def _new_members(joined: Tuple[str, Mapping[str, Iterable[Any]]], drop: bool, dedupe: bool
                 ) -> Iterator[Tuple[str, NearMember]]:
  """The new files of one content hash in a near-copy group, as (representative, NearMember): those
  written; under ``drop`` also the near copies it dropped, but not the copies ``dedupe`` dropped."""
  sha, sides = joined
  group = next(iter(sides['group']), None)
  if group is None:
    return
  representative, files = group
  splits = dict(sides['written'])
  members = [NearMember(uri, sha, label, labels, splits.get(uri)) for uri, label, labels in files]
  if not drop:
    members = [member for member in members if member.split]
  elif dedupe:
    members = list(splitting.group_duplicates(members, dedupe)[0].records)
  yield from ((representative, member) for member in members)


def _near_entry(grouped: Tuple[str, Iterable[NearMember]], drop: bool, dedupe: bool) -> Iterator[Dict[str, Any]]:
  """One group's entry (splitting.near_group_entry), if two different pictures of it are in the
  dataset or were dropped from it; under ``dedupe`` a new copy of a kept record is not listed."""
  _, members = grouped
  members = sorted(members, key=lambda member: member.uri)
  if dedupe:
    kept = {member.source_sha256 for member in members if member.earlier}
    members = [member for member in members if member.earlier or member.source_sha256 not in kept]
  if len({member.source_sha256 for member in members}) < 2:
    return
  if drop:
    kept = next((member for member in members if member.split), members[0])
    yield coders.PickledDict(splitting.near_group_entry(members, kept=kept))
  else:
    yield coders.PickledDict(
        splitting.near_group_entry(members, split=', '.join(sorted({member.split for member in members}))))


