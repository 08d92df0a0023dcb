"""The run's per-image reports, rejections and groups of identical files, gathered without an
element that holds them all."""
import functools
import json
import random

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from beam_pipeline.pipeline import coders, local_runner
from beam_pipeline.pipeline.output import commit, errors_files
from beam_pipeline.pipeline.planning import content_groups
from beam_pipeline.core.inputs import labels
from beam_pipeline.core.output import errors_output, output_layout, run_totals
from beam_pipeline.core.messages import Rejection, ShardReport


def run_pipeline(build) -> None:
  coders.register()
  pipeline = beam.Pipeline(runner=local_runner.runner_for(PipelineOptions([])))
  build(pipeline)
  pipeline.run().wait_until_finish()


RUN = 'a-run'


def staged_errors(out):
  staged = out / output_layout.TEMP_DIR / RUN
  return {path.name: path.read_text() for path in sorted(staged.glob('errors-*.jsonl'))}


def test_rejections_go_to_as_many_sorted_files_as_they_need_each_written_even_if_empty(tmp_path):
  """35 rejections at 10 a file: 4 files, each sorted by uri, together every rejection once;
  then 11 rejections whose uris all hash to the first of 2 files: the second is written, empty."""
  rejected = [Rejection(f'/photos/{i:03d}.jpg', ('empty', 'truncated')[i % 2], f'detail {i}') for i in range(35)]
  random.Random(1).shuffle(rejected)
  out = tmp_path / 'out'
  run_pipeline(lambda p: assert_that(
      p | beam.Create(rejected).with_output_types(Rejection) | errors_files.WriteErrors(str(out), RUN, per_file=10),
      equal_to([{'num_files': 4, 'by_reason': {'empty': 18, 'truncated': 17}}])))
  files = staged_errors(out)
  assert sorted(files) == output_layout.errors_files(4)
  lines = {name: [json.loads(line) for line in text.splitlines()] for name, text in files.items()}
  assert all(rows == sorted(rows, key=lambda row: row['uri']) for rows in lines.values())
  assert sorted(row['uri'] for rows in lines.values() for row in rows) == sorted(r.uri for r in rejected)
  for name, rows in lines.items():
    assert {errors_output.file_index(row['uri'], 4) for row in rows} <= {output_layout.errors_files(4).index(name)}

  first_only = [uri for uri in (f'/more/{i}.jpg' for i in range(200)) if errors_output.file_index(uri, 2) == 0][:11]
  out = tmp_path / 'skewed'
  run_pipeline(lambda p: assert_that(
      p | beam.Create([Rejection(uri, 'empty', '') for uri in first_only]).with_output_types(Rejection)
      | errors_files.WriteErrors(str(out), RUN, per_file=10),
      equal_to([{'num_files': 2, 'by_reason': {'empty': 11}}])))
  files = staged_errors(out)
  assert len(files['errors-00000-of-00002.jsonl'].splitlines()) == 11 and files['errors-00001-of-00002.jsonl'] == ''


def test_no_rejection_still_writes_the_one_empty_file(tmp_path):
  out = tmp_path / 'out'
  run_pipeline(lambda p: assert_that(
      p | beam.Create([]).with_output_types(Rejection) | errors_files.WriteErrors(str(out), RUN),
      equal_to([{'num_files': 1, 'by_reason': {}}])))
  assert staged_errors(out) == {'errors-00000-of-00001.jsonl': ''}


def test_groups_of_identical_files_are_counted_and_only_the_first_listed():
  """More groups than beam_pipeline.json lists: the counts cover them all, the list the first
  MAX_LISTED_DUPLICATE_GROUPS, those whose labels conflict first, then in sorted order, however
  the runner splits and merges them."""
  listed = run_totals.MAX_LISTED_DUPLICATE_GROUPS
  rng = random.Random(2)
  groups = [sorted(f'/photos/{rng.getrandbits(40):010x}-{copy}.jpg' for copy in range(rng.randint(2, 4)))
            for _ in range(3 * listed + 7)]
  conflicts = [index % 7 == 0 for index in range(len(groups))]  # groups whose files have different labels
  entries = [{'images': group, **({'label_conflict': True} if conflict else {})}
             for group, conflict in zip(groups, conflicts)]
  first = sorted(entries, key=lambda entry: (not entry.get('label_conflict'), entry['images']))[:listed]
  assert first[0].get('label_conflict') and not first[-1].get('label_conflict')
  expected = {'num_groups': len(groups), 'num_extra_copies': sum(len(g) - 1 for g in groups),
              'num_label_conflicts': sum(conflicts), 'groups': first}
  run_pipeline(lambda p: assert_that(
      p | beam.Create(entries, reshuffle=False) | beam.CombineGlobally(content_groups.DuplicateGroups()),
      equal_to([expected])))
  combine = content_groups.DuplicateGroups()
  halves = [combine.create_accumulator(), combine.create_accumulator()]
  for index, entry in enumerate(entries):
    halves[index % 2] = combine.add_input(halves[index % 2], entry)
  assert combine.extract_output(combine.merge_accumulators(halves)) == expected
  assert combine.extract_output(combine.create_accumulator()) == {'num_groups': 0, 'num_extra_copies': 0,
                                                                  'num_label_conflicts': 0, 'groups': []}


def test_class_labels_are_each_text_once_in_class_order_however_merged():
  texts = ['10', '2', '9', '2', '10', '1']
  combine = content_groups.ClassLabels(labels.sorted_labels)
  halves = [combine.create_accumulator(), combine.create_accumulator()]
  for index, text in enumerate(texts):
    halves[index % 2] = combine.add_input(halves[index % 2], text)
  assert combine.extract_output(combine.merge_accumulators(halves)) == ['1', '2', '9', '10']
  update = content_groups.ClassLabels(functools.partial(labels.extended_labels, ['cat', 'dog']))
  assert update.apply(['eel', 'dog', 'bee']) == ['cat', 'dog', 'bee', 'eel']
  assert update.apply([]) == ['cat', 'dog']  # an update that adds no class keeps the dataset's


def test_shard_reports_are_summed_up_as_one_process_sums_them():
  reports = [ShardReport(split='train', file=f'train-{i:05d}-of-00040.tfrecord', num_examples=2, num_bytes=100 + i,
                         num_reencoded=i % 2,
                         **run_totals.image_statistics(['cat', ('dog', 'eel')[i % 2]], [64, 4000 + i], [900, 90_000]))
             for i in range(40)]
  run_pipeline(lambda p: assert_that(
      p | beam.Create(reports) | beam.CombineGlobally(commit.SumShardReports())
      | beam.Map(lambda totals: json.dumps(run_totals.build(
          written=totals, labels=['cat', 'dog', 'eel'], errors_by_reason={}, num_errors_files=1,
          duplicates={'num_groups': 0, 'num_extra_copies': 0, 'groups': []}, dedupe=False, num_removed=0,
          settings={'compression': 'none', 'schema': 'default'}, runner='DirectRunner').as_dict()['splits'])),
      equal_to([json.dumps({'train': {
          'num_examples': 80, 'num_bytes': sum(100 + i for i in range(40)),
          'shards': [{'file': f'train-{i:05d}-of-00040.tfrecord', 'num_examples': 2, 'num_bytes': 100 + i}
                     for i in range(40)],
          'classes': {'cat': 40, 'dog': 20, 'eel': 20},
          'longer_side_px': {'64': 40, '2048': 40}, 'kib': {'0': 40, '64': 40}}})])))
