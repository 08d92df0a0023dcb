"""The run's reports summed up as they come, the errors files, and the commit that ends the run."""
import collections
import functools
import itertools
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Tuple

import apache_beam as beam

from beam_pipeline.beam import output_dir, tags
from beam_pipeline.core import dataset_info, errors_output, labels, output_layout, rejections, tfds_metadata
from beam_pipeline.core.dataset_info import WrittenTotals
from beam_pipeline.core.records import Rejection, ShardReport
from beam_pipeline.core.settings import Settings


class WriteErrors(beam.PTransform):
  """Every Rejection into the errors files (core/errors_output.py), staged for the commit;
  outputs one element: how many files, and the rejections' counts by reason. No element
  holds them all: they are counted first, then gathered file by file, and every file is
  written, even one the hash left empty."""

  def __init__(self, output: str, run: str, per_file: int = errors_output.REJECTIONS_PER_FILE):
    super().__init__()
    self._output = output
    self._run = run
    self._per_file = per_file

  def expand(self, rejected):
    num_files = (rejected
                 | 'Count' >> beam.combiners.Count.Globally()
                 | 'NumFiles' >> beam.Map(errors_output.num_files, self._per_file))
    every_file = num_files | 'EveryFile' >> beam.FlatMap(_every_errors_file).with_output_types(
        Tuple[int, List[Rejection]])
    by_file = rejected | 'ByFile' >> beam.Map(_errors_file_of, beam.pvalue.AsSingleton(num_files)).with_output_types(
        Tuple[int, List[Rejection]])
    return ((every_file, by_file)
            | 'Flatten' >> beam.Flatten()
            | 'GroupByFile' >> beam.GroupByKey()
            | 'Write' >> beam.Map(write_errors_file, beam.pvalue.AsSingleton(num_files), self._output, self._run)
            | 'Sum' >> beam.CombineGlobally(_sum_errors_written))


def _every_errors_file(num_files: int) -> Iterator[Tuple[int, List[Rejection]]]:
  for index in range(num_files):
    yield index, []


def _errors_file_of(rejection: Rejection, num_files: int) -> Tuple[int, List[Rejection]]:
  return errors_output.file_index(rejection.uri, num_files), [rejection]


def write_errors_file(item: Tuple[int, Iterable[List[Rejection]]], num_files: int, output: str,
                      run: str) -> Dict[str, Any]:
  """One errors file, staged for the commit: what it holds, by reason."""
  index, batches = item
  rejected = list(itertools.chain.from_iterable(batches))
  tags.records_per_key('GroupByFile').update(len(rejected))
  output_dir.stage_text(output, run, output_layout.errors_file(index, num_files), errors_output.file_text(rejected))
  return {'num_files': 1, 'by_reason': errors_output.by_reason(rejected)}


def _sum_errors_written(written: Iterable[Mapping[str, Any]]) -> Dict[str, Any]:
  num_files, by_reason = 0, collections.Counter()
  for part in written:
    num_files += part['num_files']
    by_reason.update(part['by_reason'])
  return {'num_files': num_files, 'by_reason': dict(by_reason)}


class SumShardReports(beam.CombineFn):
  """Every written shard's report, summed up as beam_pipeline.json needs it (dataset_info.WrittenTotals)."""

  def create_accumulator(self) -> WrittenTotals:
    return WrittenTotals()

  def add_input(self, accumulator: WrittenTotals, report: ShardReport) -> WrittenTotals:
    return accumulator.add_shard(report)

  def merge_accumulators(self, accumulators: Iterable[WrittenTotals]) -> WrittenTotals:
    return functools.reduce(WrittenTotals.add, accumulators, WrittenTotals())

  def extract_output(self, accumulator: WrittenTotals) -> WrittenTotals:
    return accumulator


def commit(_, *, written: WrittenTotals, labels_list: List[str], errors: Mapping[str, Any],
           duplicates: Mapping[str, Any], transform_written: List[List[str]], settings: Settings, runner: str) -> None:
  """The last step, once every shard, the graph and the errors files are staged: the error
  budget, labels.txt, then the output's commit (output_dir.commit). Copies that --dedupe
  dropped are listed with the rejections, but are no errors."""
  errors_by_reason = {reason: count for reason, count in errors['by_reason'].items() if reason != rejections.DUPLICATE}
  removed = errors['by_reason'].get(rejections.DUPLICATE, 0)
  num_errors_files = errors['num_files']
  # The budget is of images: those --drop_unannotated asked to leave out are no failure of the
  # run, and an annotation that cannot be used is no image.
  budgeted = {reason: count for reason, count in errors_by_reason.items()
              if reason not in (rejections.UNANNOTATED, rejections.BAD_ANNOTATION)}
  dataset_info.check_error_budget(written.num_examples,
                                  budgeted, removed + errors_by_reason.get(rejections.UNANNOTATED, 0),
                                  settings.max_error_fraction,
                                  output_dir.temp_path(settings.output, settings.run_id,
                                                      output_layout.errors_pattern(num_errors_files)))
  output_dir.stage_text(settings.output, settings.run_id, output_layout.LABELS_TXT, labels.labels_txt(labels_list))
  label_files = [output_layout.LABELS_TXT]
  if settings.annotations:
    output_dir.stage_text(settings.output, settings.run_id, output_layout.LABEL_MAP,
                          labels.label_map_pbtxt(labels_list))
    label_files.append(output_layout.LABEL_MAP)
  info = dataset_info.build(written=written, labels=labels_list, errors_by_reason=errors_by_reason,
                            num_errors_files=num_errors_files, duplicates=duplicates,
                            dedupe=settings.dedupe, num_removed=removed, settings=settings.as_dict(), runner=runner,
                            embedding=dataset_info.embedding_info(settings.embedding, settings.schema))
  tfds_files = tfds_metadata.files(info)  # TensorFlow Datasets' metadata; its dataset_info.json is its marker
  for name, text in tfds_files.items():
    output_dir.stage_text(settings.output, settings.run_id, name, text)
  last = [name for name in tfds_files if name == output_layout.TFDS_DATASET_INFO]
  files = (written.files + label_files + output_layout.errors_files(num_errors_files) +
           [name for name in tfds_files if name not in last])
  written_dirs = [directory for directories in transform_written for directory in directories]
  output_dir.commit(settings.output, settings.run_id, files, written_dirs, info.to_json(), last)
