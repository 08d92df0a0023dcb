import hashlib
import random

import pytest

from beam_pipeline import splitting
from beam_pipeline.records import ImageRecord
from beam_pipeline.splitting import ContentGroup, SplitSpec
from beam_pipeline.usage import UsageError

SPEC = splitting.parse_splits('train=0.8,validation=0.1,test=0.1')


def _record(name, label, content=None, split=None):
  sha = hashlib.sha256((content or name).encode()).hexdigest()
  return ImageRecord(f'gs://b/{label}/{name}', label, split, (), sha, sha, 100, 'jpeg', 1, 1, 3, False)


def test_parse_splits():
  assert SPEC == SplitSpec(('train', 'validation', 'test'), (0.8, 0.1, 0.1))
  assert splitting.parse_splits(None) == SplitSpec(('train',), (1.0,))
  for bad in ('train=0.8,validation=0.3', 'Train=1', 'train=x', 'train=0.5,train=0.5', 'train=0,test=1'):
    with pytest.raises(UsageError):
      splitting.parse_splits(bad)


@pytest.mark.parametrize('count', [101, 700, 2500])
def test_fractions_hold_per_class_within_one_point(count):
  groups = [ContentGroup((_record(f'{i}.jpg', 'cat'),)) for i in range(count)]
  assigned = list(splitting.assign_splits(groups, SPEC))
  for name, fraction in zip(SPEC.names, SPEC.fractions):
    share = sum(r.split == name for r in assigned) / count
    assert abs(share - fraction) <= 0.01 + 1 / count


def test_assignment_follows_content_not_order():
  groups = [ContentGroup((_record(f'{i}.jpg', 'dog'),)) for i in range(300)]
  forward = {r.uri: r.split for r in splitting.assign_splits(groups, SPEC)}
  shuffled = groups[:]
  random.Random(1).shuffle(shuffled)
  assert forward == {r.uri: r.split for r in splitting.assign_splits(shuffled, SPEC)}


def test_copies_share_one_split_and_explicit_splits_win():
  copies = [_record('b.jpg', 'cat', content='same', split='test'), _record('a.jpg', 'dog', content='same'),
            _record('c.jpg', 'cat', content='same', split='train')]
  group, dropped = splitting.group_duplicates(copies, dedupe=False)
  assert [r.uri for r in group.records] == ['gs://b/cat/b.jpg', 'gs://b/cat/c.jpg', 'gs://b/dog/a.jpg']
  assert {r.split for r in group.records} == {'test'} and not dropped
  assert {r.split for r in splitting.assign_splits([group], SPEC)} == {'test'}


def test_dedupe_keeps_the_first_copy_by_uri():
  copies = [_record('b.jpg', 'cat', content='same'), _record('a.jpg', 'cat', content='same')]
  group, dropped = splitting.group_duplicates(copies, dedupe=True)
  assert [r.uri for r in group.records] == ['gs://b/cat/a.jpg']
  assert [(d.uri, d.reason) for d in dropped] == [('gs://b/cat/b.jpg', 'duplicate')]
  assert 'gs://b/cat/a.jpg' in dropped[0].detail


def test_copies_always_meet_in_one_content_bucket():
  records = [_record(f'{i}.jpg', 'cat', content=f'photo {i % 300}') for i in range(900)]
  buckets = splitting.content_buckets(records)
  assert sorted(r.uri for batch in buckets.values() for r in batch) == sorted(r.uri for r in records)
  assert 150 < len(buckets) <= 256  # 300 distinct contents, spread over the 256 buckets
  for key, batch in buckets.items():
    assert {r.source_sha256[:len(key)] for r in batch} == {key}
    copies = list(splitting.same_content(batch))
    assert all(len({r.source_sha256 for r in group}) == 1 for group in copies)
    assert sum(map(len, copies)) == len(batch) and all(len(group) == 3 for group in copies)
