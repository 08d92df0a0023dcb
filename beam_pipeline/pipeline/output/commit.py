"""The written shards' reports summed up as they come, and the commit that ends the run."""
import functools
from typing import Any, Iterable, List, Mapping, Optional

import apache_beam as beam

from beam_pipeline.pipeline.output import output_dir
from beam_pipeline.core import rejections
from beam_pipeline.core.inputs import labels, listing_digest
from beam_pipeline.core.messages import ShardReport
from beam_pipeline.core.output import incremental_update, output_layout, run_totals, tfds_metadata
from beam_pipeline.core.output.run_record import Listing, LookupFile, RunRecord
from beam_pipeline.core.output.run_totals import WrittenTotals
from beam_pipeline.core.settings import Settings


class SumShardReports(beam.CombineFn):
  """Every written shard's report, summed up as beam_pipeline.json needs it (run_totals.WrittenTotals)."""

  def create_accumulator(self) -> WrittenTotals:
    return WrittenTotals()

  def add_input(self, accumulator: WrittenTotals, report: ShardReport) -> WrittenTotals:
    return accumulator.add_shard(report)

  def merge_accumulators(self, accumulators: Iterable[WrittenTotals]) -> WrittenTotals:
    return functools.reduce(WrittenTotals.add, accumulators, WrittenTotals())

  def extract_output(self, accumulator: WrittenTotals) -> WrittenTotals:
    return accumulator


def commit(_, *, written: WrittenTotals, labels_list: List[str], errors: Mapping[str, Any],
           duplicates: Mapping[str, Any], near_copies: Optional[Mapping[str, Any]], transform_written: List[List[str]],
           settings: Settings, runner: str, changes: Mapping[str, int], decision: incremental_update.Decision,
           earlier: Optional[RunRecord], listing: Optional[listing_digest.Digest] = None,
           lookup_files: Iterable[LookupFile] = (), content_lookup_files: Iterable[LookupFile] = (),
           lookup_count: int = 0, near_index: Optional[incremental_update.IndexWritten] = None) -> None:
  """The last step, once every shard, the graph and the errors files are staged: the error
  budget, labels.txt, then the output's commit (output_dir.commit). Copies that --dedupe
  or --near_copies=drop dropped and files skipped as no images are listed with the rejections, but are no errors.
  An update's totals are those of the dataset it updates with what it wrote added, and it
  records what changed; an update that found nothing changed commits nothing, leaving the
  output as it was.

  Args:
    _: the one element that starts the step; side inputs among the rest make it wait for every shard and errors file.
    written: the written shards' reports, summed up (SumShardReports).
    labels_list: the label texts in class order, labels.txt's lines.
    errors: the errors files written (WriteErrors): how many ('num_files'), and the rejections' counts by reason.
    duplicates: the groups of identical files, summed up (DuplicateGroups).
    near_copies: the groups of near copies, summed up with the distance and what the grouping left out; None under
      --near_copies=off.
    transform_written: the tf.Transform graph's directories staged, a list of them per graph written (none under
      --skip_transform).
    settings: the conversion's settings.
    runner: the runner's name, for beam_pipeline.json.
    changes: what an update found changed, which it records: {added, changed, removed, unchanged, touched: count};
      empty if nothing changed, or for a run that updates nothing.
    decision: the earlier dataset an --incremental run updates, if any, and the small shards it merges.
    earlier: the run record of the dataset an update updates; None for a run that updates nothing.
    listing: an --incremental run's listing digest, recorded: with it the next run may find that nothing changed
      without a pipeline.
    lookup_files: the files of the catalog's lookup by uri an --incremental run wrote (lookup_files.WriteLookup).
    content_lookup_files: those of its lookup by content.
    lookup_count: how many lookup files the catalog has (catalog_lookup.count_for).
    near_index: the near-copy index an update kept or built on workers; None where it kept none.
  """
  if decision.updates and not incremental_update.changed(changes):
    output_dir.discard(settings.output, settings.run_id)
    return
  dataset, moves = written, []
  lookup_files, content_lookup_files = list(lookup_files), list(content_lookup_files)
  if decision.updates:
    dataset = WrittenTotals.of_record(earlier).add(written, replace=True)
    incremental_update.name_shards(dataset)
    moves = incremental_update.close_gaps(dataset)
  errors_by_reason = {reason: count for reason, count in errors['by_reason'].items()
                      if reason not in (rejections.DUPLICATE, rejections.NEAR_DUPLICATE, rejections.SKIPPED)}
  removed = errors['by_reason'].get(rejections.DUPLICATE, 0)
  near_removed = errors['by_reason'].get(rejections.NEAR_DUPLICATE, 0)
  skipped = errors['by_reason'].get(rejections.SKIPPED, 0)
  num_errors_files = errors['num_files']
  # The budget is of images: those --drop_unannotated asked to leave out are no failure of the
  # run, and an annotation that cannot be used is no image.
  budgeted = {reason: count for reason, count in errors_by_reason.items()
              if reason not in (rejections.UNANNOTATED, rejections.BAD_ANNOTATION)}
  run_totals.check_error_budget(dataset.num_examples,
                                  budgeted, removed + near_removed + errors_by_reason.get(rejections.UNANNOTATED, 0),
                                  settings.max_error_fraction,
                                  output_dir.temp_path(settings.output, settings.run_id,
                                                      output_layout.errors_pattern(num_errors_files)))
  output_dir.stage_text(settings.output, settings.run_id, output_layout.LABELS_TXT, labels.labels_txt(labels_list))
  label_files = [output_layout.LABELS_TXT]
  if settings.annotations:
    output_dir.stage_text(settings.output, settings.run_id, output_layout.LABEL_MAP,
                          labels.label_map_pbtxt(labels_list))
    label_files.append(output_layout.LABEL_MAP)
  update = (incremental_update.what_changed(decision, changes, written, dataset, labels_list)
            if settings.incremental else None)
  info = run_totals.build(written=dataset, labels=labels_list, errors_by_reason=errors_by_reason,
                            num_errors_files=num_errors_files, duplicates=duplicates,
                            dedupe=settings.dedupe, num_removed=removed, num_skipped=skipped,
                            near_copies=run_totals.near_duplicates(near_copies, settings.near_copies, near_removed),
                            settings=settings.as_dict(), runner=runner,
                            embedding=run_totals.embedding_info(settings.embedding, settings.schema), update=update,
                            listing=(Listing(num_listed=listing.count, digest=listing.text)
                                     if listing is not None and listing.text else None),
                            catalog_lookup=(incremental_update.lookup_after(decision, earlier, lookup_files,
                                                                            content_lookup_files, lookup_count,
                                                                            near_index)
                                            if settings.incremental else None))
  tfds_files = tfds_metadata.files(info)  # TensorFlow Datasets' metadata; its dataset_info.json is its marker
  for name, text in tfds_files.items():
    output_dir.stage_text(settings.output, settings.run_id, name, text)
  last = [name for name in tfds_files if name == output_layout.TFDS_DATASET_INFO]
  emptied = {name for split in written.splits.values() for shard in split.shards if not shard.num_examples
             for name in shard.files}  # shards an update left without records: they go
  files = ([name for name in written.files if name not in emptied] +
           [found.staged for found in lookup_files + content_lookup_files] +
           [found.file for found in (near_index.nodes + near_index.bands if near_index else ())] + label_files +
           output_layout.errors_files(num_errors_files) +
           [name for name in tfds_files if name not in last])
  written_dirs = [directory for directories in transform_written for directory in directories]
  output_dir.commit(settings.output, settings.run_id, files, written_dirs, info.to_json(), last, moves)
