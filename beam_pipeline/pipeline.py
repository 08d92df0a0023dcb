"""The conversion pipeline, top to bottom as the data flows."""
from typing import List, Tuple

import apache_beam as beam
from apache_beam.pvalue import AsList, AsSingleton

from beam_pipeline import coders, labels, output_dir, splitting
from beam_pipeline.inputs import InputItem
from beam_pipeline.options import Settings
from beam_pipeline.records import ImageRecord
from beam_pipeline.splitting import ContentGroup
from beam_pipeline.transforms import (DUPLICATES, LABELS, REJECTED, TRAINING_CLASS_NAMES, AssignSplits, GroupCopies,
                                      PlanShards, ValidateImages, WriteShard, commit, list_input, write_errors)


def build(pipeline: beam.Pipeline, settings: Settings, runner: str) -> None:
  coders.register()  # the element types declared below travel with compact coders, not per-record pickles
  # Only the input's pattern or manifest path enters the graph; listing runs on a worker,
  # in batches, which keeps per-element overhead low and fans out well after the shuffle.
  listed = (pipeline
            | 'Input' >> beam.Create([settings.input])
            | 'List' >> beam.FlatMap(list_input).with_output_types(List[InputItem]).with_outputs(
                REJECTED, main='batches'))
  batches = listed.batches | 'Distribute' >> beam.Reshuffle()

  # Only metadata goes on, in batches: Beam's cost per element exceeds a record's own.
  # Keyed by the start of the content hash, so identical files meet in one bucket,
  # form one group and never straddle splits.
  checked = batches | 'Validate' >> beam.ParDo(ValidateImages(settings)).with_output_types(
      List[ImageRecord]).with_outputs(REJECTED, main='records')
  grouped = (checked.records
             | 'BucketByContent' >> beam.FlatMap(lambda records: splitting.content_buckets(records).items()
                                                 ).with_output_types(Tuple[str, List[ImageRecord]])
             | 'GroupByContent' >> beam.GroupByKey()
             | 'GroupCopies' >> beam.ParDo(GroupCopies(settings.dedupe)).with_output_types(
                 Tuple[str, List[ContentGroup]]).with_outputs(REJECTED, DUPLICATES, main='groups'))
  # Splits and shards follow the content hash; each bucket places its own records.
  assigned = grouped.groups | 'AssignSplits' >> AssignSplits(settings.splits)

  class_labels = (assigned[LABELS]
                  | 'UniqueLabels' >> beam.Distinct()
                  | 'AllLabels' >> beam.combiners.ToList()
                  | 'SortLabels' >> beam.Map(labels.sorted_labels))

  # Plan on metadata; each planned shard is then written whole by one worker.
  plans = assigned.records | 'PlanShards' >> PlanShards(settings.target_shard_bytes)
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

  errors_by_reason = ((listed[REJECTED], checked[REJECTED], grouped[REJECTED], written[REJECTED])
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
