"""Planning on metadata only: identical files grouped, splits assigned and shards planned,
bucket by bucket, with per-key totals as side inputs, so that no worker holds a whole class."""
import collections.abc
import functools
import itertools
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

import apache_beam as beam
from apache_beam.metrics import Metrics

from beam_pipeline.pipeline import coders, tags
from beam_pipeline.pipeline.tags import REJECTED
from beam_pipeline.core import isolation
from beam_pipeline.core.console import progress_counts
from beam_pipeline.core.inputs import repeated_rows
from beam_pipeline.core.output import run_totals
from beam_pipeline.core.planning import hash_order, near_copies, sharding, splitting
from beam_pipeline.core.messages import ContentGroup, CheckedImage, Rejection, ShardPlan
from beam_pipeline.core.rejections import Rejected
from beam_pipeline.core.settings import SplitSpec

# Batches of records go on in lists of about this many, as validation makes them.
_BATCH_SIZE = 256


def bucket_by_content(records: List[CheckedImage], listed: int, records_per_bucket: int
                      ) -> Iterable[Tuple[str, List[CheckedImage]]]:
  """A list of validated records as (content bucket, records) pairs, the buckets as wide as
  ``listed`` inputs need."""
  digits = hash_order.prefix_digits(listed, splitting.CONTENT_BUCKET_DIGITS, records_per_bucket)
  return splitting.content_buckets(records, digits).items()


def near_pair_bucket(pair: Tuple[str, str], listed: int, records_per_bucket: int) -> Tuple[str, Tuple[str, str]]:
  """A file's (source_sha256, near-copy representative) under the content bucket its records are in."""
  digits = hash_order.prefix_digits(listed, splitting.CONTENT_BUCKET_DIGITS, records_per_bucket)
  return pair[0][:digits], pair


def perceptual_hashes(records: List[CheckedImage]) -> List[Tuple[str, str, int, str]]:
  """(source_sha256, perceptual hash, priority, colour signature) of a batch's records, as
  NearCopies takes them (a featureless image's hash is of its brightness: perceptual_hash.flat)."""
  return [(record.source_sha256, record.phash,
           near_copies.priority(record.damaged, max(record.height, record.width), record.num_bytes), record.colour)
          for record in records if record.phash]


class GroupCopies(beam.DoFn):
  """Finds the identical files of one content bucket; reports and maybe drops copies. A
  manifest's rows that name one image again (``row_name``: a manifest's) are rejected here,
  where the image's records meet.

  Emits the bucket's content groups, all classes together, as one (bucket, groups) element.
  Given ``near`` (a multimap side input of content bucket to (sha256, representative) pairs),
  the groups of near copies go on tagged tags.NEAR_COPIES as (near bucket of their
  representative, (representative, group)), to meet there."""

  def __init__(self, dedupe: bool, row_name: Optional[repeated_rows.RowName] = None):
    self._dedupe = dedupe
    self._row_name = row_name

  def process(self, bucket: Tuple[str, Iterable[List[CheckedImage]]],
              near: Optional[Mapping[str, Iterable[Tuple[str, str]]]] = None) -> Iterator[Any]:
    groups = []
    representatives = dict(near[bucket[0]]) if near is not None else {}
    records = list(itertools.chain.from_iterable(bucket[1]))
    tags.records_per_key('GroupByContent').update(len(records))
    for copies in splitting.same_content(records):
      if self._row_name and len(copies) > 1:
        copies, repeated = repeated_rows.first_of_each_uri(copies, self._row_name)
        progress_counts.counts().rejected(len(repeated))
        yield from map(tags.rejected, repeated)
      grouped, failed = _isolated(copies, splitting.group_duplicates, copies, self._dedupe)
      yield from failed
      if failed:
        continue
      group, dropped = grouped
      if len(copies) > 1:
        Metrics.counter(tags.NAMESPACE, 'duplicate_groups').inc()
        yield beam.pvalue.TaggedOutput(tags.DUPLICATES, coders.PickledDict(splitting.duplicate_group_entry(
            copies, group.records[0] if self._dedupe and group.records else None, self._dedupe)))
      if dropped:
        progress_counts.counts().rejected(len(dropped))
        yield from map(tags.rejected, dropped)
      if not group.records:  # every copy rejected
        continue
      representative = representatives.get(copies[0].source_sha256)
      if representative is None:
        groups.append(group)
      else:
        near_bucket = splitting.near_bucket(representative[:len(bucket[0])])
        yield beam.pvalue.TaggedOutput(tags.NEAR_COPIES, (near_bucket, (representative, group)))
    yield bucket[0], groups


def _isolated(records: List[CheckedImage], function: Callable[..., Any], *args: Any) -> Tuple[Any, List[Any]]:
  """``function(*args)`` on one group of ``records``, isolated (isolation.GROUP): its result and
  no rejections, or, if it failed, None and every record's rejection, tagged and counted."""
  result = isolation.run(isolation.GROUP, [record.uri for record in records], function, *args)
  if not isinstance(result, Rejected):
    return result, []
  progress_counts.counts().rejected(len(records))
  return None, [tags.rejected(Rejection.of(record.uri, result)) for record in records]


def merge_near_copies(bucket: Tuple[str, Iterable[Tuple[str, ContentGroup]]], drop: bool) -> Iterator[Any]:
  """One near bucket's groups of near copies, each merged into one content group
  (splitting.merge_near_copies), as one (bucket, groups) element; under ``drop`` the files
  dropped, and each group's entry for beam_pipeline.json tagged tags.NEAR_COPIES."""
  by_representative: Dict[str, List[ContentGroup]] = {}
  for representative, group in bucket[1]:
    by_representative.setdefault(representative, []).append(group)
  merged = []
  for representative in sorted(by_representative):
    groups = by_representative[representative]
    records = [record for group in groups for record in group.records]
    tags.records_per_key('GroupNearCopies').update(len(records))
    result, failed = _isolated(records, splitting.merge_near_copies, groups, drop)
    yield from failed
    if failed:
      continue
    group, dropped = result
    Metrics.counter(tags.NAMESPACE, 'near_copy_groups').inc()
    if drop:
      progress_counts.counts().rejected(len(dropped))
      yield from map(tags.rejected, dropped)
      yield beam.pvalue.TaggedOutput(tags.NEAR_COPIES, coders.PickledDict(
          splitting.near_group_entry(records, kept=group.records[0])))
    merged.append(group)
  yield bucket[0], merged


def unique_source_ids(steps: Any, batches: Any, key: str, row_name: repeated_rows.RowName) -> Dict[str, Any]:
  """Lists of records of which no two share the image/source_id a manifest gives them (under
  ``key``): the records that are given one meet by it, in a GroupByKey of them alone, and all
  but the first row's are rejected (repeated_rows). Returns the lists ('records'), and the
  rejections (REJECTED).

  Args:
    steps: the executor (steps.BeamSteps or InMemorySteps).
    batches: lists of validated records.
    key: the key of the source ids a manifest gives (schemas.source_id_key).
    row_name: how the manifest names its rows.
  """
  apart = steps.flat_map('GivenApart', batches, given_apart, key, outputs=(GIVEN,), main='batches')
  grouped = steps.group('GroupBySourceId', apart[GIVEN], output_type=Tuple[str, Iterable[CheckedImage]])
  first = steps.flat_map('FirstRow', grouped, first_row, key, row_name, outputs=(REJECTED,), main='records')
  rebatched = steps.batch('Rebatch', first['records'], _BATCH_SIZE, output_type=List[CheckedImage])
  records = steps.flatten('Together', apart['batches'], rebatched, output_type=List[CheckedImage])
  return {'records': records, REJECTED: first[REJECTED]}


GIVEN = 'given'  # given_apart's output of the records a manifest gives a source id


def given_apart(batch: List[CheckedImage], key: str) -> Iterator[Any]:
  """The batch's records without a given source id, as one list; the others keyed by theirs, tagged."""
  rest = []
  for record in batch:
    given = dict(record.extras).get(key)
    if given is None:
      rest.append(record)
    else:
      yield beam.pvalue.TaggedOutput(GIVEN, (given, record))
  if rest:
    yield rest


def first_row(keyed: Tuple[str, Iterable[CheckedImage]], key: str, row_name: repeated_rows.RowName) -> Iterator[Any]:
  """The first row's record of the records a manifest gives one source id; the others' rejections, tagged."""
  source_id, records = keyed
  for value in repeated_rows.first_of_one_source_id(records, source_id, key, row_name):
    if isinstance(value, Rejection):
      progress_counts.counts().rejected(1)
      yield tags.rejected(value)
    else:
      yield value


def bucket_offsets(steps: Any, buckets: Any, weights: Callable[[str, Any], Iterable[Tuple[Tuple[str, str], int]]]
                   ) -> Any:
  """Every (bucket, items) element's ((key, bucket), weight) pairs, summed up per key into
  (key, hash_order.KeyOffsets) for a side input looked up key by key (_PerKey); ``weights``
  is the plain function that weighs a bucket. A key holds one number per bucket of its own."""
  weighed = steps.flat_map('Weights', buckets, lambda bucket: weights(*bucket))
  by_key = steps.map('ByKey', weighed, lambda pair: (pair[0][0], (pair[0][1], pair[1])))
  summed = steps.combine_per_key('SumPerBucket', by_key, _BucketWeights())
  return steps.map('Offsets', summed, lambda pair: (pair[0], hash_order.key_offsets(pair[1])))


def _only(view: Mapping[Any, Iterable[Any]], key: Any) -> Any:
  """The one value of ``key`` in a multimap side input."""
  return next(iter(view[key]))


class _BucketWeights(beam.CombineFn):
  """One key's weight per bucket, from (bucket, weight) pairs."""

  def create_accumulator(self) -> Dict[str, int]:
    return {}

  def add_input(self, accumulator: Dict[str, int], pair: Tuple[str, int]) -> Dict[str, int]:
    bucket, weight = pair
    accumulator[bucket] = accumulator.get(bucket, 0) + weight
    return accumulator

  def merge_accumulators(self, accumulators: Iterable[Dict[str, int]]) -> Dict[str, int]:
    merged: Dict[str, int] = {}
    for accumulator in accumulators:
      for pair in accumulator.items():
        self.add_input(merged, pair)
    return merged

  def extract_output(self, accumulator: Dict[str, int]) -> Dict[str, int]:
    return accumulator


class _PerKey(collections.abc.Mapping):
  """A multimap side input of (key, KeyOffsets) as hash_order.Offsets. Beam's multimap is
  fetched key by key on Dataflow and FnApiRunner, where AsDict or AsSingleton would load
  every class's offsets on every worker."""

  def __init__(self, view: Mapping[str, Iterable[hash_order.KeyOffsets]]):
    self._view = view

  def __getitem__(self, key: str) -> hash_order.KeyOffsets:
    return _only(self._view, key)

  def __iter__(self) -> Iterator[str]:
    return iter(self._view)

  def __len__(self) -> int:
    return len(list(self._view))


class _KeptPerClass(collections.abc.Mapping):
  """A multimap side input of (class, (split, records)) as {class: {split: records}}, the records of
  a class and split summed (kept ones and given ones come apart), fetched class by class as _PerKey is."""

  def __init__(self, view: Mapping[str, Iterable[Tuple[str, int]]]):
    self._view = view

  def __getitem__(self, stratum: str) -> Dict[str, int]:
    counts: Dict[str, int] = collections.Counter()
    for split, records in self._view[stratum]:
      counts[split] += records
    return dict(counts)

  def __iter__(self) -> Iterator[str]:
    return iter(self._view)

  def __len__(self) -> int:
    return len(list(self._view))


def splits_assigned(steps: Any, buckets: Any, spec: SplitSpec, listed: Any,
                    records_per_bucket: int = hash_order.RECORDS_PER_BUCKET, kept: Any = None,
                    list_near: bool = False) -> Any:
  """(order bucket, records) with every record's split, from (content bucket, content groups).

  Every bucket reports its images per class first; with those totals each bucket assigns its
  own groups, so no worker holds a whole class. The records then go on by order bucket, for
  the shards ('records'). Also outputs, tagged, the label texts and, with ``list_near``, the
  near buckets' groups listed with their splits (tags.NEAR_COPIES).

  Args:
    steps: the executor (steps.BeamSteps or InMemorySteps).
    buckets: (content bucket, content groups) pairs.
    spec: the splits asked for, by name and fraction.
    listed: how many inputs were listed, a singleton side input: the order buckets are as wide as they need.
    records_per_bucket: about the most records one worker gathers in an order bucket.
    kept: an --incremental output's (class, (split, records)) (incremental.KeptCounts), which count in each class's
      fractions; None for a conversion of everything.
    list_near: near buckets' groups listed with their splits, tagged tags.NEAR_COPIES.
  """
  placed = steps.composite('Place', bucket_offsets, buckets, splitting.class_weights)
  if kept is not None:  # what the output holds, and the new records whose split is given
    given = steps.flat_map('GivenSplits', buckets, lambda bucket: splitting.given_weights(bucket[1]))
    summed = steps.combine_per_key('SumGiven', given, sum)
    by_class = steps.map('GivenByClass', summed, lambda pair: (pair[0][0], (pair[0][1], pair[1])))
    kept = steps.multimap(steps.flatten('KeptAndGiven', kept, by_class))
  return steps.flat_map('Assign', buckets, assign_splits, spec, steps.multimap(placed), listed, records_per_bucket,
                        kept, list_near, output_type=Tuple[str, List[CheckedImage]],
                        outputs=(tags.LABELS, tags.NEAR_COPIES), main='records')


def assign_splits(bucket: Tuple[str, List[ContentGroup]], spec: SplitSpec,
                  placed: Mapping[str, Iterable[hash_order.KeyOffsets]], listed: int,
                  records_per_bucket: int = hash_order.RECORDS_PER_BUCKET,
                  kept: Optional[Mapping[str, Iterable[Tuple[str, int]]]] = None, list_near: bool = False
                  ) -> Iterator[Any]:
  """One content bucket's records with their splits, by order bucket, then its label texts; with
  ``list_near``, a near bucket's groups as beam_pipeline.json lists them, tagged tags.NEAR_COPIES.

  Args:
    bucket: (content bucket, its content groups).
    spec: the splits asked for, by name and fraction.
    placed: every bucket's images per class (splitting.class_weights), a multimap side input of
      (class, hash_order.KeyOffsets).
    listed: how many inputs were listed: the order buckets are as wide as they need.
    records_per_bucket: about the most records one worker gathers in an order bucket.
    kept: an update's records per class and split, those it keeps and the new ones whose split is given, a
      multimap side input of (class, (split, records)); None for a conversion of everything.
    list_near: list a near bucket's groups.
  """
  records = list(splitting.assign_splits(bucket[0], bucket[1], spec, _PerKey(placed),
                                         _KeptPerClass(kept) if kept is not None else None))
  if list_near and splitting.is_near_bucket(bucket[0]):
    splits = {record.uri: record.split for record in records}
    for group in bucket[1]:
      yield beam.pvalue.TaggedOutput(tags.NEAR_COPIES, coders.PickledDict(splitting.near_group_entry(
          group.records, split=', '.join(sorted({splits[record.uri] for record in group.records})))))
  digits = hash_order.prefix_digits(listed, sharding.ORDER_BUCKET_DIGITS, records_per_bucket)
  yield from sharding.order_buckets(records, digits).items()
  texts = {record.label for record in records if record.label is not None}
  texts.update(label for record in records for label in record.labels)
  texts.update(obj.label for record in records for obj in record.objects)
  for text in sorted(texts):
    yield beam.pvalue.TaggedOutput(tags.LABELS, text)


def shards_planned(steps: Any, pairs: Any, target_bytes: int, sizes: sharding.RecordSizes = sharding.RecordSizes(),
                   numbering: Optional[Mapping[str, Any]] = None) -> Any:
  """One ShardPlan per shard, from (order bucket, records) pairs whose records have their splits.

  Every pair reports its bytes per split first; with those totals each order bucket, gathered
  from its pairs, places its own records, and the shards' GroupByKey spreads them over workers.

  Args:
    steps: the executor (steps.BeamSteps or InMemorySteps).
    pairs: (order bucket, records with their splits).
    target_bytes: the most bytes a shard is planned to hold, give or take a record (--target_shard_mb).
    sizes: how a record's size is estimated, and the most images a shard holds or the shards a split has.
    numbering: an --incremental output's incremental_update.Numbering per split; None otherwise.
  """
  placed = steps.composite('Place', bucket_offsets, pairs, functools.partial(sharding.split_bytes, sizes=sizes))
  by_order = steps.group('GroupByOrder', pairs, output_type=Tuple[str, Iterable[List[CheckedImage]]])
  shards = steps.flat_map('Assign', by_order, assign_shards, target_bytes, steps.multimap(placed), sizes,
                          output_type=Tuple[Tuple[str, int], List[CheckedImage]])
  # Gap-free numbers: which planned shards of each chunk hold records, and per split the
  # running totals over its chunks.
  by_chunk = steps.map('ByChunk', shards, lambda shard: (sharding.numbering_chunk(*shard[0]), shard[0][1]))
  in_use = steps.map('InUse', steps.group('GroupByChunk', by_chunk), lambda pair: (pair[0], sorted(set(pair[1]))))
  chunks = steps.composite('NumberChunks', bucket_offsets, in_use, sharding.chunk_weights)
  return steps.map('Plan', steps.group('GroupByShard', shards), plan_shard, steps.multimap(in_use),
                   steps.multimap(chunks), numbering, output_type=ShardPlan)


def assign_shards(bucket: Tuple[str, Iterable[List[CheckedImage]]], target_bytes: int,
                  placed: Mapping[str, Iterable[hash_order.KeyOffsets]], sizes: sharding.RecordSizes
                  ) -> Iterable[Tuple[Tuple[str, int], List[CheckedImage]]]:
  """One order bucket's records by (split, planned shard) (sharding.assign_shards).

  Args:
    bucket: (order bucket, lists of its records, each with its split), as GroupByOrder gathers them.
    target_bytes: the most bytes a shard is planned to hold, give or take a record (--target_shard_mb).
    placed: every order bucket's bytes per split (sharding.split_bytes), a multimap side input of
      (split, hash_order.KeyOffsets).
    sizes: how a record's size is estimated, and the most images a shard holds or the shards a split has.
  """
  records = list(itertools.chain.from_iterable(bucket[1]))
  tags.records_per_key('GroupByOrder').update(len(records))
  return sharding.assign_shards(bucket[0], records, target_bytes, _PerKey(placed), sizes).items()


def plan_shard(shard: Tuple[Tuple[str, int], Iterable[List[CheckedImage]]],
               in_use: Mapping[Tuple[str, str], Iterable[List[int]]],
               chunks: Mapping[str, Iterable[hash_order.KeyOffsets]], numbering: Optional[Mapping[str, Any]] = None
               ) -> ShardPlan:
  """One shard's plan (sharding.plan_shard), numbered without gaps among the shards that hold records.

  Args:
    shard: ((split, planned index), lists of its records), as GroupByShard gathers them.
    in_use: the planned indexes that hold records in each (split, numbering chunk), a multimap side input.
    chunks: each split's shards in use before each of its chunks, and in all (sharding.chunk_weights), a multimap
      side input of (split, hash_order.KeyOffsets).
    numbering: an --incremental output's incremental_update.Numbering per split (its names have no count); None
      otherwise.
  """
  (split, planned_index), batches = shard
  records = list(itertools.chain.from_iterable(batches))
  tags.records_per_key('GroupByShard').update(len(records))
  in_chunk = _only(in_use, sharding.numbering_chunk(split, planned_index))
  return sharding.plan_shard(split, sharding.number(planned_index, in_chunk, _only(chunks, split)), records, numbering)


class ClassLabels(beam.CombineFn):
  """The distinct label texts, as labels.txt lists them: in the order ``in_order`` gives them
  (labels.sorted_labels, or an update's labels.extended_labels). A set of them at a time: as
  many as the classes."""

  def __init__(self, in_order: Callable[[Iterable[str]], List[str]]):
    super().__init__()
    self._in_order = in_order

  def create_accumulator(self) -> set:
    return set()

  def add_input(self, accumulator: set, text: str) -> set:
    accumulator.add(text)
    return accumulator

  def merge_accumulators(self, accumulators: Iterable[set]) -> set:
    return set().union(*accumulators)

  def extract_output(self, accumulator: set) -> List[str]:
    return self._in_order(accumulator)


class _GroupEntries(beam.CombineFn):
  """Group entries summed up as beam_pipeline.json lists them: how many groups, how many of
  their files count (_COUNTED, _count), how many have conflicting labels, and the first
  MAX_LISTED_DUPLICATE_GROUPS entries (_first_entries), never more of them at once."""
  _LISTED = run_totals.MAX_LISTED_DUPLICATE_GROUPS
  _COUNTED = ''  # the key of the files' count

  @staticmethod
  def _count(entry: Dict[str, Any]) -> int:
    raise NotImplementedError

  def create_accumulator(self) -> Tuple[int, int, int, List[Dict[str, Any]]]:
    return 0, 0, 0, []

  def add_input(self, accumulator, entry: Dict[str, Any]):
    num_groups, counted, num_conflicts, listed = accumulator
    listed.append(entry)
    if len(listed) > 2 * self._LISTED:
      listed = _first_entries(listed, self._LISTED)
    return num_groups + 1, counted + self._count(entry), num_conflicts + bool(entry.get('label_conflict')), listed

  def merge_accumulators(self, accumulators):
    num_groups, counted, num_conflicts, listed = self.create_accumulator()
    for groups, more_counted, conflicts, more in accumulators:
      num_groups, counted, num_conflicts = num_groups + groups, counted + more_counted, num_conflicts + conflicts
      listed = _first_entries(listed + more, self._LISTED)
    return num_groups, counted, num_conflicts, listed

  def extract_output(self, accumulator) -> Any:
    """The summary, a coders.PickledDict: its entries list uris."""
    num_groups, counted, num_conflicts, listed = accumulator
    return coders.PickledDict({'num_groups': num_groups, self._COUNTED: counted,
                               'num_label_conflicts': num_conflicts, 'groups': _first_entries(listed, self._LISTED)})

  def get_accumulator_coder(self) -> beam.coders.Coder:
    """Pickled, as the summary is: the entries list uris, which Beam's coder of untyped values
    refuses where a name is not UTF-8."""
    return beam.coders.PickleCoder()


def _first_entries(entries: List[Dict[str, Any]], count: int) -> List[Dict[str, Any]]:
  """The first ``count`` group entries: those whose labels conflict first (a person must look at
  them; listed first, they are never among the ones left out), then by their files."""
  return sorted(entries, key=lambda entry: (not entry.get('label_conflict'), entry['images']))[:count]


class NearGroups(_GroupEntries):
  """Every group of near copies (splitting.near_group_entry), summed up with how many images
  they hold."""
  _COUNTED = 'num_images'

  @staticmethod
  def _count(entry: Dict[str, Any]) -> int:
    return len(entry['images'])


class DuplicateGroups(_GroupEntries):
  """Every group of identical files (splitting.duplicate_group_entry), summed up with how many
  extra copies they hold."""
  _COUNTED = 'num_extra_copies'

  @staticmethod
  def _count(entry: Dict[str, Any]) -> int:
    return len(entry['images']) - 1
