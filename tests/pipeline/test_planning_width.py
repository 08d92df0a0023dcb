"""Planning as wide as the input: no key of its GroupByKeys holds more than about the bound,
and the plans are the ones today's fixed widths give."""
import collections
import random
from typing import List

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from beam_pipeline.pipeline import coders, graph, local_runner
from beam_pipeline.pipeline.planning import content_groups
from beam_pipeline.pipeline.planning.steps import BeamSteps
from beam_pipeline.core.planning import hash_order, sharding, splitting
from beam_pipeline.core.messages import CheckedImage

from helpers.values import image_record, plan_shards, settings

# Small enough that 8,000 records need wider buckets than the minimum, in both stages.
BOUND = 20
CLASSES = ('cat', 'dog', 'fox', 'owl')
SPLITS = splitting.parse_splits('train=0.8,validation=0.2')
TARGET_BYTES = 2 * 2**20


def synthetic(count: int, seed: int) -> List[CheckedImage]:
  """Validated records without images: random content, sizes and classes; every 50th a copy
  of the record before it."""
  rng = random.Random(seed)
  records = []
  for i in range(count):
    label = rng.choice(CLASSES)
    content = records[-1].source_sha256 if i % 50 == 49 else f'{rng.getrandbits(256):064x}'
    records.append(image_record(f'/data/{label}/{i:06d}.jpg', label, sha256=content,
                                num_bytes=rng.randint(2_000, 60_000)))
  return records


def planned_as_today(records: List[CheckedImage]):
  """The plans the pipeline made before its width grew: split assignment over the 256
  content buckets, then shards over 16 order buckets, as plain calls."""
  by_bucket = collections.defaultdict(list)
  for copies in splitting.same_content(records):
    group, _ = splitting.group_duplicates(copies, dedupe=False)
    by_bucket[group.records[0].source_sha256[:splitting.CONTENT_BUCKET_DIGITS]].append(group)
  placed = hash_order.offsets(pair for bucket, groups in by_bucket.items()
                              for pair in splitting.class_weights(bucket, groups))
  assigned = [record for bucket, groups in by_bucket.items()
              for record in splitting.assign_splits(bucket, groups, SPLITS, placed)]
  return plan_shards(assigned, TARGET_BYTES)


def test_no_key_holds_more_than_about_the_bound_and_the_plans_are_todays(monkeypatch):
  """8,000 records, 400 times a bound of 20: 4,096 content and 4,096 order buckets instead of
  256 and 16, and shards numbered in chunks of 2. Expected: no key of either stage holds more
  than twice the bound; every shard plan is the one today's widths give, under the number
  one ranking of its split gives; the labels and the 159 groups of copies are found."""
  monkeypatch.setattr(sharding, 'NUMBERING_CHUNK', 2)
  records = synthetic(8000, seed=3)
  assert hash_order.prefix_digits(len(records), splitting.CONTENT_BUCKET_DIGITS, BOUND) == 3
  expected = planned_as_today(records)
  assert len(expected) > 10

  coders.register()
  p = beam.Pipeline(runner=local_runner.runner_for(PipelineOptions([])))
  batches = p | 'Records' >> beam.Create([records[i:i + 256] for i in range(0, len(records), 256)]
                                         ).with_output_types(List[CheckedImage])
  count = p | 'Count' >> beam.Create([len(records)])
  result = graph.plan(batches, count, settings(splits=SPLITS, target_shard_bytes=TARGET_BYTES), BOUND)
  assert_that(result.plans, equal_to(expected), label='plans')
  summed = p | 'Once' >> beam.Create([None]) | beam.Map(
      lambda _, labels, duplicates: (labels, duplicates['num_groups']), result.labels, result.duplicates)
  assert_that(summed, equal_to([(list(CLASSES), 8000 // 50)]), label='summed up')
  outcome = p.run()
  outcome.wait_until_finish()
  largest = {d.key.metric.name: d.committed.max
             for d in outcome.metrics().query(MetricsFilter().with_namespace('beam_pipeline'))['distributions']}
  assert largest['records_per_key_GroupByContent'] <= 2 * BOUND, largest
  assert largest['records_per_key_GroupByOrder'] <= 2 * BOUND, largest


def test_the_incremental_planning_simulation_plans_an_update(monkeypatch, tmp_path):
  """benchmarks/incremental_planning.py, as make bench-planning runs it with --incremental, on
  3,000 catalogued records: it must keep running as the update's transforms change."""
  from benchmarks import incremental_planning  # pylint: disable=import-outside-toplevel
  from beam_pipeline.pipeline import earlier_copies, incremental  # pylint: disable=import-outside-toplevel
  # The simulation wraps them to count; put back after.
  monkeypatch.setattr(incremental, '_rewrite', incremental._rewrite)  # pylint: disable=protected-access
  monkeypatch.setattr(incremental._CompareSlot, 'process', incremental._CompareSlot.process)  # pylint: disable=protected-access
  monkeypatch.setattr(earlier_copies, '_placed_in_slot', earlier_copies._placed_in_slot)  # pylint: disable=protected-access
  monkeypatch.setattr(incremental_planning, 'SCRATCH', tmp_path)
  for join in incremental_planning.JOINS:
    row = incremental_planning.run_update(3000, 'in_process', 1.0, join)
    assert row['counts']['unchanged'] + row['counts']['changed'] + row['counts']['removed'] == 3000
    assert row['planned'] == row['counts']['changed'] + row['counts']['added'] > 0
    assert 0 < row['shards_rewritten'] <= row['shards']
    assert row['lookup_files'] == 1 and row['lookup_files_written'] == 2  # by uri, by content
    # One slot meets every listed item, and every new record.
    assert row['largest_key']['BySlot'] == row['listed'] and row['keys']['BySlot'] == 1
    assert row['largest_key']['ByContentSlot'] == row['planned'] and row['keys']['ByContentSlot'] == 1
  for near in ('group', 'index'):  # every catalogued hash grouped (and the index built); the index queried
    row = incremental_planning.run_update(3000, 'in_process', 1.0, 'lookup', near=near)
    assert row['planned'] == row['counts']['changed'] + row['counts']['added'] > 0 and row['near_copies'] == near


def test_the_planning_simulation_plans_every_record_and_extrapolates():
  """benchmarks/planning.py, as make bench runs it, on 3,000 records: every record planned, the
  keys' sizes reported, and 100 million images projected onto 4,096 buckets per stage."""
  from benchmarks import planning  # pylint: disable=import-outside-toplevel
  row = planning.run_plan(3000, 'in_process')
  assert row['records'] == 3000 and row['keys']['GroupByContent'] == 256 and row['keys']['GroupByOrder'] == 16
  assert sum(1 for _ in planning.synthetic_chunk(0, 1000)) == 1000
  projection = planning.extrapolate([row], in_memory=600, encoded=230)
  assert {stage['buckets'] for stage in projection['stages'].values()} == {4096}
  assert 24_400 < projection['stages']['GroupByOrder']['largest_key'] < 2 * hash_order.RECORDS_PER_BUCKET
  assert projection['shuffle_gb'] == round(3 * 10**8 * 230 / 2**30, 1)


def test_bucket_offsets_come_out_one_element_per_class_and_match_the_plain_sums():
  """The split offsets side input is keyed by class, each element one class's buckets: no
  element holds every class x bucket pair (4 million at 100 million images in 1,000 classes)."""
  rng = random.Random(3)
  buckets = {f'{b:02x}': [(f'class{rng.randrange(40)}', rng.randint(1, 5)) for _ in range(30)] for b in range(64)}

  def weights(bucket, pairs):
    return [((label, bucket), weight) for label, weight in pairs]

  expected = hash_order.offsets(pair for bucket, pairs in buckets.items() for pair in weights(bucket, pairs))
  with beam.Pipeline('DirectRunner') as pipeline:
    items = pipeline | beam.Create(list(buckets.items()))
    placed = BeamSteps(pipeline).composite('Offsets', content_groups.bucket_offsets, items, weights)
    assert_that(placed, equal_to(list(expected.items())))
  assert len(expected) == 40 and all(len(key.before) <= 64 for key in expected.values())
