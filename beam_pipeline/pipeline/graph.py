"""The conversion pipeline, top to bottom as the data flows."""
import functools
from typing import List, NamedTuple, Optional, Tuple

import apache_beam as beam
from apache_beam.pvalue import AsList, AsSingleton

from beam_pipeline.pipeline import coders, earlier_copies, incremental, local_runner
from beam_pipeline.pipeline.output import lookup_files, output_dir
from beam_pipeline.pipeline.listing import annotation_inputs
from beam_pipeline.pipeline.output.commit import SumShardReports, commit
from beam_pipeline.pipeline.output.errors_files import RejectionCounts, WriteErrors, counted_rejection
from beam_pipeline.pipeline.planning import planner
from beam_pipeline.pipeline.planning.planner import PlanInMemory, PlanOptions
from beam_pipeline.pipeline.planning.steps import BeamSteps
from beam_pipeline.pipeline.listing.parts import batches_counted, parts_counted
from beam_pipeline.pipeline.planning.content_groups import DuplicateGroups
from beam_pipeline.pipeline.pooled_steps import ValidateImages, WriteOutputs, transform_graph
from beam_pipeline.pipeline.tags import CATALOGUED, DUPLICATES, LABELS, NEAR_COPIES, REJECTED, TRANSFORM_WRITTEN
from beam_pipeline.core import schemas
from beam_pipeline.core.inputs import labels, manifest_rows
from beam_pipeline.core.output import incremental_update
from beam_pipeline.core.planning import hash_order
from beam_pipeline.core.messages import CheckedImage, InputItem, OutputUnit
from beam_pipeline.core.settings import Settings


def build(pipeline: beam.Pipeline, settings: Settings, runner: str, pooled: bool = False,
          records_per_bucket: int = hash_order.RECORDS_PER_BUCKET,
          decision: incremental_update.Decision = incremental_update.Decision()) -> None:
  """The conversion's graph.

  Args:
    pipeline: the pipeline the conversion's steps are added to.
    settings: the conversion's settings.
    runner: the runner's name: a DirectRunner plans in memory (plan's ``one_machine``), and beam_pipeline.json
      records it.
    pooled: the heavy steps use the local worker pool of this process (the launcher of a DirectRunner run started
      one).
    records_per_bucket: about the most records a worker gathers in one planning bucket (plan).
    decision: the earlier dataset an --incremental run updates, if any.
  """
  coders.register()  # the element types declared below travel with compact coders, not per-record pickles
  # Only the input's pattern or manifest path enters the graph. Workers list it in parts
  # (subfolders, byte ranges of a manifest), in batches, which keeps per-element overhead
  # low and fans out well after the shuffle (spread).
  parts = pipeline | 'Input' >> beam.Create([settings.input]) | 'Parts' >> beam.FlatMap(parts_counted)
  listed = (spread(parts, 'SpreadParts', pooled)
            | 'List' >> beam.FlatMap(batches_counted, settings.output, settings.incremental, settings.run_id)
            .with_output_types(List[InputItem]).with_outputs(REJECTED, main='batches'))
  batches = spread(listed.batches, 'Distribute', pooled)
  annotation_rejections = []
  if settings.annotations:  # each image meets its annotation by uri
    batches, rejected = annotation_inputs.annotated(pipeline, batches, settings)
    annotation_rejections.append(rejected)
  num_listed = listed.batches | 'Sizes' >> beam.Map(len) | 'CountListed' >> beam.CombineGlobally(sum)
  listing = None
  if settings.incremental:  # what each record is made from, for the catalog; the listing's digest
    batches = batches | 'RecordFingerprints' >> beam.Map(incremental.with_record_fingerprints)
    listing = summed_up((batches, listed[REJECTED]) | 'ListingAndTurnedAway' >> beam.Flatten(), 'DigestListing',
                        incremental.ListingDigest())
  changes = None
  if decision.updates:  # only new and changed files go on, found against the record of the dataset updated
    earlier = (pipeline | 'Output' >> beam.Create([settings.output])
               | 'EarlierRecord' >> beam.Map(output_dir.earlier_record))
    changes = batches | 'FindChanges' >> incremental.FindChanges(settings.output, earlier, decision,
                                                                  settings.max_file_bytes)
    batches = changes.todo
  else:
    earlier = None

  # Only metadata goes on, in batches: Beam's cost per element exceeds a record's own.
  checked = batches | 'Validate' >> beam.ParDo(ValidateImages(settings, pooled)).with_output_types(
      List[CheckedImage]).with_outputs(REJECTED, main='records')
  records, earlier_rejections = checked.records, []
  one_machine = runner.lower() in local_runner.DIRECT_RUNNERS
  if changes:  # a new copy of a picture the dataset holds, or a near copy of one, goes to its split
    catalog = earlier_copies.Catalog.of(settings.output, earlier, decision.lookup_count, changes)
    near = (records | 'NearEarlierCopies' >> earlier_copies.NearEarlierCopies(
        catalog, num_listed, settings, earlier_copies.grouped_in_memory(one_machine, decision),
        decision.near_index_distance, one_machine)
            if settings.near_copies != 'off' else None)
    placed = records | 'EarlierCopies' >> earlier_copies.EarlierCopies(catalog, settings.dedupe,
                                                                       near and near['near'],
                                                                       drop_near=settings.near_copies == 'drop')
    records, earlier_rejections = placed['records'], [placed[REJECTED], changes.carried]
  planned = plan(records, num_listed, settings, records_per_bucket, decision, changes, one_machine)
  if changes:  # the groups of copies and near copies of the whole dataset, not of the increment planned
    planned = planned._replace(
        duplicates=summed_up(placed[DUPLICATES], 'SumUpDatasetDuplicates', DuplicateGroups()),
        near_copies=near and pipeline | 'NearGroupsOfDataset' >> earlier_copies.NearGroupsOfDataset(
            near, planned.plans, drop=settings.near_copies == 'drop', dedupe=settings.dedupe))

  # Each planned shard is written whole by one worker, and the tf.Transform graph (its
  # vocabulary is labels.txt) beside them.
  graph = pipeline | 'TransformGraph' >> beam.Create(transform_graph(settings)).with_output_types(OutputUnit)
  rewrites = [changes.rewrites] if changes else []  # shards that lost records, written again
  # A run whose checks already rejected too many images stops before it writes (an update's
  # budget counts the dataset it keeps, so only its commit can tell).
  budget = {} if decision.updates else dict(
      checked=summed_up((listed[REJECTED] | 'AsListed' >> beam.Map(counted_rejection, True),
                         (*annotation_rejections, checked[REJECTED]) | 'Checked' >> beam.Flatten()
                         | 'AsChecked' >> beam.Map(counted_rejection, False))
                        | 'CheckedRejections' >> beam.Flatten(), 'CountChecked', RejectionCounts()),
      num_listed=AsSingleton(num_listed))
  written = ((planned.plans, graph, *rewrites)
             | 'OutputUnits' >> beam.Flatten().with_output_types(OutputUnit)
             | 'Write' >> beam.ParDo(WriteOutputs(settings, pooled), class_names=planned.labels, **budget
                                    ).with_outputs(REJECTED, TRANSFORM_WRITTEN, CATALOGUED, main='shards'))
  lookups = {}
  if settings.incremental:  # the catalog's lookups: the files the run changed written again
    found = written[CATALOGUED] | 'WriteLookups' >> lookup_files.WriteLookups(settings, decision, num_listed,
                                                                             earlier, changes)
    lookups = dict(lookup_count=AsSingleton(found['count']), lookup_files=AsList(found['by_uri']),
                   content_lookup_files=AsList(found['by_content']))
    if changes and near and near['index'] is not None:  # the near-copy index, kept or built on workers
      lookups['near_index'] = AsSingleton(near['index'])

  # What beam_pipeline.json reports, each summed up as it comes: no step holds every shard's
  # report, every rejection or every group of copies at once.
  totals = summed_up(written.shards, 'SumUpShards', SumShardReports())
  errors = ((listed[REJECTED], *annotation_rejections, checked[REJECTED], *earlier_rejections, *planned.rejected,
             written[REJECTED])
            | 'AllRejections' >> beam.Flatten()
            | 'WriteErrors' >> WriteErrors(settings.output, settings.run_id))

  # Side inputs make the commit wait for every shard and errors file.
  _ = (pipeline
       | 'Start commit' >> beam.Create([None])
       | 'Commit' >> beam.Map(commit, written=totals, labels_list=planned.labels,
                              errors=AsSingleton(errors), duplicates=planned.duplicates,
                              near_copies=AsSingleton(planned.near_copies) if planned.near_copies is not None else None,
                              transform_written=AsList(written[TRANSFORM_WRITTEN]), settings=settings,
                              runner=runner, changes=AsSingleton(changes.counts, default_value={}) if changes else {},
                              decision=decision,
                              earlier=AsSingleton(earlier) if earlier is not None else None, listing=listing,
                              **lookups))


def spread(pcoll: beam.PCollection, label: str, pooled: bool) -> beam.PCollection:
  """``pcoll`` handed out among the workers by a Reshuffle, unless the run's heavy steps go to this
  process's worker pool (``pooled``): there one process runs every step but the pool's, so the
  shuffle would spread nothing, and it costs a stage of its own, whatever the input
  (benchmarks/README.md, What the whole conversion costs), and keeps the first image from
  being checked until the whole input is listed."""
  return pcoll if pooled else pcoll | label >> beam.Reshuffle()


def summed_up(pcoll: beam.PCollection, label: str, combine_fn: beam.CombineFn) -> AsSingleton:
  """``combine_fn``'s one value of all of ``pcoll``, as a side input (BeamSteps.summed_up)."""
  return BeamSteps(pcoll.pipeline).summed_up(label, pcoll, combine_fn)


class Planned(NamedTuple):
  plans: beam.PCollection  # of ShardPlan
  labels: AsSingleton  # the label texts in class order, labels.txt's lines
  # Of Rejection: copies --dedupe dropped, groups that failed, a manifest's repeated rows; flattened
  # with the run's other rejections at once, as a flatten of its own is a stage of its own.
  rejected: Tuple[beam.PCollection, ...]
  # The groups of identical files, summed up (DuplicateGroups); None in an update, which sums up the dataset's.
  duplicates: Optional[AsSingleton]
  # One element: the groups of near copies, summed up (NearGroups) with the distance and what the
  # grouping left out (near_copy_groups.find_near_copies); None under --near_copies=off, and in an update.
  near_copies: Optional[beam.PCollection]


def plan(records: beam.PCollection, num_listed: beam.PCollection, settings: Settings,
         records_per_bucket: int = hash_order.RECORDS_PER_BUCKET,
         decision: incremental_update.Decision = incremental_update.Decision(),
         changes: Optional[incremental.Changes] = None, one_machine: bool = False) -> Planned:
  """From lists of validated records to the plan of every shard, on metadata only.

  Planning's buckets are as wide as the listed inputs need, so that no worker gathers more than
  about ``records_per_bucket`` records (hash_order.prefix_digits); the plans do not depend on the
  width. An --incremental run's new records keep each class's splits in their fractions, count
  after the earlier shards and add their classes after the earlier ones.

  Args:
    records: lists of validated records, those to plan.
    num_listed: one element: how many inputs were listed, which sets the buckets' width.
    settings: the conversion's settings.
    records_per_bucket: about the most records one worker gathers in a bucket.
    decision: the earlier dataset an update adds to: its classes come first, and new shards are numbered after its own.
    changes: an update's Changes of that dataset (incremental.FindChanges), whose kept records count in the
      fractions; None for a conversion of everything.
    one_machine: the runner holds every element in one process (the DirectRunner's): planning's steps run on lists,
      in one step of the graph (planner.PlanInMemory), instead of each as a transform of it.
  """
  row_name = manifest_rows.row_names(settings.input)
  source_id_key = schemas.source_id_key(settings.schema)
  in_order = (functools.partial(labels.extended_labels, list(decision.labels)) if decision.updates
              else labels.sorted_labels)  # an update's new classes come after the earlier ones
  numbering = decision.numbered if settings.incremental else None  # an --incremental output's names have no count
  kept = changes.kept | 'KeptCounts' >> incremental.KeptCounts() if changes else None
  options = PlanOptions(row_name, source_id_key, in_order, numbering)
  if one_machine:
    planned = records | 'PlanInMemory' >> PlanInMemory(settings, num_listed, records_per_bucket, options, kept)
    near = planned[NEAR_COPIES] if settings.near_copies != 'off' and not changes else None
    return Planned(planned.plans, AsSingleton(planned[LABELS]), (planned[REJECTED],),
                   None if changes else AsSingleton(planned[DUPLICATES]), near)
  planned = planner.plan(BeamSteps(records.pipeline), records, num_listed, settings, records_per_bucket, options, kept)
  return Planned(planned['plans'], planned['labels'], tuple(planned['rejected']), planned['duplicates'],
                 planned['near_copies'])
