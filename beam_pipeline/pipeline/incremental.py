"""An --incremental run's own steps: today's listing met with the earlier run's catalog, file by
file, so that only what changed is read (a file whose fingerprint alone changed is hashed, and
kept if its bytes did not). earlier_copies.py then meets the new records with the catalogued
pictures they copy.

The listing meets the catalog through its lookup by uri (core/output/catalog_lookup.py): each
item goes to the slot of its uri, and one worker per slot reads the slot's lookup file and
compares, so no catalogued record crosses a shuffle to be found unchanged and no element holds
the catalog or the listing. Where the lookups are built again (an output from before them, or
one that outgrew them: catalog_lookup.fits), the catalog is read shard by shard and each entry
crosses a shuffle to its slot instead, once.
"""
import collections
import io
import itertools
from typing import Any, Container, Dict, Iterable, Iterator, List, Mapping, NamedTuple, Optional, Set, Tuple

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.windowed_value import WindowedValue

from beam_pipeline.pipeline import tags
from beam_pipeline.pipeline.output import lookup_files, output_dir
from beam_pipeline.pipeline.pooled_steps import open_image
from beam_pipeline.core.console import progress_counts
from beam_pipeline.core.images import image_info
from beam_pipeline.core.inputs import fingerprints, listing_digest, reading
from beam_pipeline.core.messages import InputItem, InputItems, Rejection, ShardRewrite
from beam_pipeline.core.output import catalog_lookup, catalog_entries, incremental_update, output_layout
from beam_pipeline.core.output.catalog_entries import Entry
from beam_pipeline.core.output.run_record import LookupFile, RunRecord, Shard
from beam_pipeline.core.rejections import DamagedOutput, Rejected

_KEPT, _EARLIER, _DIRTY, _CHANGES = 'kept', 'earlier', 'dirty', 'changes'
_DROPPED, _DROPPED_CONTENT, _REBUILT_CONTENT = 'dropped', 'dropped_content', 'rebuilt_content'
_BATCH_SIZE = 256  # as listing and validation batch items


class Changes(NamedTuple):
  """What the join of listing and catalog gives."""
  todo: beam.PCollection  # lists of InputItem: new and changed files, to convert
  kept: beam.PCollection  # ((class, split), count) of the records kept as they are, summed per lookup file
  rewrites: beam.PCollection  # ShardRewrite of each shard that holds a record of a deleted, changed or touched file
  counts: beam.PCollection  # one element, none if nothing changed: {added, changed, removed, unchanged, touched: count}
  carried: beam.PCollection  # Rejection of each unchanged file the earlier run rejected, for the errors files
  # For each catalogued record dropped (its file removed or changed), its (slot, Dropped) in each lookup.
  dropped: beam.PCollection  # identity: the uri
  dropped_content: beam.PCollection  # identity: (content hash, uri)
  # Where the lookups are built again: (slot, line as the file holds it) of every catalogued record in each; else None.
  rebuilt: Optional[beam.PCollection]
  rebuilt_content: Optional[beam.PCollection]


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
        files the catalog's lookups have (or are built again into).
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
    pipeline, count, by_uri = batches.pipeline, self._count, catalog_lookup.BY_URI
    listed = batches | 'ItemsBySlot' >> beam.ParDo(_ItemsBySlot(count)).with_output_types(Tuple[int, InputItems])
    rejected = (self._earlier
                | 'ErrorsFiles' >> beam.FlatMap(lambda record: record.errors_files)
                | 'ReadErrors' >> beam.FlatMap(_rejected, self._output)
                | 'RejectedBySlot' >> beam.MapTuple(lambda uri, rejection: (by_uri.slot(uri, count), rejection)))
    shards = self._earlier | 'Shards' >> beam.FlatMap(
        lambda record: [shard for split in record.splits.values() for shard in split.shards])
    compare = _CompareSlot(self._output, self._max_file_bytes, count)
    outputs = (_KEPT, _DIRTY, _CHANGES, _DROPPED, _DROPPED_CONTENT, tags.REJECTED)
    rebuilt = rebuilt_content = None
    if self._rebuilt:  # the catalog read shard by shard (and checked), each entry to its slot in each lookup
      catalogued = (shards
                    | 'SpreadCatalog' >> beam.Reshuffle()
                    | 'ReadCatalog' >> beam.FlatMap(_catalogued, self._output, count).with_outputs(
                        _REBUILT_CONTENT, main='by_uri'))
      rebuilt, rebuilt_content = catalogued.by_uri, catalogued[_REBUILT_CONTENT]
      joined = ({'listed': listed, 'rejected': rejected, 'lines': rebuilt}
                | 'BySlot' >> beam.CoGroupByKey()
                | 'Compare' >> beam.ParDo(compare, beam.pvalue.AsSingleton(self._earlier)).with_outputs(
                    *outputs, main='todo'))
    else:
      # Only today's items cross a shuffle, to their slots, with a mark for each slot the lookup
      # holds (one whose files were all removed has no item); each shard and catalog is checked
      # against the record first, its entries unparsed; an earlier rejection is looked up by slot.
      marks = self._earlier | 'Slots' >> beam.FlatMap(
          lambda record: [(found.slot, _MARK) for found in record.catalog_lookup.files]
      ).with_output_types(Tuple[int, InputItems])
      checked = shards | 'SpreadShards' >> beam.Reshuffle() | 'CheckShards' >> beam.FlatMap(_check_kept, self._output)
      joined = ((listed, marks)
                | 'ItemsAndSlots' >> beam.Flatten()
                | 'BySlot' >> beam.GroupByKey()
                | 'Compare' >> beam.ParDo(compare, beam.pvalue.AsSingleton(self._earlier),
                                          beam.pvalue.AsMultiMap(rejected), beam.pvalue.AsList(checked)
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
              | 'CountChanges' >> beam.CombinePerKey(sum)
              # Read as a side input whose default is {}: no branch for an empty input (steps.BeamSteps.summed_up).
              | 'AllChanges' >> beam.CombineGlobally(beam.combiners.ToDictCombineFn()).without_defaults())
    return Changes(todo, joined[_KEPT], rewrites, counts, joined[tags.REJECTED], joined[_DROPPED],
                   joined[_DROPPED_CONTENT], rebuilt, rebuilt_content)


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
  """(slot, line) of each record of one shard in the lookup by uri, and tagged _REBUILT_CONTENT
  in the lookup by content: a lookup built again; each line as the file holds it
  (output_layout.encoded), since Beam's string coders refuse a name that is not UTF-8."""
  for entry in checked_catalog(shard, output):
    for lookup in (catalog_lookup.BY_URI, catalog_lookup.BY_CONTENT):
      line = (lookup.slot_of(entry, count), output_layout.encoded(lookup.line(shard.key, entry)))
      yield beam.pvalue.TaggedOutput(_REBUILT_CONTENT, line) if lookup.by_content else line


# What marks a slot of the lookup by uri for the join (FindChanges): no item.
_MARK = InputItems.of(())
# The most items _ItemsBySlot holds before it sends them on: a few MB.
_ITEMS_HELD = 20_000


class _ItemsBySlot(beam.DoFn):
  """Lists of items to (slot of the lookup by uri, InputItems): a bundle's items of one slot
  gathered, up to _ITEMS_HELD at a time, so that they cross the shuffle to their slot as a few
  elements, not one each."""

  def __init__(self, count: int):
    super().__init__()
    self._count = count
    self._held: Dict[int, List[InputItem]] = {}
    self._size = 0

  def start_bundle(self) -> None:
    self._held, self._size = {}, 0

  def process(self, batch: List[InputItem]) -> Iterator[Tuple[int, InputItems]]:
    for item in batch:
      self._held.setdefault(catalog_lookup.BY_URI.slot(item.uri, self._count), []).append(item)
    self._size += len(batch)
    if self._size >= _ITEMS_HELD:
      yield from self._sent()

  def finish_bundle(self) -> Iterator[WindowedValue]:
    for value in self._sent():
      yield GlobalWindows.windowed_value(value)

  def _sent(self) -> Iterator[Tuple[int, InputItems]]:
    held, self._held, self._size = self._held, {}, 0
    for slot in sorted(held):
      yield slot, InputItems.of(held[slot])


class _CompareSlot(beam.DoFn):
  """The entries of one slot of the lookup by uri (its file, or the lines of a lookup built
  again) met with today's items and earlier rejections of its uris, uri by uri as _compare
  meets them; every uri of the slot, listed or not, is compared. A record that did not change
  is told from its line's head (catalog_lookup.Lookup.head), unparsed, in one pass over the
  lines; only the other uris are put in order and compared one by one. Changes and kept
  records come out counted per slot, not per record."""

  def __init__(self, output: str, max_file_bytes: int, count: int):
    super().__init__()
    self._output = output
    self._max_file_bytes = max_file_bytes
    self._count = count
    self._record: Optional[RunRecord] = None
    self._files: Dict[str, str] = {}  # shard id: file
    self._lookup: Dict[int, LookupFile] = {}  # slot: file

  def process(self, element: Tuple[int, Any], record: Any, rejected: Optional[Mapping[int, List[Rejection]]] = None,
              _checked: Any = None) -> Iterator[Any]:
    """Compares one slot.

    Args:
      element: (slot, today's items as _ItemsBySlot gathered them) with the lookup's file named by the record; or,
        where the lookups are built again, (slot, {'listed', 'rejected', 'lines'}) from a CoGroupByKey.
      record: the dataset's run record.
      rejected: the earlier rejections by slot, with today's items alone.
      _checked: nothing: the shards' checks, waited for.
    """
    slot, value = element
    if record is not self._record:  # a side input is the same object for a worker's bundles
      self._record = record
      self._files = {shard.key: shard.file for split in record.splits.values() for shard in split.shards}
      self._lookup = {found.slot: found for found in record.catalog_lookup.files} if record.catalog_lookup else {}
    by_uri, changes = catalog_lookup.BY_URI, {}
    if rejected is None:
      gathered, earlier_rejections = list(value['listed']), value['rejected']
      lines = [line.decode('utf-8') for line in value['lines']]
    else:
      found = self._lookup.get(slot)
      gathered, earlier_rejections = list(value), rejected[slot]
      lines = []
      if found:  # the file's lines and its delta's, those of the file that the delta replaces or drops skipped below
        data, changes = lookup_files.read_changes(self._output, found, by_uri)
        lines = data.decode('utf-8', 'surrogateescape').splitlines(keepends=True)
        lines.extend(line for line in changes.values() if line is not None)
    fingerprint_of, repeated = _fingerprints(gathered)
    rejections_of = collections.defaultdict(list)
    for rejection in earlier_rejections:
      rejections_of[rejection.uri].append(rejection)
    summed = {_CHANGES: collections.Counter(), _KEPT: collections.Counter()}  # one element each per key, not per uri
    kept = []  # (class, split) of each unchanged record, counted at once below
    catalogued = {}  # the lines of the uris compared one by one below: all but those of unchanged records
    for line in lines:
      head = by_uri.head(line)
      uri = head[0] if head else by_uri.identity(line)
      if uri in changes and changes[uri] is not line:
        continue
      if (head and head[1] and head[1] == fingerprint_of.get(uri) and uri not in repeated and head[2] in self._files
              and uri not in rejections_of):
        del fingerprint_of[uri]
        kept.append((head[4], head[3]))
      else:
        catalogued[uri] = line
    listed = _items_of(gathered, fingerprint_of)
    for uri in sorted(listed.keys() | catalogued.keys() | rejections_of.keys()):
      line, today = catalogued.get(uri), listed.get(uri, ())
      earlier = []
      if line:
        key, entry = by_uri.parse(line)
        if key not in self._files:
          raise DamagedOutput(f'{by_uri.file_name(slot, self._count)} names a shard ({key}) that the run record '
                              'does not list')
        earlier.append(((self._files[key], key), entry))
      for out in _compared((uri, {'listed': today, 'catalogued': earlier,
                                  'rejected': rejections_of.get(uri, ())}), self._max_file_bytes, self._count):
        if isinstance(out, beam.pvalue.TaggedOutput) and out.tag in summed:
          summed[out.tag][out.value[0]] += 1
        else:
          yield out
    if kept:
      summed[_KEPT].update(kept)
      summed[_CHANGES][catalog_entries.UNCHANGED] += len(kept)
      progress_counts.counts().checked(len(kept), rejected=0)
    for tag, counter in summed.items():
      yield from (beam.pvalue.TaggedOutput(tag, counted) for counted in counter.items())


def _fingerprints(gathered: List[InputItems]) -> Tuple[Dict[str, str], Set[str]]:
  """The fingerprint of each uri of a slot's items (as _ItemsBySlot gathered them), and the uris
  listed more than once (a manifest may name a file twice), which are compared one by one."""
  fingerprint_of: Dict[str, str] = {}
  for items in gathered:
    fingerprint_of.update(zip(items.uris, items.fingerprints))
  if sum(len(items.uris) for items in gathered) == len(fingerprint_of):
    return fingerprint_of, set()
  counted = collections.Counter(uri for items in gathered for uri in items.uris)
  return fingerprint_of, {uri for uri, count in counted.items() if count > 1}


def _items_of(gathered: List[InputItems], uris: Container[str]) -> Dict[str, List[InputItem]]:
  """The items of ``uris`` among a slot's, by uri: only those are made InputItems."""
  listed = collections.defaultdict(list)
  for items in gathered:
    for index in itertools.compress(range(len(items.uris)), map(uris.__contains__, items.uris)):
      item = items.item(index)
      listed[item.uri].append(item)
  return listed


def checked_catalog(shard: Shard, output: str) -> List[Entry]:
  """The entries of one shard's catalog, checked against the run record (catalog_entries.
  checked): DamagedOutput where the shard or its catalog is not what the record says."""
  return catalog_entries.checked(shard, output_dir.read_listed(output, shard.catalog_file),
                                     output_dir.size(output, shard.file))


def _check_kept(shard: Shard, output: str) -> List[None]:
  """Nothing; DamagedOutput where the shard or its catalog is not what the record says
  (catalog_entries.check)."""
  catalog_entries.check(shard, output_dir.read_listed(output, shard.catalog_file),
                            output_dir.size(output, shard.file))
  return []


def _rejected(name: str, output: str) -> Iterator[Tuple[str, Rejection]]:
  """The rejections of one earlier errors file that a later run may carry (catalog_entries.carried)."""
  with FileSystems.open(output_dir.path(output, name), compression_type=CompressionTypes.UNCOMPRESSED) as f:
    for line in io.TextIOWrapper(f, encoding='utf-8', errors='surrogateescape'):
      rejection = Rejection.from_json(line)
      if catalog_entries.carried(rejection):
        yield rejection.uri, rejection


def _compared(joined: Tuple[str, Mapping[str, Iterable[Any]]], max_file_bytes: int, count: int) -> Iterator[Any]:
  """What _compare gives of one uri, to be summed up by key: its change as (change, 1), a kept
  record as ((class, split), 1); a catalogued record dropped as its (slot, identity) in each
  lookup, tagged _DROPPED and _DROPPED_CONTENT."""
  for value in _compare(joined, max_file_bytes):
    if isinstance(value, beam.pvalue.TaggedOutput):
      if value.tag == _CHANGES:
        value = beam.pvalue.TaggedOutput(_CHANGES, (value.value, 1))
      elif value.tag == _KEPT:
        value = beam.pvalue.TaggedOutput(_KEPT, ((value.value.stratum, value.value.split), 1))
      elif value.tag == _EARLIER:
        entry, kept = value.value
        if not kept:
          for lookup, tag in ((catalog_lookup.BY_URI, _DROPPED), (catalog_lookup.BY_CONTENT, _DROPPED_CONTENT)):
            yield beam.pvalue.TaggedOutput(tag, (lookup.slot_of(entry, count), Dropped(lookup.identity_of(entry))))
        continue
    yield value


def _compare(joined: Tuple[str, Mapping[str, Iterable[Any]]], max_file_bytes: int) -> Iterator[Any]:
  _, sides = joined
  items, catalogued, rejected = list(sides['listed']), list(sides['catalogued']), list(sides['rejected'])
  earlier = [entry.fingerprint for _, entry in catalogued] + [rejection.fingerprint for rejection in rejected]
  change = catalog_entries.change([item.fingerprint for item in items], earlier)
  if (change == catalog_entries.CHANGED and len(items) == len(catalogued) == 1 and not rejected
      and fingerprints.only_file_changed(items[0].fingerprint, catalogued[0][1].fingerprint)
      and _same_bytes(items[0], catalogued[0][1], max_file_bytes)):
    change = catalog_entries.TOUCHED
  yield beam.pvalue.TaggedOutput(_CHANGES, change)
  kept = change in (catalog_entries.UNCHANGED, catalog_entries.TOUCHED)
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
    if change == catalog_entries.TOUCHED:  # its shard written again, its catalog line with the new fingerprint
      file, key = shard
      yield beam.pvalue.TaggedOutput(_DIRTY, (file, DirtyRecord(entry.split, entry.uri, items[0].fingerprint, key)))
    return
  yield from items
  for (file, key), entry in catalogued:
    yield beam.pvalue.TaggedOutput(_DIRTY, (file, DirtyRecord(entry.split, entry.uri, None, key)))


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


# The elements below hold uris, and cross shuffles as NamedTuples, pickled: a name that is not
# UTF-8 holds lone surrogates, which Beam's string coders (those of plain tuples too) refuse.
class Dropped(NamedTuple):
  """A catalogued record dropped, by its identity in a lookup (Lookup.identity_of)."""
  identity: Any


class DirtyRecord(NamedTuple):
  """A record the rewrite of its shard drops (touched: None), or keeps with its file's new fingerprint."""
  split: str
  uri: str
  touched: Optional[str]
  shard_id: str


Dirty = Tuple[str, DirtyRecord]  # under its shard


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
  dropped = tuple(uri for _, uri, touched, _ in dirty if touched is None)
  return ShardRewrite(split, shard, merge.sources if merge else (shard,), dropped=dropped,
                      touched=tuple((uri, touched) for _, uri, touched, _ in dirty if touched is not None),
                      shard_id=merge.shard_id if merge else dirty[0][3], catalog_only=not (merge or dropped))


class KeptCounts(beam.PTransform):
  """(class, (split, records)) of the kept records (Changes.kept), for a side input looked up
  class by class (content_groups.splits_assigned)."""

  def expand(self, kept):
    return (kept
            | 'Count' >> beam.CombinePerKey(sum)
            | 'ByClass' >> beam.MapTuple(lambda key, count: (key[0], (key[1], count))))
