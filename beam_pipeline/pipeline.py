"""The conversion pipeline, top to bottom as the data flows."""
import apache_beam as beam
from apache_beam.pvalue import AsList, AsSingleton

from beam_pipeline import inputs, labels, output_dir, sharding
from beam_pipeline.options import Settings
from beam_pipeline.transforms import (DUPLICATES, LABELS, REJECTED, TRAINING_CLASS_NAMES, GroupCopies,
                                      ValidateImages, WriteShard, assign_splits, commit, write_errors)


def build(pipeline: beam.Pipeline, settings: Settings, runner: str) -> None:
  # Only the input's pattern or manifest path enters the graph; listing runs on a worker,
  # in batches, which keeps per-element overhead low and fans out well after the shuffle.
  batches = (pipeline
             | 'Input' >> beam.Create([settings.input])
             | 'List' >> beam.FlatMap(inputs.list_input_batches)
             | 'Distribute' >> beam.Reshuffle())

  # Keyed by content hash: identical files form one group and never straddle splits.
  checked = batches | 'Validate' >> beam.ParDo(ValidateImages(settings)).with_outputs(REJECTED, main='images')
  grouped = (checked.images
             | 'GroupByContent' >> beam.GroupByKey()
             | 'GroupCopies' >> beam.ParDo(GroupCopies(settings.dedupe)).with_outputs(
                 REJECTED, DUPLICATES, main='groups'))
  assigned = (grouped.groups
              | 'GroupByClass' >> beam.GroupByKey()
              | 'AssignSplits' >> beam.FlatMap(assign_splits, settings.splits).with_outputs(
                  LABELS, TRAINING_CLASS_NAMES, main='records'))
  records = assigned.records

  class_labels = (assigned[LABELS]
                  | 'UniqueLabels' >> beam.Distinct()
                  | 'AllLabels' >> beam.combiners.ToList()
                  | 'SortLabels' >> beam.Map(labels.sorted_labels))

  # Plan on metadata, then fan the shards out: each is written whole by one worker.
  plans = (records
           | 'GroupBySplit' >> beam.GroupByKey()
           | 'PlanShards' >> beam.FlatMap(
               lambda split: sharding.plan_shards(*split, target_bytes=settings.target_shard_bytes))
           | 'SpreadShards' >> beam.Reshuffle())

  written = plans | 'WriteShards' >> beam.ParDo(
      WriteShard(settings), labels=AsSingleton(class_labels)).with_outputs(REJECTED, main='shards')

  # tf.Transform analyzes the training split's distinct class names only; no image bytes.
  if settings.skip_transform:
    transform_written = pipeline | 'NoTransform' >> beam.Create([])
  else:
    from beam_pipeline.transform import WriteTransform  # imports tensorflow_transform only when used
    transform_written = (assigned[TRAINING_CLASS_NAMES]
                         | 'DistinctClassNames' >> beam.Distinct()
                         | 'WriteTransform' >> WriteTransform(
                             settings.output, output_dir.temp_path(settings.output, 'tft'), settings.image_size))

  errors_by_reason = ((checked[REJECTED], grouped[REJECTED], written[REJECTED])
                      | 'AllRejections' >> beam.Flatten()
                      | 'CollectRejections' >> beam.combiners.ToList()
                      | 'WriteErrors' >> beam.Map(write_errors, settings.output))

  # Side inputs make the commit wait for every shard and the errors file.
  _ = (pipeline
       | 'Start commit' >> beam.Create([None])
       | 'Commit' >> beam.Map(commit, shards=AsList(written.shards), labels_list=AsSingleton(class_labels),
                              errors_by_reason=AsSingleton(errors_by_reason),
                              duplicates=AsList(grouped[DUPLICATES]),
                              transform_written=AsList(transform_written), settings=settings,
                              runner=runner))
