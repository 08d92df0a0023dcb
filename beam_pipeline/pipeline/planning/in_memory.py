"""Planning in one step, in memory, for a runner that holds every element in one process (the
DirectRunner): the plans graph.plan makes bucket by bucket, made by the same functions on the
same buckets, with Python's dicts where the Beam planner has its shuffles and side inputs.

On the DirectRunner every fused stage costs the launcher a fixed amount of CPU whatever the
input (benchmarks/README.md, What the whole conversion costs), and the Beam planner's shuffles
are some sixteen stages; there they spread nothing, the runner itself holding every element of
a shuffle in memory. Dataflow keeps the Beam planner; tests/pipeline/test_in_memory.py
holds the two to the same plans.
"""
import collections
import itertools
from typing import Any, Callable, DefaultDict, Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple

import apache_beam as beam

from beam_pipeline.pipeline import tags
from beam_pipeline.pipeline.planning import content_groups, near_copy_groups
from beam_pipeline.core.images import perceptual_hash
from beam_pipeline.core.inputs import labels, repeated_rows
from beam_pipeline.core.planning import hash_order, near_copies, sharding, splitting
from beam_pipeline.core.messages import CheckedImage, ShardPlan
from beam_pipeline.core.settings import Settings

# The tags of the step's outputs beside the plans: each one element but REJECTED's.
SUMMARIES = (tags.LABELS, tags.DUPLICATES, tags.NEAR_COPIES)


class PlanOptions(NamedTuple):
  """What graph.plan takes beside the settings: how a manifest names its rows (None for other
  inputs) and the key of the source ids it gives (None: none given), the label texts' order, and
  an --incremental output's numbering (incremental_update.Numbering per split)."""
  row_name: Optional[repeated_rows.RowName] = None
  source_id_key: Optional[str] = None
  in_order: Callable[[Iterable[str]], List[str]] = labels.sorted_labels
  numbering: Optional[Any] = None


class PlanInMemory(beam.PTransform):
  """Lists of validated records to ShardPlans, and tagged, one element each: the label texts in
  class order (tags.LABELS), the identical files summed up (tags.DUPLICATES), the near copies
  summed up with the distance and what the grouping left out (tags.NEAR_COPIES, unless
  --near_copies=off), these two not in an update (``kept``), which lists the whole dataset's;
  and the rejections (tags.REJECTED)."""

  def __init__(self, settings: Settings, num_listed: beam.PCollection, records_per_bucket: int, options: PlanOptions,
               kept: Optional[beam.PCollection] = None):
    """A step of one element that reads every record as a side input and plans them all.

    Args:
      settings: the conversion's settings.
      num_listed: one element: how many inputs were listed.
      records_per_bucket: about the most records a bucket holds, as in the Beam planner.
      options: what graph.plan takes beside the settings.
      kept: an --incremental update's (class, (split, records)) of its kept records (incremental.KeptCounts); None
        otherwise.
    """
    super().__init__()
    self._settings = settings
    self._num_listed = num_listed
    self._records_per_bucket = records_per_bucket
    self._options = options
    self._kept = kept

  def expand(self, records):
    kept = beam.pvalue.AsList(self._kept) if self._kept is not None else None
    return (records.pipeline
            | 'Once' >> beam.Create([None])
            | 'Plan' >> beam.FlatMap(_planned, beam.pvalue.AsList(records), beam.pvalue.AsSingleton(self._num_listed),
                                     self._settings, self._records_per_bucket, self._options, kept
                                     ).with_outputs(tags.REJECTED, *SUMMARIES, main='plans'))


def _planned(_, batches: Iterable[List[CheckedImage]], listed: int, settings: Settings, records_per_bucket: int,
             options: PlanOptions, kept: Optional[Iterable[Tuple[str, Tuple[str, int]]]]) -> Iterator[Any]:
  """plan's outputs as the step's: the ShardPlans, and the others tagged.

  Args:
    _: the one element that starts the step; the records come as a side input.
    batches: every list of validated records.
    listed: how many inputs were listed.
    settings: the conversion's settings.
    records_per_bucket: about the most records a bucket holds, as in the Beam planner.
    options: what graph.plan takes beside the settings.
    kept: an --incremental update's (class, (split, records)) of its kept records; None otherwise.
  """
  outputs = plan(batches, listed, settings, records_per_bucket, options, kept)
  yield from outputs.pop(None, [])
  for tag, values in outputs.items():
    for value in values:
      yield beam.pvalue.TaggedOutput(tag, value)


def plan(batches: Iterable[List[CheckedImage]], listed: int, settings: Settings, records_per_bucket: int,
         options: PlanOptions = PlanOptions(), kept: Optional[Iterable[Tuple[str, Tuple[str, int]]]] = None
         ) -> Dict[Optional[str], List[Any]]:
  """graph.plan's outputs by tag (None: the ShardPlans), from every batch of validated records:
  the steps of the Beam planner one after the other, each over every bucket.

  Args:
    batches: every list of validated records.
    listed: how many inputs were listed, which sets the buckets' width, the near-copy distance and the largest
      group.
    settings: the conversion's settings.
    records_per_bucket: about the most records a bucket holds, as in the Beam planner.
    options: what graph.plan takes beside the settings.
    kept: an --incremental update's (class, (split, records)) of its kept records (incremental.KeptCounts), which
      count in each class's fractions; None otherwise.
  """
  outputs: DefaultDict[Optional[str], List[Any]] = collections.defaultdict(list)
  batches = list(batches)
  if options.row_name and options.source_id_key:  # UniqueSourceIds
    apart = _by_tag(itertools.chain.from_iterable(
        content_groups.given_apart(batch, options.source_id_key) for batch in batches))
    first = _by_tag(itertools.chain.from_iterable(
        content_groups.first_row(given, options.source_id_key, options.row_name)
        for given in sorted(_grouped(apart.pop(content_groups.GIVEN, [])).items())))
    batches = apart.pop(None, []) + [first.pop(None, [])]
    outputs[tags.REJECTED] += first.pop(tags.REJECTED, [])
  near, drop = settings.near_copies != 'off', settings.near_copies == 'drop'
  representatives: Dict[str, List[Tuple[str, str]]] = collections.defaultdict(list)
  if near:  # FindNearCopies on one machine
    distance = settings.near_distance or near_copies.distance_for(listed, perceptual_hash.NEAR_DISTANCE)
    cap = near_copies.group_cap(listed, min(settings.splits.fractions))
    pairs, summary = near_copies.groups_on_one_machine(
        itertools.chain.from_iterable(map(content_groups.perceptual_hashes, batches)), distance, cap)
    for pair in pairs:
      bucket, pair = content_groups.near_pair_bucket(pair, listed, records_per_bucket)
      representatives[bucket].append(pair)
    found = near_copy_groups.left_out(summary, distance, cap)
  # BucketByContent, GroupByContent, GroupCopies
  content: DefaultDict[str, List[List[CheckedImage]]] = collections.defaultdict(list)
  for batch in batches:
    for bucket, records in content_groups.bucket_by_content(batch, listed, records_per_bucket):
      content[bucket].append(records)
  copies = content_groups.GroupCopies(settings.dedupe, options.row_name)
  grouped = _by_tag(itertools.chain.from_iterable(
      copies.process(bucket, representatives if near else None) for bucket in sorted(content.items())))
  groups = grouped.pop(None, [])
  outputs[tags.REJECTED] += grouped.pop(tags.REJECTED, [])
  near_entries = []
  if near:  # GroupNearCopies, MergeNearCopies
    near_buckets = _grouped(grouped.pop(tags.NEAR_COPIES, []))
    merged = _by_tag(itertools.chain.from_iterable(
        content_groups.merge_near_copies(bucket, drop) for bucket in sorted(near_buckets.items())))
    groups += merged.pop(None, [])
    outputs[tags.REJECTED] += merged.pop(tags.REJECTED, [])
    near_entries += merged.pop(tags.NEAR_COPIES, [])
  # AssignSplits
  placed = _offsets(itertools.chain.from_iterable(splitting.class_weights(*bucket) for bucket in groups))
  if kept is not None:  # what the output holds, and the new records whose split is given
    given = collections.Counter()
    for _, bucket in groups:
      for key, count in splitting.given_weights(bucket):
        given[key] += count
    kept = _grouped(itertools.chain(kept, ((stratum, (split, count)) for (stratum, split), count in given.items())))
  assigned = _by_tag(itertools.chain.from_iterable(
      content_groups.assign_splits(bucket, settings.splits, placed, listed, records_per_bucket, kept, near and not drop)
      for bucket in groups))
  near_entries += assigned.pop(tags.NEAR_COPIES, [])
  outputs[tags.LABELS].append(content_groups.ClassLabels(options.in_order).apply(assigned.pop(tags.LABELS, [])))
  # PlanShards
  outputs[None] = _shards(assigned.pop(None, []), settings.target_shard_bytes, sharding.record_sizes(settings),
                          options.numbering)
  if kept is not None:  # an update lists the whole dataset's groups (graph.build), not the increment's
    return outputs
  outputs[tags.DUPLICATES].append(content_groups.DuplicateGroups().apply(grouped.pop(tags.DUPLICATES, [])))
  if near:
    outputs[tags.NEAR_COPIES].append({**content_groups.NearGroups().apply(near_entries), **found})
  return outputs


def _shards(pairs: List[Tuple[str, List[CheckedImage]]], target_bytes: int, sizes: sharding.RecordSizes,
            numbering: Optional[Any]) -> List[ShardPlan]:
  """PlanShards on (order bucket, records) pairs.

  Args:
    pairs: (order bucket, records with their splits), as AssignSplits outputs them.
    target_bytes: the most bytes a shard is planned to hold, give or take a record (--target_shard_mb).
    sizes: how a record's size is estimated, and the most images a shard holds or the shards a split has.
    numbering: an --incremental output's incremental_update.Numbering per split; None otherwise.
  """
  placed = _offsets(itertools.chain.from_iterable(
      sharding.split_bytes(bucket, records, sizes=sizes) for bucket, records in pairs))
  shards = list(itertools.chain.from_iterable(
      content_groups.assign_shards(bucket, target_bytes, placed, sizes) for bucket in sorted(_grouped(pairs).items())))
  indexes = _grouped((sharding.numbering_chunk(*shard), shard[1]) for shard, _ in shards)
  in_use = {chunk: [sorted(set(planned))] for chunk, planned in indexes.items()}
  chunks = _offsets(itertools.chain.from_iterable(
      sharding.chunk_weights(chunk, planned[0]) for chunk, planned in in_use.items()))
  return [content_groups.plan_shard(shard, in_use, chunks, numbering) for shard in sorted(_grouped(shards).items())]


def _by_tag(values: Iterable[Any]) -> DefaultDict[Optional[str], List[Any]]:
  """A step's outputs by tag, None for its main output's."""
  by_tag: DefaultDict[Optional[str], List[Any]] = collections.defaultdict(list)
  for value in values:
    if isinstance(value, beam.pvalue.TaggedOutput):
      by_tag[value.tag].append(value.value)
    else:
      by_tag[None].append(value)
  return by_tag


def _grouped(pairs: Iterable[Tuple[Any, Any]]) -> Dict[Any, List[Any]]:
  """A GroupByKey's (key, values), as a dict whose missing keys have no values, as a multimap
  side input's."""
  grouped: DefaultDict[Any, List[Any]] = collections.defaultdict(list)
  for key, value in pairs:
    grouped[key].append(value)
  return grouped


def _offsets(weights: Iterable[Tuple[Tuple[str, str], int]]) -> Dict[str, List[hash_order.KeyOffsets]]:
  """content_groups._BucketOffsets's multimap, {key: [offsets]}, from ((key, bucket), weight) pairs."""
  return {key: [placed] for key, placed in hash_order.offsets(weights).items()}
