"""Planning, described once over either executor (steps.py): identical files grouped, near copies
found and merged, splits assigned and shards planned, bucket by bucket, on metadata only.

On Dataflow every step is a transform of the graph (Plan); on the DirectRunner the same steps
run on lists inside one step of the graph (PlanInMemory), which holds every element in one
process anyway and where each of the planner's sixteen or so stages would cost the launcher a
fixed amount of CPU.
"""
import contextlib
import gc
from typing import Any, Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple

import apache_beam as beam

from beam_pipeline.pipeline import coders, tags
from beam_pipeline.pipeline.planning import content_groups, near_copy_groups
from beam_pipeline.pipeline.planning.steps import InMemorySteps
from beam_pipeline.core.inputs import labels, repeated_rows
from beam_pipeline.core.messages import CheckedImage, ContentGroup
from beam_pipeline.core.planning import hash_order, sharding
from beam_pipeline.core.settings import Settings

# The tags of the in-memory step's outputs beside the plans: each one element but REJECTED's.
SUMMARIES = (tags.LABELS, tags.DUPLICATES, tags.NEAR_COPIES)


class PlanOptions(NamedTuple):
  """What planning takes beside the settings: how a manifest names its rows (None for other
  inputs) and the key of the source ids it gives (None: none given), the label texts' order, and
  an --incremental output's numbering (incremental_update.Numbering per split)."""
  row_name: Optional[repeated_rows.RowName] = None
  source_id_key: Optional[str] = None
  in_order: Callable[[Iterable[str]], List[str]] = labels.sorted_labels
  numbering: Optional[Any] = None


def plan(steps: Any, records: Any, num_listed: Any, settings: Settings, records_per_bucket: int,
         options: PlanOptions = PlanOptions(), kept: Any = None) -> Dict[str, Any]:
  """From lists of validated records to the plan of every shard: 'plans' (of ShardPlan),
  'labels' (the label texts in class order, a side input), 'rejected' (a list of collections
  of Rejection), 'duplicates' (the groups of identical files summed up, a side input) and
  'near_copies' (one element: the groups of near copies summed up with the distance and what
  the grouping left out; None under --near_copies=off). An update (``kept``) has neither
  summary: graph.build lists the whole dataset's groups instead of the increment's.

  Args:
    steps: the executor (steps.BeamSteps or InMemorySteps).
    records: lists of validated records.
    num_listed: one element: how many inputs were listed, which sets the buckets' width, the near-copy distance and
      the largest group.
    settings: the conversion's settings.
    records_per_bucket: about the most records one worker gathers in a bucket.
    options: what planning takes beside the settings.
    kept: an --incremental update's (class, (split, records)) of its kept records (incremental.KeptCounts), which
      count in each class's fractions; None otherwise.
  """
  listed = steps.singleton(num_listed)
  rejected = []
  # A manifest names each image once and gives each an image/source_id of its own: rows that
  # do not are rejected where their records meet, by a given id here, by content below.
  if options.row_name and options.source_id_key:
    unique = steps.composite('UniqueSourceIds', content_groups.unique_source_ids, records, options.source_id_key,
                             options.row_name)
    records = unique['records']
    rejected.append(unique[tags.REJECTED])
  # Keyed by the start of the content hash, so identical files meet in one bucket, form one
  # group and never straddle splits; near copies (their perceptual hashes close) meet theirs
  # in a bucket beside their group's first content hash, and form one group too.
  near, drop = settings.near_copies != 'off', settings.near_copies == 'drop'
  near_pairs = []
  if near:  # looked up by content bucket, so the records keep their GroupByKey
    found = steps.composite('FindNearCopies', near_copy_groups.find_near_copies, records, settings, num_listed,
                            records_per_bucket)
    near_pairs.append(steps.multimap(found['pairs']))
  buckets = steps.flat_map('BucketByContent', records, content_groups.bucket_by_content, listed, records_per_bucket,
                           output_type=Tuple[str, List[CheckedImage]])
  grouped = steps.flat_map('GroupCopies', steps.group('GroupByContent', buckets),
                           content_groups.GroupCopies(settings.dedupe, options.row_name), *near_pairs,
                           output_type=Tuple[str, List[ContentGroup]],
                           outputs=(tags.REJECTED, tags.DUPLICATES, tags.NEAR_COPIES), main='groups')
  groups = grouped['groups']
  rejected.append(grouped[tags.REJECTED])
  if near:
    merged = steps.flat_map('MergeNearCopies', steps.group('GroupNearCopies', grouped[tags.NEAR_COPIES]),
                            content_groups.merge_near_copies, drop, output_type=Tuple[str, List[ContentGroup]],
                            outputs=(tags.REJECTED, tags.NEAR_COPIES), main='groups')
    groups = steps.flatten('AllGroups', groups, merged['groups'])
    rejected.append(merged[tags.REJECTED])
  # Splits follow the content hash, class by class; each content bucket places its own
  # records, then hands them on by their shard order key, which is independent of the split.
  assigned = steps.composite('AssignSplits', content_groups.splits_assigned, groups, settings.splits, listed,
                             records_per_bucket, kept, near and not drop)
  plans = steps.composite('PlanShards', content_groups.shards_planned, assigned['records'],
                          settings.target_shard_bytes, sharding.record_sizes(settings), options.numbering)
  class_labels = steps.summed_up('AllLabels', assigned[tags.LABELS], content_groups.ClassLabels(options.in_order))
  planned = {'plans': plans, 'labels': class_labels, 'rejected': rejected, 'duplicates': None, 'near_copies': None}
  if kept is not None:
    return planned
  planned['duplicates'] = steps.summed_up('SumUpDuplicates', grouped[tags.DUPLICATES], content_groups.DuplicateGroups())
  if near:
    entries = steps.flatten('AllNearCopies', merged[tags.NEAR_COPIES], assigned[tags.NEAR_COPIES])
    planned['near_copies'] = steps.map('NearCopiesFound', found['found'], _with_groups,
                                       steps.summed_up('SumUpNearCopies', entries, content_groups.NearGroups()))
  return planned


def _with_groups(summary: Dict[str, Any], groups: Dict[str, Any]) -> Any:
  """The near-copy summary with its groups, a coders.PickledDict: the groups list uris."""
  return coders.PickledDict({**groups, **summary})


def in_memory(batches: Iterable[List[CheckedImage]], listed: int, settings: Settings,
              records_per_bucket: int = hash_order.RECORDS_PER_BUCKET, options: PlanOptions = PlanOptions(),
              kept: Optional[Iterable[Tuple[str, Tuple[str, int]]]] = None) -> Dict[Optional[str], List[Any]]:
  """plan's outputs on InMemorySteps, by tag as PlanInMemory's step outputs them (None: the
  ShardPlans; each summary a list of its one value).

  Args:
    batches: every list of validated records.
    listed: how many inputs were listed.
    settings: the conversion's settings.
    records_per_bucket: about the most records a bucket holds.
    options: what planning takes beside the settings.
    kept: an --incremental update's (class, (split, records)) of its kept records; None otherwise.
  """
  planned = plan(InMemorySteps(), list(batches), [listed], settings, records_per_bucket, options,
                 list(kept) if kept is not None else None)
  outputs: Dict[Optional[str], List[Any]] = {None: planned['plans'], tags.LABELS: [planned['labels']],
                                             tags.REJECTED: [value for values in planned['rejected']
                                                             for value in values]}
  if planned['duplicates'] is not None:
    outputs[tags.DUPLICATES] = [planned['duplicates']]
  if planned['near_copies'] is not None:
    outputs[tags.NEAR_COPIES] = planned['near_copies']
  return outputs


class PlanInMemory(beam.PTransform):
  """plan on InMemorySteps, in one step that reads every record as a side input: the ShardPlans,
  and tagged, one element each, tags.LABELS, tags.DUPLICATES and tags.NEAR_COPIES (as plan
  returns them), and the rejections (tags.REJECTED)."""

  def __init__(self, settings: Settings, num_listed: beam.PCollection, records_per_bucket: int, options: PlanOptions,
               kept: Optional[beam.PCollection] = None):
    """A step of one element that plans every record.

    Args:
      settings: the conversion's settings.
      num_listed: one element: how many inputs were listed.
      records_per_bucket: about the most records a bucket holds, as on Dataflow.
      options: what planning takes beside the settings.
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


def _planned(_, *arguments: Any) -> Iterator[Any]:
  """in_memory(*arguments)'s outputs as the step's: the ShardPlans, and the others tagged. The
  step's one element only starts it; the records come as a side input."""
  with _uncollected():
    outputs = in_memory(*arguments)
  yield from outputs.pop(None)
  for tag, values in outputs.items():
    for value in values:
      yield beam.pvalue.TaggedOutput(tag, value)


@contextlib.contextmanager
def _uncollected() -> Iterator[None]:
  """Planning in memory without the garbage collector: it makes a few objects a record, in lists
  and tuples that hold no reference cycles, and each full collection they set off would rescan
  every record the in-process runner holds, about as long as the planning itself
  (benchmarks/README.md, Where the time goes)."""
  enabled = gc.isenabled()
  gc.disable()
  try:
    yield
  finally:
    if enabled:
      gc.enable()
