"""The errors files: every rejection of the run as a line of JSON, staged for the commit
(core/output/errors_output.py says how they are split and named)."""
import collections
import itertools
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Tuple

import apache_beam as beam

from beam_pipeline.pipeline import tags
from beam_pipeline.pipeline.output import output_dir
from beam_pipeline.core import rejections
from beam_pipeline.core.messages import Rejection
from beam_pipeline.core.output import errors_output, output_layout


class WriteErrors(beam.PTransform):
  """Every Rejection into the errors files (core/output/errors_output.py), staged for the commit;
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
            # Never empty (one file at least), so without CombineGlobally's branch for an empty input.
            | 'Sum' >> beam.CombineGlobally(_sum_errors_written).without_defaults())


def _every_errors_file(num_files: int) -> Iterator[Tuple[int, List[Rejection]]]:
  for index in range(num_files):
    yield index, []


def _errors_file_of(rejection: Rejection, num_files: int) -> Tuple[int, List[Rejection]]:
  return errors_output.file_index(rejection.uri, num_files), [rejection]


def write_errors_file(item: Tuple[int, Iterable[List[Rejection]]], num_files: int, output: str,
                      run: str) -> Dict[str, Any]:
  """One errors file, staged for the commit: what it holds, by reason.

  Args:
    item: (the file's index, lists of its rejections), as GroupByFile gathers them.
    num_files: how many errors files the run writes, which each file's name says (output_layout.errors_file).
    output: the run's output.
    run: the run's id, whose staging folder the file goes to.
  """
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


Counted = Tuple[int, Dict[str, Tuple[int, str]]]


def counted_rejection(rejection: Rejection, listed: bool) -> Tuple[bool, str, str]:
  """What RejectionCounts counts of a rejection: whether the listing made it, its reason, and its
  uri as text any coder takes (a name's undecodable bytes as \\x escapes)."""
  return listed, rejection.reason, rejection.uri.encode('utf-8', 'surrogateescape').decode('utf-8', 'backslashreplace')


class RejectionCounts(beam.CombineFn):
  """(listed, reason, uri) of rejections (counted_rejection) as how many of the listing's own are inputs
  (a bad manifest row; not a file skipped as no image), and {reason: (count, first uri)} of them
  all: a few numbers and uris whatever the input."""

  def create_accumulator(self) -> Counted:
    return 0, {}

  def add_input(self, accumulator: Counted, item: Tuple[bool, str, str]) -> Counted:
    rows, by_reason = accumulator
    listed, reason, uri = item
    count, first = by_reason.get(reason, (0, uri))
    by_reason[reason] = (count + 1, min(first, uri))
    return rows + (listed and reason != rejections.SKIPPED), by_reason

  def merge_accumulators(self, accumulators: Iterable[Counted]) -> Counted:
    rows, merged = 0, {}
    for more, by_reason in accumulators:
      rows += more
      for reason, (count, uri) in by_reason.items():
        total, first = merged.get(reason, (0, uri))
        merged[reason] = (total + count, min(first, uri))
    return rows, merged

  def extract_output(self, accumulator: Counted) -> Counted:
    return accumulator
