"""An --incremental run's own steps: today's listing met with the earlier run's catalog, file by
file, so that only what changed is read (a file whose fingerprint alone changed is hashed, and
kept if its bytes did not), and new copies of catalogued pictures placed with them.

The listing meets the catalog through its lookup by uri (core/output/catalog_lookup.py): each
item goes to the lookup file of its uri, and one worker per file reads it and compares, so no
catalogued record crosses a shuffle to be found unchanged and no element holds the catalog or
the listing. A dataset whose lookup is built again (catalog_lookup.fits) is met as before it,
once: its catalog read shard by shard and joined with the listing by uri (CoGroupByKey). Then
the new records meet the catalogued ones by content hash.
"""
import collections
import io
from typing import Any, Dict, Iterable, Iterator, List, Mapping, NamedTuple, Optional, Tuple

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.io.filesystem import BeamIOError, CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_pipeline.pipeline import tags
from beam_pipeline.pipeline.output import lookup_files, output_dir
from beam_pipeline.pipeline.pooled_steps import open_image
from beam_pipeline.pipeline.planning import content_groups, near_copy_groups
from beam_pipeline.core import rejections
from beam_pipeline.core.console import progress_counts
from beam_pipeline.core.images import image_info, image_quality
from beam_pipeline.core.inputs import fingerprints, listing_digest, reading
from beam_pipeline.core.messages import CheckedImage, InputItem, Rejection, ShardRewrite
from beam_pipeline.core.output import catalog_lookup, incremental_catalog, incremental_update
from beam_pipeline.core.output.incremental_catalog import Entry
from beam_pipeline.core.output.run_record import RunRecord, Shard
from beam_pipeline.core.rejections import DamagedOutput, Rejected
from beam_pipeline.core.planning import near_copies, splitting
from beam_pipeline.core.settings import Settings

_KEPT, _EARLIER, _DIRTY, _CHANGES, _NEW, _DROPPED, _REBUILT = ('kept', 'earlier', 'dirty', 'changes', 'new', 'dropped',
                                                               'rebuilt')
_BATCH_SIZE = 256  # as listing and validation batch items


class Changes(NamedTuple):
  """What the join of listing and catalog gives."""
  todo: beam.PCollection  # lists of InputItem: new and changed files, to convert
  kept: beam.PCollection  # Entry of each record kept as it is
  earlier: beam.PCollection  # (Entry, kept) of every catalogued record, kept or not
  rewrites: beam.PCollection  # ShardRewrite of each shard that holds a record of a deleted, changed or touched file
  counts: beam.PCollection  # one element, none if nothing changed: {added, changed, removed, unchanged, touched: count}
  carried: beam.PCollection  # Rejection of each unchanged file the earlier run rejected, for the errors files
  dropped: beam.PCollection  # (lookup slot, uri) of each catalogued record dropped, for the lookup
  rebuilt: Optional[beam.PCollection]  # (lookup slot, line) of every catalogued record where the lookup is built again


class FindChanges(beam.PTransform):
  """From lists of today's items to Changes, against the catalog and the errors files of the
  dataset in ``output`` whose run record is ``earlier`` (one element); the shards ``decision``
  merges are written again whether or not they lost records."""

  def __init__(self, output: str, earlier: beam.PCollection, decision: incremental_update.Decision,
               max_file_bytes: int):
    """A step that meets today's items with the catalog by uri.

    Args:
      output: the dataset's output folder, whose catalog and errors files are read.
      earlier: one element: the dataset's run record.
      decision: the update's decision: which small shards it merges, written again whatever they lost, and how many
        lookup files the catalog has (or is built again into).
      max_file_bytes: the largest file read (--max_file_mb), as validation reads it: a file whose
        fingerprint alone changed is read to hash it.
    """
    super().__init__()
    self._output = output
    self._max_file_bytes = max_file_bytes
    self._earlier = earlier
    self._merges = decision.merges
    self._merged_into = decision.merged_into
    self._count = decision.lookup_count
    self._rebuilt = decision.lookup_rebuilt

  def expand(self, batches):
    pipeline, count = batches.pipeline, self._count
    rejected = (self._earlier
                | 'ErrorsFiles' >> beam.FlatMap(lambda record: record.errors_files)
                | 'ReadErrors' >> beam.FlatMap(_rejected, self._output))
    outputs = (_KEPT, _EARLIER, _DIRTY, _CHANGES, _DROPPED, tags.REJECTED)
    rebuilt = None
    if self._rebuilt:  # the catalog read shard by shard and met by uri, its lookup built on the way
      catalogued = (self._earlier
                    | 'CatalogFiles' >> beam.FlatMap(lambda record: [shard for split in record.splits.values()
                                                                     for shard in split.shards])
                    | 'SpreadCatalog' >> beam.Reshuffle()
                    | 'ReadCatalog' >> beam.FlatMap(_catalogued, self._output, count).with_outputs(
                        _REBUILT, main='entries'))
      rebuilt = catalogued[_REBUILT]
      listed = batches | 'Items' >> beam.FlatMap(lambda batch: [(item.uri, item) for item in batch])
      joined = ({'listed': listed, 'catalogued': catalogued.entries, 'rejected': rejected}
                | 'ByUri' >> beam.CoGroupByKey()
                | 'Compare' >> beam.FlatMap(_compared, self._max_file_bytes, count).with_outputs(
                    *outputs, main='todo'))
    else:  # each lookup file met with today's items of its uris by one worker
      # Every shard and catalog checked against the record first, shard by shard, their entries unparsed.
      checked = (self._earlier
                 | 'Shards' >> beam.FlatMap(lambda record: [shard for split in record.splits.values()
                                                            for shard in split.shards])
                 | 'SpreadShards' >> beam.Reshuffle()
                 | 'CheckShards' >> beam.FlatMap(_check_kept, self._output))
      listed = batches | 'ItemsBySlot' >> beam.FlatMap(
          lambda batch: [(catalog_lookup.slot(item.uri, count), item) for item in batch])
      found = self._earlier | 'LookupFiles' >> beam.FlatMap(
          lambda record: [(file.slot, file) for file in record.catalog_lookup.files])
      joined = ({'listed': listed, 'lookup': found,
                 'rejected': rejected | 'RejectedBySlot' >> beam.MapTuple(
                     lambda uri, rejection: (catalog_lookup.slot(uri, count), rejection))}
                | 'BySlot' >> beam.CoGroupByKey()
                | 'Compare' >> beam.ParDo(_CompareSlot(self._output, self._max_file_bytes, count),
                                          beam.pvalue.AsSingleton(self._earlier), beam.pvalue.AsList(checked)
                                          ).with_outputs(*outputs, main='todo'))
    todo = joined.todo | 'Batch' >> beam.BatchElements(min_batch_size=_BATCH_SIZE, max_batch_size=_BATCH_SIZE
                                                        ).with_output_types(List[InputItem])
    merged = pipeline | 'Merges' >> beam.Create([(merge.file, None) for merge in self._merges])
    rewrites = ((joined[_DIRTY] | 'IntoMerges' >> beam.Map(_into, self._merged_into), merged)
                | 'Rewritten' >> beam.Flatten()
                | 'ByShard' >> beam.GroupByKey()
                | 'Rewrite' >> beam.Map(_rewrite, {merge.file: merge for merge in self._merges}
                                             ).with_output_types(ShardRewrite))
    counts = (joined[_CHANGES]
              | 'CountChanges' >> beam.combiners.Count.PerElement()
              # Read as a side input whose default is {}: no branch for an empty input (graph.summed_up).
              | 'AllChanges' >> beam.CombineGlobally(beam.combiners.ToDictCombineFn()).without_defaults())
    return Changes(todo, joined[_KEPT], joined[_EARLIER], rewrites, counts, joined[tags.REJECTED], joined[_DROPPED],
                   rebuilt)


def with_record_fingerprints(batch: List[InputItem]) -> List[InputItem]:
  """A batch's items, each with the fingerprint of its record (fingerprints.of_record)."""
  return [item._replace(fingerprint=fingerprints.of_record(item)) for item in batch]


class ListingDigest(beam.CombineFn):
  """The digest of the whole listing (listing_digest.Digest), from each batch's and rejection's."""

  def create_accumulator(self) -> listing_digest.Digest:
    return listing_digest.Digest()

  def add_input(self, accumulator: listing_digest.Digest, value: Any) -> listing_digest.Digest:
    return accumulator.merge(listing_digest.of(value if isinstance(value, list) else [value]))

  def merge_accumulators(self, accumulators: Iterable[listing_digest.Digest]) -> listing_digest.Digest:
    merged = listing_digest.Digest()
    for accumulator in accumulators:
      merged = merged.merge(accumulator)
    return merged

  def extract_output(self, accumulator: listing_digest.Digest) -> listing_digest.Digest:
    return accumulator


def _catalogued(shard: Shard, output: str, count: int) -> Iterator[Any]:
  """(uri, (shard, entry)) of each record of one shard, for the join by uri, and its lookup line."""
  for entry in checked_catalog(shard, output):
    yield entry.uri, ((shard.file, shard.key), entry)
    yield beam.pvalue.TaggedOutput(_REBUILT, (catalog_lookup.slot(entry.uri, count),
                                              catalog_lookup.line(shard.key, entry)))


class _CompareSlot(beam.DoFn):
  """One lookup file's entries met with today's items and earlier rejections of its uris, uri by
  uri as _compare meets them; every uri of the file, listed or not, is compared."""

  def __init__(self, output: str, max_file_bytes: int, count: int):
    super().__init__()
    self._output = output
    self._max_file_bytes = max_file_bytes
    self._count = count
    self._record: Optional[RunRecord] = None
    self._files: Dict[str, str] = {}

  def process(self, joined: Tuple[int, Mapping[str, Iterable[Any]]], record: Any, _checked: List[None]
              ) -> Iterator[Any]:
    _, sides = joined
    if record is not self._record:  # a side input is the same object for a worker's bundles
      self._record = record
      self._files = {shard.key: shard.file for split in record.splits.values() for shard in split.shards}
    catalogued = {}
    for found in sides['lookup']:
      for key, entry in lookup_files.entries(self._output, found):
        if key not in self._files:
          raise DamagedOutput(f'{found.file} names a shard ({key}) that the run record does not list')
        catalogued[entry.uri] = ((self._files[key], key), entry)
    listed, rejected = collections.defaultdict(list), collections.defaultdict(list)
    for item in sides['listed']:
      listed[item.uri].append(item)
    for rejection in sides['rejected']:
      rejected[rejection.uri].append(rejection)
    for uri in sorted(listed.keys() | catalogued.keys() | rejected.keys()):
      value = catalogued.get(uri)
      yield from _compared((uri, {'listed': listed.get(uri, ()), 'catalogued': [value] if value else [],
                                  'rejected': rejected.get(uri, ())}), self._max_file_bytes, self._count)


def checked_catalog(shard: Shard, output: str) -> List[Entry]:
  """The entries of one shard's catalog, checked against the run record (incremental_catalog.
  checked): DamagedOutput where the shard or its catalog is not what the record says."""
  return incremental_catalog.checked(shard, _catalog_bytes(shard, output), output_dir.size(output, shard.file))


def _check_kept(shard: Shard, output: str) -> List[None]:
  """Nothing; DamagedOutput where the shard or its catalog is not what the record says
  (incremental_catalog.check)."""
  incremental_catalog.check(shard, _catalog_bytes(shard, output), output_dir.size(output, shard.file))
  return []


def _catalog_bytes(shard: Shard, output: str) -> bytes:
  try:
    with FileSystems.open(output_dir.path(output, shard.catalog_file),
                          compression_type=CompressionTypes.UNCOMPRESSED) as f:
      return f.read()
  except (BeamIOError, OSError) as e:
    raise DamagedOutput(f'{shard.catalog_file} cannot be read: {rejections.cause(e)}') from e


def _rejected(name: str, output: str) -> Iterator[Tuple[str, Rejection]]:
  """The rejections of one earlier errors file that a later run may carry (incremental_catalog.carried)."""
  with FileSystems.open(output_dir.path(output, name), compression_type=CompressionTypes.UNCOMPRESSED) as f:
    for line in io.TextIOWrapper(f, encoding='utf-8', errors='surrogateescape'):
      rejection = Rejection.from_json(line)
      if incremental_catalog.carried(rejection):
        yield rejection.uri, rejection


def _compared(joined: Tuple[str, Mapping[str, Iterable[Any]]], max_file_bytes: int, count: int) -> Iterator[Any]:
  """What _compare gives of one uri, and (lookup slot, uri) tagged _DROPPED where its record goes."""
  for value in _compare(joined, max_file_bytes):
    if isinstance(value, beam.pvalue.TaggedOutput) and value.tag == _DIRTY and value.value[1][2] is None:
      uri = value.value[1][1]
      yield beam.pvalue.TaggedOutput(_DROPPED, (catalog_lookup.slot(uri, count), uri))
    yield value


def _compare(joined: Tuple[str, Mapping[str, Iterable[Any]]], max_file_bytes: int) -> Iterator[Any]:
  _, sides = joined
  items, catalogued, rejected = list(sides['listed']), list(sides['catalogued']), list(sides['rejected'])
  earlier = [entry.fingerprint for _, entry in catalogued] + [rejection.fingerprint for rejection in rejected]
  change = incremental_catalog.change([item.fingerprint for item in items], earlier)
  if (change == incremental_catalog.CHANGED and len(items) == len(catalogued) == 1 and not rejected
      and fingerprints.only_file_changed(items[0].fingerprint, catalogued[0][1].fingerprint)
      and _same_bytes(items[0], catalogued[0][1], max_file_bytes)):
    change = incremental_catalog.TOUCHED
  yield beam.pvalue.TaggedOutput(_CHANGES, change)
  kept = change in (incremental_catalog.UNCHANGED, incremental_catalog.TOUCHED)
  for _, entry in catalogued:
    yield beam.pvalue.TaggedOutput(_EARLIER, (entry, kept))
  if kept and rejected:  # rejected again, unread
    progress_counts.counts().checked(len(items), rejected=len(items))
    yield beam.pvalue.TaggedOutput(tags.REJECTED, rejected[0])
    return
  if kept:
    shard, entry = catalogued[0]
    yield beam.pvalue.TaggedOutput(_KEPT, entry)
    progress_counts.counts().checked(len(items), rejected=0)
    if change == incremental_catalog.TOUCHED:  # its shard written again, its catalog line with the new fingerprint
      file, key = shard
      yield beam.pvalue.TaggedOutput(_DIRTY, (file, (entry.split, entry.uri, items[0].fingerprint, key)))
    return
  yield from items
  for (file, key), entry in catalogued:
    yield beam.pvalue.TaggedOutput(_DIRTY, (file, (entry.split, entry.uri, None, key)))


def _same_bytes(item: InputItem, entry: Entry, max_file_bytes: int) -> bool:
  """Whether a listed file whose fingerprint changed holds the bytes its catalogued record was
  made from: as its metadata says (fingerprints.same_bytes), else as its hash does."""
  same = fingerprints.same_bytes(item.fingerprint, entry.fingerprint)
  return content_hash(item.uri, max_file_bytes) == entry.source_sha256 if same is None else same


def content_hash(uri: str, max_file_bytes: int) -> Optional[str]:
  """The SHA-256 of a file's bytes, read and hashed as validation reads and hashes a record's
  source (reading.read_file: a named pipe refused, not waited on; transient failures retried);
  None if it cannot be read, which validation will then say why."""
  try:
    return image_info.sha256_hex(reading.read_file(uri, max_file_bytes, open_image))
  except (Rejected, reading.TransientReadError):
    return None


# A record the rewrite of its shard drops (touched: None), or keeps with its file's new fingerprint.
Dirty = Tuple[str, Tuple[str, str, Optional[str], str]]  # (shard, (split, uri, touched, shard id))


def _into(dirty: Dirty, merged_into: Mapping[str, str]) -> Dirty:
  """A record to drop or give a new fingerprint, under the shard that is written again: its own,
  or the one its shard is merged into."""
  shard, record = dirty
  return merged_into.get(shard, shard), record


def _rewrite(grouped: Tuple[str, Iterable[Any]], merges: Mapping[str, incremental_update.Merge]) -> ShardRewrite:
  shard, dirty = grouped
  dirty = sorted(value for value in dirty if value is not None)
  merge = merges.get(shard)
  split = merge.split if merge else dirty[0][0]
  return ShardRewrite(split, shard, merge.sources if merge else (shard,),
                      dropped=tuple(uri for _, uri, touched, _ in dirty if touched is None),
                      touched=tuple((uri, touched) for _, uri, touched, _ in dirty if touched is not None),
                      shard_id=merge.shard_id if merge else dirty[0][3])


class EarlierCopies(beam.PTransform):
  """Lists of new records, each copy of a picture the dataset held (a renamed file, a copy of a
  kept one) in that picture's split, so splits stay stable and leak-free; under ``dedupe`` a
  copy of a picture the dataset keeps is rejected as its duplicate, tagged REJECTED.

  Every group of identical files the updated dataset holds goes on tagged DUPLICATES, as
  content_groups.GroupCopies lists them: the kept records of each content hash meet the new ones
  here anyway, so beam_pipeline.json describes the dataset, not the increment (and planning's
  own list, of the increment, is left unused).

  ``near`` (NearEarlierCopies's) places a near copy of a catalogued picture the same way, unless
  a manifest or a folder gave it a split (likeness may be wrong); under ``drop_near`` a near copy
  of a picture the dataset keeps is rejected, the dataset's image kept."""

  def __init__(self, earlier: beam.PCollection, dedupe: bool, near: Optional[beam.PCollection] = None,
               drop_near: bool = False):
    """A step that meets the new records with the catalogued ones by content hash.

    Args:
      earlier: (Entry, kept) of every catalogued record (Changes.earlier).
      dedupe: --dedupe, which keeps one copy of each picture.
      near: (source_sha256, Catalogued) of each new near copy of a catalogued record (NearEarlierCopies's 'near');
        None under --near_copies=off.
      drop_near: --near_copies=drop, which keeps one picture of each group of near copies.
    """
    super().__init__()
    self._earlier = earlier
    self._dedupe = dedupe
    self._near = near
    self._drop_near = drop_near

  def expand(self, batches):
    records = batches | 'Records' >> beam.FlatMap(lambda batch: [(record.source_sha256, record) for record in batch])
    earlier = self._earlier | 'EarlierByContent' >> beam.MapTuple(_by_content)
    sides = {'new': records, 'earlier': earlier}
    if self._near is not None:
      sides['near'] = self._near
    placed = (sides
              | 'ByContent' >> beam.CoGroupByKey()
              | 'Place' >> beam.FlatMap(_placed, self._dedupe, self._drop_near).with_outputs(
                  tags.REJECTED, tags.DUPLICATES, main='records'))
    batched = placed.records | 'Batch' >> beam.BatchElements(min_batch_size=_BATCH_SIZE, max_batch_size=_BATCH_SIZE
                                                            ).with_output_types(List[CheckedImage])
    return {'records': batched, tags.REJECTED: placed[tags.REJECTED], tags.DUPLICATES: placed[tags.DUPLICATES]}


class Catalogued(NamedTuple):
  """What a content hash's join needs of a catalogued record: where it is, whether it is kept,
  and its labels for the list of identical files (splitting.duplicate_group_entry)."""
  uri: str
  split: str
  kept: bool  # its file is unchanged: the updated dataset holds the record
  label: Optional[str]
  labels: Tuple[str, ...]


def _by_content(entry: Entry, kept: bool) -> Tuple[str, Catalogued]:
  return entry.source_sha256, Catalogued(entry.uri, entry.split, kept, entry.label, entry.labels)


def _placed(joined: Tuple[str, Mapping[str, Iterable[Any]]], dedupe: bool, drop_near: bool = False) -> Iterator[Any]:
  _, sides = joined
  new = sorted(sides['new'], key=lambda record: record.uri)
  earlier = sorted(sides['earlier'])  # by uri, as copies are grouped
  duplicates = _duplicate_group(earlier, new, dedupe)
  if duplicates:
    yield beam.pvalue.TaggedOutput(tags.DUPLICATES, duplicates)
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


class NearEarlierCopies(beam.PTransform):
  """Lists of new records to (source_sha256, Catalogued) for each new file that is a near
  copy of a catalogued record (their perceptual hashes grouped as planning groups near copies,
  near_copy_groups.grouped), naming one such record, a kept one first: EarlierCopies's ``near``.

  The catalog's hashes join the new ones, so the grouping holds the whole dataset's; each group
  then meets its members by representative, and no key holds more than a group. Returns
  {'near': EarlierCopies's ``near``, 'members': (representative, members) of every group, for
  NearGroupsOfDataset, 'found': the grouping's summary, as FindNearCopies's 'found'}."""

  def __init__(self, earlier: beam.PCollection, num_listed: beam.PCollection, settings: Settings, one_machine: bool):
    """A step that groups the new records' perceptual hashes with the catalog's.

    Args:
      earlier: (Entry, kept) of every catalogued record (Changes.earlier).
      num_listed: one element: how many inputs were listed, which sets the distance and the largest group
        (near_copy_groups.near_distance, largest_group).
      settings: the conversion's settings.
      one_machine: the runner holds every element in one process (the DirectRunner's): the hashes are grouped in
        memory (near_copy_groups.grouped).
    """
    super().__init__()
    self._earlier = earlier
    self._num_listed = num_listed
    self._settings = settings
    self._one_machine = one_machine

  def expand(self, records):
    distance = near_copy_groups.near_distance(records.pipeline, self._num_listed, self._settings.near_distance)
    hashes = ((records | 'NewHashes' >> beam.Map(content_groups.perceptual_hashes),
               self._earlier | 'EarlierHashes' >> beam.MapTuple(_earlier_hash))
              | 'AllHashes' >> beam.Flatten())
    cap = near_copy_groups.largest_group(self._num_listed, self._settings)
    found = near_copy_groups.grouped(hashes, distance, cap, self._one_machine)
    catalogued = self._earlier | 'EarlierByContent' >> beam.MapTuple(_by_content)
    files = records | 'NewFiles' >> beam.FlatMap(
        lambda batch: [(record.source_sha256, (record.uri, record.label, record.labels)) for record in batch])
    members = ({'pairs': found['pairs'], 'earlier': catalogued, 'new': files}
               | 'ByContent' >> beam.CoGroupByKey()
               | 'ByGroup' >> beam.FlatMap(_member_of_group)
               | 'GroupMembers' >> beam.GroupByKey())
    summary = found[tags.NEAR_COPIES] | 'WithDistance' >> beam.Map(
        near_copy_groups.left_out, beam.pvalue.AsSingleton(distance), beam.pvalue.AsSingleton(cap))
    return {'near': members | 'NearSplits' >> beam.FlatMap(_near_earlier), 'members': members, 'found': summary}


def _earlier_hash(entry: Entry, _kept: bool) -> List[Tuple[str, str, int]]:
  """A catalogued record's (source_sha256, phash, priority), as content_groups.perceptual_hashes lists
  a new one's: none for a featureless image, or from a catalog written before hashes were."""
  if not entry.phash or image_quality.LOW_INFORMATION in entry.quality:
    return []
  return [(entry.source_sha256, entry.phash,
           near_copies.priority(entry.damaged, entry.longer_side, entry.stored_bytes))]


# A new file as a group of near copies lists it: (uri, label, labels).
NewFile = Tuple[str, Optional[str], Tuple[str, ...]]


def _member_of_group(joined: Tuple[str, Mapping[str, Iterable[Any]]]) -> Iterator[Tuple[str, Tuple[str, str, Any]]]:
  """The files of one content hash in a group of near copies, under the group's representative:
  each catalogued record (_EARLIER, sha, Catalogued), and the new files (_NEW, sha, NewFile list)."""
  sha, sides = joined
  representative = next(iter(sides['pairs']), None)
  if representative is None:
    return
  yield from ((representative, (_EARLIER, sha, value)) for value in sides['earlier'])
  new = {uri: (uri, label, labels) for uri, label, labels in sides['new']}  # a manifest may name a file twice
  if new:
    yield representative, (_NEW, sha, [new[uri] for uri in sorted(new)])


def _near_earlier(grouped: Tuple[str, Iterable[Tuple[str, str, Any]]]) -> Iterator[Tuple[str, Catalogued]]:
  _, members = grouped
  members = list(members)
  earlier = min((value for kind, _, value in members if kind == _EARLIER), key=_kept_first, default=None)
  if earlier is None:
    return
  for sha in sorted({sha for kind, sha, _ in members if kind == _NEW}):
    yield sha, earlier


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
        lambda plan: [(record.source_sha256, (record.uri, plan.split)) for record in plan.records])
    joined = ({'group': listed[_NEW], 'written': written}
              | 'NewByContent' >> beam.CoGroupByKey()
              | 'NewMembers' >> beam.FlatMap(_new_members, self._drop, self._dedupe))
    entries = ((listed.earlier, joined)
               | 'AllMembers' >> beam.Flatten()
               | 'ByRepresentative' >> beam.GroupByKey()
               | 'Entries' >> beam.FlatMap(_near_entry, self._drop, self._dedupe))
    groups = entries | 'SumUp' >> beam.CombineGlobally(content_groups.NearGroups()).without_defaults()
    return self._found | 'WithGroups' >> beam.Map(
        lambda summary, groups: {**groups, **summary},
        beam.pvalue.AsSingleton(groups, default_value=content_groups.NearGroups().apply([])))


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
    yield splitting.near_group_entry(members, kept=next((m for m in members if m.split), members[0]))
  else:
    yield splitting.near_group_entry(members, split=', '.join(sorted({member.split for member in members})))


class KeptCounts(beam.PTransform):
  """(class, (split, records)) of the kept records, for a side input looked up class by class
  (content_groups.AssignSplits)."""

  def expand(self, kept):
    return (kept
            | 'ClassAndSplit' >> beam.Map(lambda entry: (entry.stratum, entry.split))
            | 'Count' >> beam.combiners.Count.PerElement()
            | 'ByClass' >> beam.MapTuple(lambda key, count: (key[0], (key[1], count))))

