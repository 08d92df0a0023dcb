import collections
import random

import pytest

from beam_pipeline import hash_order, sharding, splitting
from beam_pipeline.records import ImageRecord


def _record(i, size, label='cat', split='train'):
  sha = f'{random.Random(i).getrandbits(256):064x}'
  return ImageRecord(f'gs://b/{label}/{i}.jpg', label, split, (), sha, sha, size, 'jpeg', 1, 1, 3, False)


def plan_shards(records, target, buckets=None):
  """The pipeline's steps as plain calls: bucket totals, then each bucket places its records."""
  buckets = splitting.content_buckets(records) if buckets is None else buckets
  placed = hash_order.offsets(pair for key, batch in buckets.items() for pair in sharding.split_bytes(key, batch))
  shards = collections.defaultdict(list)
  for key, batch in buckets.items():
    for shard, shard_records in sharding.assign_shards(key, batch, target, placed).items():
      shards[shard].extend(shard_records)
  numbered = sharding.numbering(shards)
  return sorted((sharding.plan_shard(split, index, shard_records, numbered)
                 for (split, index), shard_records in shards.items()), key=lambda plan: (plan.split, plan.index))


@pytest.mark.parametrize('count, size, target', [(1, 100, 10**6), (1000, 150_000, 10**7),
                                                  (777, 90_000, 3 * 10**6), (50, 10**6, 4 * 10**6)])
def test_every_shard_but_the_last_is_within_half_of_the_target(count, size, target):
  rng = random.Random(count)
  records = [_record(i, int(size * rng.uniform(0.3, 1.7))) for i in range(count)]
  plans = plan_shards(records, target)
  total = sum(map(sharding.estimated_record_bytes, records))
  assert len(plans) == max(1, -(-total // target))
  assert sorted(r.uri for p in plans for r in p.records) == sorted(r.uri for r in records)
  assert all(p.count == len(plans) and p.index == i for i, p in enumerate(plans))
  for plan in plans[:-1]:
    assert 0.5 * target <= sum(map(sharding.estimated_record_bytes, plan.records)) <= 1.5 * target


def test_order_is_by_content_not_by_input_order():
  records = [_record(i, 100, 'cat' if i < 50 else 'dog') for i in range(100)]
  forward = plan_shards(records, 10**6)
  backward = plan_shards(list(reversed(records)), 10**6)
  assert forward == backward
  labels = [r.label for r in forward[0].records]
  assert labels != sorted(labels)  # class-sorted input comes out mixed


def test_a_huge_record_never_leaves_an_empty_shard():
  records = [_record(0, 10**7)] + [_record(i, 10) for i in range(1, 5)]
  plans = plan_shards(records, 10**6)
  assert all(p.records for p in plans) and plans[-1].count == len(plans)


def test_planning_bucket_by_bucket_equals_one_sort_of_the_whole_split():
  """Every bucket places its own records from the totals before it, exactly as ranking the
  whole split in one place would (one bucket holding everything)."""
  rng = random.Random(7)
  records = [_record(i, int(90_000 * rng.uniform(0.3, 1.7)), split=rng.choice(['train', 'test'])) for i in range(3000)]
  bucketed = plan_shards(records, 3 * 10**6)
  assert len(splitting.content_buckets(records)) == 256
  assert bucketed == plan_shards(records, 3 * 10**6, buckets={'': records})
  assert {plan.split for plan in bucketed} == {'train', 'test'}
  assert all(plan.records == tuple(sorted(plan.records, key=sharding.record_order_key)) for plan in bucketed)


def test_names():
  assert sharding.shard_file_name('train', 3, 12, 'none') == 'train-00003-of-00012.tfrecord'
  assert sharding.shard_file_name('validation', 0, 1, 'gzip') == 'validation-00000-of-00001.tfrecord.gz'
