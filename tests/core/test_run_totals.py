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
                               **run_totals.image_statistics(labels, sides, sizes)))
  return reports


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
