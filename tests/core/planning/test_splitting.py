import collections
import hashlib
import random

import pytest

from beam_pipeline.core import split_names
from beam_pipeline.core.planning import hash_order, splitting
from beam_pipeline.core.messages import ContentGroup
from beam_pipeline.core.settings import SplitSpec
from beam_pipeline.core.user_errors import UsageError

from helpers.values import image_record

SPEC = splitting.parse_splits('train=0.8,validation=0.1,test=0.1')


def _record(name, label, content=None, split=None, **fields):
  return image_record(f'gs://b/{label}/{name}', label, split, hashlib.sha256((content or name).encode()).hexdigest(),
                      **fields)


def assign(groups, buckets=None):
  """The pipeline's steps as plain calls: class totals per bucket, then each bucket assigns its groups."""
  if buckets is None:
    buckets = {}
    for group in groups:
      buckets.setdefault(group.records[0].source_sha256[:splitting.CONTENT_BUCKET_DIGITS], []).append(group)
  placed = hash_order.offsets(pair for key, batch in buckets.items() for pair in splitting.class_weights(key, batch))
  return [record for key, batch in buckets.items() for record in splitting.assign_splits(key, batch, SPEC, placed)]


def test_parse_splits():
  assert SPEC == SplitSpec(('train', 'validation', 'test'), (0.8, 0.1, 0.1))
  assert splitting.parse_splits(None) == SplitSpec(('train',), (1.0,))
  for bad in ('train=0.8,validation=0.3', 'Train=1', 'train=x', 'train=0.5,train=0.5', 'train=0,test=1',
              'train=0.5,training=0.5', 'val=0.5,validation=0.5'):
    with pytest.raises(UsageError):
      splitting.parse_splits(bad)


@pytest.mark.parametrize('given, meant', [('validaton', 'validation'), ('trian', 'train'), ('tset', 'test'),
                                          ('vaildation', 'validation'), ('trainn', 'train'), ('vaild', 'validation')])
def test_a_split_name_one_typo_off_a_usual_one_asks_whether_it_was_meant(given, meant):
  with pytest.raises(UsageError, match=f"'{given}' is one letter off {meant}; did you mean {meant}\\?"):
    splitting.parse_splits(f'train=0.8,{given}=0.2' if meant != 'train' else f'{given}=0.8,test=0.2')


def test_names_of_their_own_are_no_typos():
  for given in ('holdout', 'val2', 'test_hard', 'train_1', 'eval', 'calibration', 'devv', 'vals'):
    assert splitting.parse_splits(f'train=0.8,{given}=0.2').names == ('train', given)


def test_a_usual_split_is_named_alike_by_every_word_for_it():
  """--splits reads val, dev, training ... as a manifest's split column and split folders do."""
  assert splitting.parse_splits('training=0.7,val=0.2,testing=0.1') == SplitSpec(('train', 'validation', 'test'),
                                                                                (0.7, 0.2, 0.1))
  assert splitting.parse_splits('train=0.9,holdout=0.1').names == ('train', 'holdout')
  assert [split_names.usual(word) for word in ('VAL', ' dev ', 'Valid', 'testing', 'Training', 'holdout', '')] == [
      'validation', 'validation', 'validation', 'test', 'train', None, None]


@pytest.mark.parametrize('count', [101, 700, 2500])
def test_fractions_hold_per_class_within_one_point(count):
  groups = [ContentGroup((_record(f'{i}.jpg', 'cat'),)) for i in range(count)]
  assigned = assign(groups)
  for name, fraction in zip(SPEC.names, SPEC.fractions):
    share = sum(r.split == name for r in assigned) / count
    assert abs(share - fraction) <= 0.01 + 1 / count


def test_assignment_follows_content_not_order():
  groups = [ContentGroup((_record(f'{i}.jpg', 'dog'),)) for i in range(300)]
  forward = {r.uri: r.split for r in assign(groups)}
  shuffled = groups[:]
  random.Random(1).shuffle(shuffled)
  assert forward == {r.uri: r.split for r in assign(shuffled)}


def test_assigning_bucket_by_bucket_equals_one_ranking_of_each_whole_class():
  rng = random.Random(3)
  groups = [ContentGroup(tuple(_record(f'{i}-{k}.jpg', label, content=str(i)) for k in range(rng.choice([1, 1, 2]))))
            for i, label in ((i, rng.choice(['cat', 'dog', 'emu'])) for i in range(4000))]
  bucketed = {r.uri: r.split for r in assign(groups)}
  assert bucketed == {r.uri: r.split for r in assign(groups, buckets={'': groups})}
  for label in ('cat', 'dog', 'emu'):
    shares = collections.Counter(split for uri, split in bucketed.items() if f'/{label}/' in uri)
    assert abs(shares['validation'] / sum(shares.values()) - 0.1) < 0.01


def test_copies_share_one_split_and_explicit_splits_win():
  copies = [_record('b.jpg', 'cat', content='same', split='test'), _record('a.jpg', 'dog', content='same'),
            _record('c.jpg', 'cat', content='same', split='train')]
  group, dropped = splitting.group_duplicates(copies, dedupe=False)
  assert [r.uri for r in group.records] == ['gs://b/cat/b.jpg', 'gs://b/cat/c.jpg', 'gs://b/dog/a.jpg']
  assert {r.split for r in group.records} == {'test'} and not dropped
  assert {r.split for r in assign([group])} == {'test'}


def test_dedupe_keeps_the_first_copy_by_uri():
  copies = [_record('b.jpg', 'cat', content='same'), _record('a.jpg', 'cat', content='same')]
  group, dropped = splitting.group_duplicates(copies, dedupe=True)
  assert [r.uri for r in group.records] == ['gs://b/cat/a.jpg']
  assert [(d.uri, d.reason) for d in dropped] == [('gs://b/cat/b.jpg', 'duplicate')]
  assert 'gs://b/cat/a.jpg' in dropped[0].detail


def test_dedupe_says_when_the_labels_of_the_copies_conflict():
  """The copy dropped with another label names both, and which copy was kept: the other label is
  lost, and must not be lost unsaid."""
  copies = [_record('b.jpg', 'dog', content='same'), _record('a.jpg', 'cat', content='same'),
            _record('c.jpg', 'cat', content='same')]
  assert splitting.labels_conflict(copies)
  group, dropped = splitting.group_duplicates(copies, dedupe=True)
  assert [r.uri for r in group.records] == ['gs://b/cat/a.jpg']
  assert [(d.uri, d.detail) for d in dropped] == [
      ('gs://b/cat/c.jpg', 'same content as gs://b/cat/a.jpg (--dedupe keeps one copy)'),
      ('gs://b/dog/b.jpg', "same content as gs://b/cat/a.jpg (--dedupe keeps one copy); the labels conflict: 'dog' "
                           "here, 'cat' on gs://b/cat/a.jpg, which is kept with its label, given by 2 of the 3 "
                           'copies')]


def test_dedupe_keeps_the_label_most_copies_give_whatever_the_names():
  """The copy that sorts first is no more right than the others: two copies say dog, one cat."""
  copies = [_record('a.jpg', 'cat', content='same'), _record('b.jpg', 'dog', content='same'),
            _record('c.jpg', 'dog', content='same')]
  group, dropped = splitting.group_duplicates(copies, dedupe=True)
  assert [(r.uri, r.label) for r in group.records] == [('gs://b/dog/b.jpg', 'dog')]
  assert {d.uri: d.reason for d in dropped} == {'gs://b/cat/a.jpg': 'duplicate', 'gs://b/dog/c.jpg': 'duplicate'}


def test_dedupe_rejects_every_copy_where_no_one_label_is_given_most():
  copies = [_record('a.jpg', 'cat', content='same'), _record('b.jpg', 'dog', content='same')]
  group, dropped = splitting.group_duplicates(copies, dedupe=True)
  assert group.records == ()
  assert [(d.uri, d.reason, d.detail) for d in dropped] == [
      ('gs://b/cat/a.jpg', 'label_conflict', "the same picture as gs://b/dog/b.jpg under other labels ('cat' by 1; "
       "'dog' by 1): no one label is given most, so --dedupe keeps none; give the copies one label, or remove those "
       'wrongly labelled'),
      ('gs://b/dog/b.jpg', 'label_conflict', "the same picture as gs://b/cat/a.jpg under other labels ('cat' by 1; "
       "'dog' by 1): no one label is given most, so --dedupe keeps none; give the copies one label, or remove those "
       'wrongly labelled')]


def test_labels_conflict_unless_every_copy_has_the_same_labels_in_any_order():
  same = [_record('a.jpg', 'cat', content='x'), _record('b.jpg', 'cat', content='x')]
  assert not splitting.labels_conflict(same)
  assert splitting.labels_conflict([same[0], same[1]._replace(label=None)])
  multi = [same[0]._replace(labels=('cat', 'pet')), same[1]._replace(labels=('pet', 'cat'))]
  assert not splitting.labels_conflict(multi)
  assert splitting.labels_conflict([multi[0], multi[1]._replace(labels=('pet',), label='pet')])


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


def _near_buckets(groups, near):
  """The pipeline's buckets: each group under its content bucket, or, for a near-copy group (a
  list of content groups), merged under the near bucket of its smallest hash."""
  buckets = {}
  for group in groups:
    buckets.setdefault(group.records[0].source_sha256[:splitting.CONTENT_BUCKET_DIGITS], []).append(group)
  for members in near:
    merged, _ = splitting.merge_near_copies(members, drop=False)
    key = splitting.near_bucket(merged.records[0].source_sha256[:splitting.CONTENT_BUCKET_DIGITS])
    buckets.setdefault(key, []).append(merged)
  return buckets


def test_a_near_bucket_sorts_right_after_its_content_bucket():
  assert sorted(['ab', 'ac', splitting.near_bucket('ab'), 'aa']) == ['aa', 'ab', 'ab~', 'ac']
  assert splitting.is_near_bucket(splitting.near_bucket('ab')) and not splitting.is_near_bucket('ab')


def test_near_copy_groups_land_whole_in_one_split_and_classes_keep_their_fractions():
  rng = random.Random(5)
  labels = ['cat', 'dog', 'emu']
  single = [ContentGroup((_record(f'{i}.jpg', rng.choice(labels)),)) for i in range(3000)]
  near = [[ContentGroup((_record(f'n{i}-{k}.jpg', rng.choice(labels) if k else labels[i % 3]),))
           for k in range(rng.choice([2, 3]))] for i in range(400)]
  records = assign(None, buckets=_near_buckets(single, near))
  split = {r.uri: r.split for r in records}
  assert len(split) == 3000 + sum(map(len, near))
  for members in near:
    assert len({split[g.records[0].uri] for g in members}) == 1
  for label in labels:  # a near group counts in its first record's class, its smallest hash's
    shares = collections.Counter(r.split for r in records if r.label == label)
    assert abs(shares['validation'] / sum(shares.values()) - 0.1) < 0.02


def test_a_merged_group_ranks_by_its_smallest_hash_and_keeps_the_splits_given():
  members = [ContentGroup((_record('b.jpg', 'cat'),)), ContentGroup((_record('a.jpg', 'dog', split='test'),)),
             ContentGroup((_record('c.jpg', 'cat', content='x'), _record('d.jpg', 'cat', content='x')))]
  merged, dropped = splitting.merge_near_copies(members, drop=False)
  assert [r.source_sha256 for r in merged.records] == sorted(r.source_sha256 for g in members for r in g.records)
  assert {r.uri: r.split for r in merged.records} == {'gs://b/cat/b.jpg': 'test', 'gs://b/dog/a.jpg': 'test',
                                                    'gs://b/cat/c.jpg': 'test', 'gs://b/cat/d.jpg': 'test'}
  assert not dropped
  entry = splitting.near_group_entry(merged.records, split='test')
  assert entry == {'images': ['gs://b/cat/b.jpg', 'gs://b/cat/c.jpg', 'gs://b/cat/d.jpg', 'gs://b/dog/a.jpg'],
                   'labels': ['cat', 'cat', 'cat', 'dog'], 'split': 'test', 'label_conflict': True}
  given = [ContentGroup((_record('a.jpg', 'cat', split='train'),)), *members]
  merged, _ = splitting.merge_near_copies(given, drop=False)  # a given split is never moved
  assert {r.uri: r.split for r in merged.records} == {'gs://b/cat/a.jpg': 'train', 'gs://b/cat/b.jpg': 'train',
                                                    'gs://b/cat/c.jpg': 'train', 'gs://b/cat/d.jpg': 'train',
                                                    'gs://b/dog/a.jpg': 'test'}


def test_drop_keeps_the_undamaged_then_the_largest_image_then_the_largest_file_whatever_the_names():
  small = _record('small.jpg', 'cat', height=10, width=10, num_bytes=900)
  large = _record('large.jpg', 'cat', height=20, width=20, num_bytes=100)
  twin = _record('twin.jpg', 'cat', height=20, width=20, num_bytes=100)
  damaged = _record('damaged.jpg', 'cat', height=40, width=40, num_bytes=5000, damaged=True)
  merged, dropped = splitting.merge_near_copies([ContentGroup((r,)) for r in (small, twin, large, damaged)], drop=True)
  kept = min((large, twin), key=lambda r: r.source_sha256)  # a tie of size and bytes: by content, not by name
  assert merged.records == (kept,)
  assert sorted(d.uri for d in dropped) == sorted(r.uri for r in (small, twin, large, damaged) if r is not kept)
  assert all(d.reason == 'near_duplicate' and d.detail.startswith(f'a near copy of {kept.uri}, which is kept '
                                                                  '(--near_copies=drop keeps the best image')
             for d in dropped)
  renamed = [r._replace(uri=r.uri.replace('twin', 'aaa').replace('large', 'zzz')) for r in (small, twin, large)]
  assert splitting.merge_near_copies([ContentGroup((r,)) for r in renamed], drop=True)[0].records[0].source_sha256 == (
      kept.source_sha256)
  assert splitting.near_group_entry([small, twin, large], kept=large) == {
      'images': ['gs://b/cat/large.jpg', 'gs://b/cat/small.jpg', 'gs://b/cat/twin.jpg'], 'labels': ['cat'] * 3,
      'kept': 'gs://b/cat/large.jpg'}


def test_given_weights_count_the_groups_whose_split_is_given_by_class_and_split():
  """What an --incremental update's fractions count beside the kept records: new copies and near
  copies placed in their pictures' splits; the groups still to be placed are class_weights'."""
  groups = [ContentGroup((_record('a', 'cat', split='validation'), _record('a2', 'cat', 'a', split='validation'))),
            ContentGroup((_record('b', 'cat', split='train'),)),
            ContentGroup((_record('c', 'dog', split='validation'),)),
            ContentGroup((_record('d', 'dog'),))]
  assert dict(splitting.given_weights(groups)) == {('cat', 'validation'): 2, ('cat', 'train'): 1,
                                                   ('dog', 'validation'): 1}
  assert dict(splitting.class_weights('ab', groups)) == {('dog', 'ab'): 1}
