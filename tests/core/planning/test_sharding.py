import itertools
import random

import pytest

from beam_pipeline.core.planning import hash_order, sharding, splitting
from beam_pipeline.core.messages import ContentGroup

from helpers.values import chunked_numbers, gap_free_numbers, image_record, plan_shards


def _record(i, size, label='cat', split='train'):
  return image_record(f'gs://b/{label}/{i}.jpg', label, split, f'{random.Random(i).getrandbits(256):064x}', size)


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


def test_order_is_by_content_and_name_not_by_input_order():
  records = [_record(i, 100, 'cat' if i < 50 else 'dog') for i in range(100)]
  forward = plan_shards(records, 10**6)
  backward = plan_shards(list(reversed(records)), 10**6)
  assert forward == backward
  labels = [r.label for r in forward[0].records]
  assert labels != sorted(labels)  # class-sorted input comes out mixed


def test_the_order_key_is_reproducible_and_gives_copies_places_of_their_own():
  content = 'ab' * 32
  assert sharding.order_key(content, 'gs://b/x.jpg') == sharding.order_key(content, 'gs://b/x.jpg')
  assert sharding.order_key(content, 'gs://b/x.jpg') != sharding.order_key(content, 'gs://b/copy of x.jpg')
  assert sharding.order_key(content, '/d/caf\udce9.jpg')  # a name that is not UTF-8


def longest_run(labels):
  return max(len(list(run)) for _, run in itertools.groupby(labels))


def test_every_shard_mixes_the_classes_as_its_split_does():
  """Two classes, listed class by class, split 80/20 and written in shards of about 300
  records. Splits rank each class by content hash, so ordering shards by that hash left
  a run of one class at the ends of each split (41 records, and a validation shard
  opening with 31 of one class, on 3,000 photos). Now no shard has a run longer than a
  random order gives, and every shard's class share is its split's within sampling noise."""
  records = [_record(i, 10_000, ('cat', 'dog')[i // 1500], split=None) for i in range(3000)]
  spec = splitting.parse_splits('train=0.8,validation=0.2')
  groups = splitting.content_buckets(records)
  groups = {key: [ContentGroup((record,)) for record in batch] for key, batch in groups.items()}
  placed = hash_order.offsets(pair for key, batch in groups.items() for pair in splitting.class_weights(key, batch))
  assigned = [record for key, batch in groups.items() for record in splitting.assign_splits(key, batch, spec, placed)]

  plans = plan_shards(assigned, 300 * sharding.estimated_record_bytes(records[0]))
  assert {plan.split for plan in plans} == {'train', 'validation'} and len(plans) >= 9
  for plan in plans:
    labels = [record.label for record in plan.records]
    in_split = [record.label for record in assigned if record.split == plan.split]
    share, split_share = labels.count('cat') / len(labels), in_split.count('cat') / len(in_split)
    assert longest_run(labels) <= 20, (plan.split, plan.index, longest_run(labels))
    assert abs(share - split_share) <= 3 * (split_share * (1 - split_share) / len(labels)) ** 0.5, plan.index

  # What ordering by the content hash itself gave: a long run of one class in some shard.
  by_content = sorted((r for r in assigned if r.split == 'train'), key=lambda r: r.source_sha256)
  assert longest_run([r.label for r in by_content]) > 20


def test_a_huge_record_never_leaves_an_empty_shard():
  records = [_record(0, 10**7)] + [_record(i, 10) for i in range(1, 5)]
  plans = plan_shards(records, 10**6)
  assert all(p.records for p in plans) and plans[-1].count == len(plans)


@pytest.mark.parametrize('count, num_shards', [(1000, 7), (9, 4), (3, 4), (1, 8), (5000, 64)])
def test_a_number_of_shards_gives_shards_one_record_apart_whatever_their_sizes(count, num_shards):
  """--num_shards: N shards per split by record count, whatever the bytes (a size target far too
  small for them is ignored), in the order a sized plan keeps; a split of fewer records gets one
  shard per record, numbered without gaps."""
  rng = random.Random(count)
  records = [_record(i, int(90_000 * rng.uniform(0.01, 5)), split=rng.choice(['train', 'test'])) for i in range(count)]
  sizes = sharding.RecordSizes(num_shards=num_shards)
  plans = plan_shards(records, 10, sizes=sizes)
  for split in {r.split for r in records}:
    in_split = [plan for plan in plans if plan.split == split]
    wanted = sum(r.split == split for r in records)
    assert len(in_split) == min(num_shards, wanted)
    assert all(plan.count == len(in_split) for plan in in_split)
    lengths = [len(plan.records) for plan in in_split]
    assert sum(lengths) == wanted and max(lengths) - min(lengths) <= 1
    ordered = [r.order_key for plan in in_split for r in plan.records]
    assert ordered == sorted(ordered)
  assert plan_shards(records, 10, buckets=sharding.order_buckets(records, 2), sizes=sizes) == plans


def test_planning_bucket_by_bucket_equals_one_sort_of_the_whole_split():
  """Every order bucket places its own records from the totals before it, exactly as
  ranking the whole split in one place would (one bucket holding everything)."""
  rng = random.Random(7)
  records = [_record(i, int(90_000 * rng.uniform(0.3, 1.7)), split=rng.choice(['train', 'test'])) for i in range(3000)]
  bucketed = plan_shards(records, 3 * 10**6)
  assert len(sharding.order_buckets(records)) == 16 ** sharding.ORDER_BUCKET_DIGITS
  assert bucketed == plan_shards(records, 3 * 10**6, buckets={'': records})
  for digits in (2, 3):  # wider buckets, as a larger input gets: the same plans
    assert bucketed == plan_shards(records, 3 * 10**6, buckets=sharding.order_buckets(records, digits))
  assert {plan.split for plan in bucketed} == {'train', 'test'}
  assert all([r.order_key for r in plan.records] == sorted(r.order_key for r in plan.records) for plan in bucketed)


def test_buckets_widen_by_a_hex_digit_for_every_sixteenfold_of_the_input():
  """The minimum up to 16**minimum buckets of the bound; then one digit more per sixteenfold:
  100 million records fill 4,096 buckets of about 24,000."""
  bound = hash_order.RECORDS_PER_BUCKET
  assert hash_order.prefix_digits(0, 1) == hash_order.prefix_digits(16 * bound, 1) == 1
  assert hash_order.prefix_digits(16 * bound + 1, 1) == 2
  assert hash_order.prefix_digits(256 * bound, 2) == 2 and hash_order.prefix_digits(256 * bound + 1, 2) == 3
  assert hash_order.prefix_digits(10**8, 1) == hash_order.prefix_digits(10**8, 2) == 3
  assert hash_order.prefix_digits(10**9, 2) == 4


@pytest.mark.parametrize('chunk', [1, 3, 1024])
def test_shards_numbered_chunk_by_chunk_get_the_numbers_of_one_ranking(chunk, monkeypatch):
  """Gaps (planned shards a huge record left empty) anywhere, chunks of any size: each split's
  shards in use are numbered 0..N-1 in planned order, as one ranking of the split would."""
  monkeypatch.setattr(sharding, 'NUMBERING_CHUNK', chunk)
  rng = random.Random(chunk)
  planned = [(split, index) for split in ('train', 'test') for index in range(40) if rng.random() < 0.7]
  planned += planned[::3]  # a shard planned from several order buckets
  assert chunked_numbers(planned) == gap_free_numbers(planned)
