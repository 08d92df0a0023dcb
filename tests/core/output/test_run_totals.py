"""beam_pipeline.json from written shards, summed up in any grouping a combiner may take."""
import dataclasses
import json
import random

from beam_pipeline.core.output import run_totals
from beam_pipeline.core.messages import ShardReport

LABELS = ['ant', 'bee', 'cat', 'dog']


def shard_reports(count: int, seed: int):
  rng = random.Random(seed)
  reports = []
  for index in range(count):
    split = rng.choice(['train', 'validation'])
    labels = [rng.choice(LABELS) for _ in range(rng.randint(1, 40))]
    sides = [rng.randint(16, 4000) for _ in labels]
    sizes = [rng.randint(500, 900_000) for _ in labels]
    reports.append(ShardReport(split=split, file=f'{split}-{index:05d}-of-{count:05d}.tfrecord',
                               num_examples=len(labels), num_bytes=sum(sizes) + 16 * len(labels),
                               num_reencoded=rng.randint(0, 2), num_resized=rng.randint(0, 1),
                               num_rotated=rng.randint(0, 1), num_damaged_jpeg=rng.randint(0, 1),
                               **run_totals.image_statistics(labels, sides, sizes, qualities(rng, labels))))
  return reports


FLAGS = ('blurry', 'dark', 'grayscale_as_rgb')


def qualities(rng, labels):
  """Each image's class and flags: most raise none, a few one or two."""
  return [(label, tuple(sorted(rng.sample(FLAGS, rng.choice((0, 0, 0, 0, 1, 2)))))) for label in labels]


def info(written):
  built = run_totals.build(written=written, labels=LABELS, errors_by_reason={'damaged_jpeg': 2, 'empty': 1},
                             num_errors_files=1, duplicates={'num_groups': 0, 'num_extra_copies': 0, 'groups': []},
                             dedupe=False, num_removed=0, settings={'compression': 'none', 'schema': 'default'},
                             runner='DirectRunner')
  return dataclasses.replace(built, created='').to_json()


def test_totals_summed_in_any_grouping_give_the_same_dataset_info():
  reports = shard_reports(60, seed=3)
  whole = info(run_totals.written_totals(reports))
  shuffled = reports[:]
  random.Random(4).shuffle(shuffled)
  parts = [run_totals.written_totals(shuffled[start::3]) for start in range(3)]
  merged = run_totals.WrittenTotals().add(parts[2]).add(parts[0])
  assert info(merged.add(parts[1])) == whole

  summed = json.loads(whole)
  train = [report for report in reports if report.split == 'train']
  assert summed['splits']['train']['num_examples'] == sum(report.num_examples for report in train)
  assert [shard['file'] for shard in summed['splits']['train']['shards']] == sorted(r.file for r in train)
  assert list(summed['splits']['train']['classes']) == [label for label in LABELS
                                                        if any(label in r.classes for r in train)]
  kib = summed['splits']['validation']['kib']
  assert list(kib) == sorted(kib, key=int)
  assert summed['num_damaged_jpeg'] == 2 + sum(report.num_damaged_jpeg for report in reports)
  assert summed['num_reencoded'] == sum(report.num_reencoded for report in reports)


def test_data_quality_flags_are_counted_per_split_flag_and_class_and_come_off_with_a_replaced_shard():
  reports = shard_reports(40, seed=5)
  summed = json.loads(info(run_totals.written_totals(reports)))
  for split in ('train', 'validation'):
    expected = {}
    for report in reports:
      if report.split == split:
        for flag, per_class in report.quality.items():
          for label, count in per_class.items():
            expected.setdefault(flag, {})[label] = expected.get(flag, {}).get(label, 0) + count
    quality = summed['splits'][split]['quality']
    assert quality == expected and list(quality) == sorted(quality)
    assert all(list(per_class) == [label for label in LABELS if label in per_class] for per_class in quality.values())

  # An --incremental run writes a shard again: the earlier report comes off, the new one goes on.
  earlier = run_totals.written_totals(reports)
  gone = reports[0]
  again = dataclasses.replace(gone, num_examples=1, quality={'dark': {'ant': 1}}, classes={'ant': 1})
  change = run_totals.written_totals([dataclasses.replace(gone, replaced=True), again])
  updated = run_totals.WrittenTotals.of_record(run_totals.build(
      written=earlier, labels=LABELS, errors_by_reason={}, num_errors_files=1,
      duplicates={'num_groups': 0, 'num_extra_copies': 0, 'groups': []}, dedupe=False, num_removed=0,
      settings={'compression': 'none', 'schema': 'default'}, runner='DirectRunner')).add(change, replace=True)
  fresh = run_totals.written_totals([again, *reports[1:]])
  assert updated.splits[gone.split].quality == fresh.splits[gone.split].quality


def test_a_split_whose_images_raise_no_flag_records_no_quality():
  report = ShardReport(split='train', file='train-00000-of-00001.tfrecord', num_examples=2, num_bytes=10,
                       **run_totals.image_statistics(['ant', 'bee'], [10, 20], [100, 200], [('ant', ()), ('bee', ())]))
  assert 'quality' not in json.loads(info(run_totals.written_totals([report])))['splits']['train']
