"""The plain functions of --incremental: what became of an input, the catalog, the split fractions
of new images, the classes' order, which shards merge, how new shards are numbered, how gaps
close, and the totals of an updated dataset."""
import dataclasses
import json
import random

import pytest

from beam_pipeline.core.images import perceptual_hash
from beam_pipeline.core.inputs import labels
from beam_pipeline.core.messages import Rejection, ShardReport
from beam_pipeline.core.output import catalog_entries, incremental_update, output_layout, run_record, run_totals
from beam_pipeline.core.output.catalog_entries import ADDED, CHANGED, REMOVED, UNCHANGED
from beam_pipeline.core.output.run_record import Shard
from beam_pipeline.core.planning import splitting
from beam_pipeline.core.settings import SplitSpec
from helpers import values

HASH = perceptual_hash.NAME

SPEC = SplitSpec(('train', 'validation', 'test'), (0.8, 0.1, 0.1))


def entry(uri: str, fingerprint: str = 'file:1:2', split: str = 'train', label: str = 'cat', **fields):
  base = dict(uri=uri, fingerprint=fingerprint, source_sha256='ab' * 32, split=split, label=label, labels=(),
              objects=(), longer_side=48, stored_bytes=1500, reencoded=False, resized=False, rotated=False,
              damaged=False)
  return catalog_entries.Entry(**{**base, **fields})


@pytest.mark.parametrize('today, earlier, change', [
    ([], ['file:1:2'], REMOVED),
    (['file:1:2'], [], ADDED),
    (['file:1:2'], ['file:1:2'], UNCHANGED),
    (['file:1:3'], ['file:1:2'], CHANGED),
    ([''], [''], CHANGED),  # unknown: read again rather than trusted
    (['file:1:2', 'file:1:2'], ['file:1:2'], CHANGED),  # a manifest names it twice now
])
def test_what_became_of_an_input(today, earlier, change):
  assert catalog_entries.change(today, earlier) == change


def test_only_what_an_unchanged_file_would_get_again_is_carried():
  assert catalog_entries.carried(Rejection('a.jpg', 'corrupt', 'cut short', 'file:1:2'))
  assert not catalog_entries.carried(Rejection('a.jpg', 'corrupt', 'cut short'))  # no fingerprint
  for reason in ('unreadable', 'duplicate', 'changed_during_run', 'internal_error', 'skipped'):
    assert not catalog_entries.carried(Rejection('a.jpg', reason, '', 'file:1:2'))
  line = Rejection('a\udcff.jpg', 'corrupt', 'cut short', 'file:1:2')
  assert Rejection.from_json(line.to_json()) == line
  # The errors files of other runs as they were:
  assert 'fingerprint' not in Rejection('a.jpg', 'corrupt', 'x').to_json()


def test_a_catalog_line_gives_back_its_entry_and_the_report_counts_as_the_writer_does():
  entries = [entry('a.jpg', label='cat', objects=('cat', 'dog'), longer_side=1000, stored_bytes=5000, resized=True),
             entry('b\udcff ü.jpg', label=None, labels=('x', 'y'), reencoded=True, damaged=True, rotated=True,
                   quality=('blurry', 'dark'), phash='c3' * 8)]
  text = catalog_entries.text(entries)
  assert text.count('\n') == 2
  assert catalog_entries.entries(text) == entries
  assert entries[0].stratum == 'cat' and entries[1].stratum == ''
  report = run_totals.shard_report('train', 'train-00000.tfrecord', entries, 7000, multi_label=True,
                                      annotations=True, catalog_file='catalog/train-00000.jsonl')
  assert (report.num_examples, report.num_reencoded, report.num_resized, report.num_rotated,
          report.num_damaged_jpeg) == (2, 1, 1, 1, 1)
  assert report.classes == {'x': 1, 'y': 1} and report.objects == {'cat': 1, 'dog': 1}
  assert report.longer_side_px == {'512': 1, '32': 1} and report.kib == {'4': 1, '1': 1}
  assert report.quality == {'blurry': {'': 1}, 'dark': {'': 1}}


def test_a_catalog_line_of_a_version_without_colours_flags_or_hashes_reads_as_raising_none_and_hashing_none():
  line = json.loads(catalog_entries.line(entry('a.jpg', quality=('dark',), phash='0f' * 8, colour='3c' * 8)))
  without_colour = json.dumps(line[:-1]) + '\n'  # written before colour signatures were kept
  assert catalog_entries.parse(without_colour) == entry('a.jpg', quality=('dark',), phash='0f' * 8, colour='')
  without_hash = json.dumps(line[:-2]) + '\n'  # written before perceptual hashes were kept
  assert catalog_entries.parse(without_hash) == entry('a.jpg', quality=('dark',), phash='')
  older = json.dumps(line[:-3]) + '\n'  # written before the flags were
  assert catalog_entries.parse(older) == entry('a.jpg') and entry('a.jpg').quality == ()
  assert entry('a.jpg').phash == entry('a.jpg').colour == ''


@pytest.mark.parametrize('kept, new', [({}, 100), ({'train': 80, 'validation': 10, 'test': 10}, 50),
                                       ({'train': 100}, 30), ({'train': 10, 'validation': 40}, 200),
                                       ({'train': 0, 'validation': 5, 'test': 0}, 1)])
def test_new_images_bring_each_split_back_to_its_fraction(kept, new):
  fractions = splitting.fractions_after(SPEC, kept, new)
  assert abs(sum(fractions) - 1) < 1e-9 and all(f >= 0 for f in fractions)
  after = {name: kept.get(name, 0) + fraction * new for name, fraction in zip(SPEC.names, fractions)}
  total = sum(kept.values()) + new
  for name, target in zip(SPEC.names, SPEC.fractions):
    lacking = target * total - kept.get(name, 0)
    if lacking >= 0:  # a split that lacks gets what it lacks, or its share of what there is
      assert after[name] <= target * total + 1e-6
    else:  # one that holds more than its share gets nothing
      assert after[name] == kept[name]
  if all(target * total >= kept.get(name, 0) for name, target in zip(SPEC.names, SPEC.fractions)):
    assert all(abs(after[name] / total - target) < 1e-9 for name, target in zip(SPEC.names, SPEC.fractions))


def test_groups_of_new_images_fill_what_each_class_lacks():
  """Through the assignment itself: a class whose earlier images are all in train gets its new
  ones in validation and test until they hold their share."""
  records = [values.image_record(f'new{i}.jpg') for i in range(40)]
  groups = [splitting.group_duplicates([record], False)[0] for record in records]
  placed = {'cat': splitting.hash_order.key_offsets({'00': len(groups)})}
  kept = {'cat': {'train': 160}}
  splits = [record.split for record in splitting.assign_splits('00', groups, SPEC, placed, kept)]
  assert splits.count('validation') == splits.count('test') == 20


def test_new_classes_come_after_the_earlier_ones():
  extended = labels.extended_labels(['dog', 'cat', '10'], ['cat', 'bird', 'ant', 'dog'])
  assert extended == ['dog', 'cat', '10', 'ant', 'bird']
  assert labels.extended_labels(['2', '1'], ['10', '3']) == ['2', '1', '3', '10']


def shard(name: str, num_bytes: int, index_file: bool = False) -> Shard:
  return Shard(file=name, num_examples=1, num_bytes=num_bytes,
               index_file=output_layout.index_file(name) if index_file else None,
               catalog_file=output_layout.catalog_file(name))


def record_with(splits):
  """A run record of these shards, per split."""
  return values_record([ShardReport(split=name, file=item.file, num_examples=item.num_examples,
                                    num_bytes=item.num_bytes, classes={'cat': item.num_examples},
                                    index_file=item.index_file, catalog_file=item.catalog_file)
                        for name, shards in splits.items() for item in shards])


def test_small_shards_merge_only_once_a_split_holds_two_and_only_into_full_ones():
  target = 1000
  earlier = record_with({
      'train': [shard('train-00000.tfrecord', 900), shard('train-00001.tfrecord', 300),
                shard('train-00002.tfrecord', 950), shard('train-00003.tfrecord', 400),
                shard('train-00004.tfrecord', 350), shard('train-00005.tfrecord', 200)],
      'validation': [shard('validation-00000.tfrecord', 100), shard('validation-00001.tfrecord', 900)]})
  merges = incremental_update.merges(earlier, target)
  assert merges == [incremental_update.Merge('train', 'train-00001.tfrecord',
                                             ('train-00001.tfrecord', 'train-00003.tfrecord'), 'train-00001.tfrecord'),
                    incremental_update.Merge('train', 'train-00004.tfrecord',
                                             ('train-00004.tfrecord', 'train-00005.tfrecord'), 'train-00004.tfrecord')]
  decision = incremental_update.Decision.update(earlier, tuple(merges))
  numbering = decision.numbered
  assert numbering['train'] == incremental_update.Numbering(6, (3, 5))
  assert [numbering['train'].index(i) for i in range(4)] == [3, 5, 6, 7]
  assert [numbering['validation'].index(i) for i in range(2)] == [2, 3]
  assert decision.merged_into['train-00005.tfrecord'] == 'train-00004.tfrecord'


def test_an_update_knows_the_records_it_keeps_and_the_look_alikes_among_them():
  earlier = record_with({'train': [shard('train-00000.tfrecord', 900), shard('train-00001.tfrecord', 300)]})
  decision = incremental_update.Decision.update(earlier)
  assert (decision.catalogued, decision.look_alikes) == (earlier.num_examples, 0) and earlier.num_examples
  near = run_record.NearDuplicates(distance=10, num_groups=0, num_images=0, removed=False, groups=[],
                                   left_out={'look_alike_images': 700, 'look_alike_sets': 3})
  decision = incremental_update.Decision.update(dataclasses.replace(earlier, near_duplicates=near))
  assert (decision.catalogued, decision.look_alikes) == (earlier.num_examples, 700)


def test_gaps_close_by_moving_the_last_shards_with_their_index_and_catalog():
  shards = [shard('train-00000.tfrecord', 1, True), shard('train-00002.tfrecord', 1, True),
            shard('train-00004.tfrecord', 1, True), shard('train-00005.tfrecord', 1, True)]
  assert incremental_update.gap_moves(shards) == [
      ('train-00005.tfrecord', 'train-00001.tfrecord'), ('train-00005.tfrecord.idx', 'train-00001.tfrecord.idx'),
      ('catalog/train-00005.jsonl', 'catalog/train-00001.jsonl'),
      ('train-00004.tfrecord', 'train-00003.tfrecord'), ('train-00004.tfrecord.idx', 'train-00003.tfrecord.idx'),
      ('catalog/train-00004.jsonl', 'catalog/train-00003.jsonl')]
  assert incremental_update.gap_moves(shards[:1]) == []
  totals = run_totals.WrittenTotals()
  for item in shards:
    totals.add_shard(ShardReport(split='train', file=item.file, num_examples=1, num_bytes=1,
                                 catalog_file=item.catalog_file, index_file=item.index_file))
  totals.add_shard(ShardReport(split='train', file='train-00006.tfrecord', num_examples=0, num_bytes=0))
  incremental_update.close_gaps(totals)
  assert sorted(s.file for s in totals.splits['train'].shards) == [f'train-{i:05d}.tfrecord' for i in range(4)]


def test_an_updated_datasets_totals_are_the_earlier_ones_with_what_the_run_wrote_in_any_grouping():
  """Earlier shards 0-3; the run writes 1 again (a record fewer), merges 3 into 2, and writes 4:
  the totals equal those of the shards as they are now, however the combiner groups the reports."""
  def report(name, classes, replaced=False, rewritten=False):
    count = sum(classes.values())
    return ShardReport(split='train', file=name, num_examples=count, num_bytes=10 * count,
                       classes=classes, longer_side_px={'32': count}, kib={'1': count},
                       num_reencoded=1, replaced=replaced, rewritten=rewritten)
  earlier = {f'train-{i:05d}.tfrecord': report(f'train-{i:05d}.tfrecord', {'cat': 2, 'dog': i}) for i in range(4)}
  record = values_record(earlier.values())
  written = [report('train-00001.tfrecord', {'cat': 2}, rewritten=True),
             dataclasses.replace(earlier['train-00001.tfrecord'], replaced=True),
             report('train-00002.tfrecord', {'cat': 4, 'dog': 5}, rewritten=True),
             dataclasses.replace(earlier['train-00002.tfrecord'], replaced=True),
             dataclasses.replace(earlier['train-00003.tfrecord'], replaced=True),
             report('train-00004.tfrecord', {'bird': 3})]
  now = [earlier['train-00000.tfrecord'], written[0], written[2], written[5]]
  expected = run_totals.written_totals(now)
  rng = random.Random(5)
  for _ in range(10):
    rng.shuffle(written)
    cut = rng.randint(0, len(written))
    delta = run_totals.written_totals(written[:cut]).add(run_totals.written_totals(written[cut:]))
    dataset = run_totals.WrittenTotals.of_record(record).add(delta, replace=True)
    split, want = dataset.splits['train'], expected.splits['train']
    assert (split.num_examples, split.num_bytes, split.classes, split.kib) == (
        want.num_examples, want.num_bytes, want.classes, want.kib)
    assert sorted(s.file for s in split.shards) == sorted(s.file for s in want.shards)
    assert dataset.num_reencoded == expected.num_reencoded


def values_record(reports):
  return run_totals.build(written=run_totals.written_totals(reports), labels=['cat', 'dog', 'bird'],
                          errors_by_reason={}, num_errors_files=1,
                          duplicates={'num_groups': 0, 'num_extra_copies': 0, 'groups': []}, dedupe=False,
                          num_removed=0, settings={'compression': 'none', 'schema': 'default'}, runner='DirectRunner')


def test_only_an_incremental_output_made_with_the_same_options_is_updated():
  settings = values.settings(incremental=True)
  record = dataclasses.replace(values_record([]), options={**settings.as_dict(), 'runner': 'DirectRunner'})
  assert incremental_update.decide(None, settings, HASH).full_conversion == 'the output holds no complete dataset yet'
  decision = incremental_update.decide(record, settings, HASH)
  assert decision.updates and decision.labels == ('cat', 'dog', 'bird') and not decision.full_conversion
  plain = dataclasses.replace(record, options={**record.options, 'incremental': None})
  assert 'not written with --incremental' in incremental_update.decide(plain, settings, HASH).full_conversion
  other = values.settings(incremental=True, dedupe=True, compression='gzip')
  assert (incremental_update.decide(record, other, HASH).full_conversion
          == "--dedupe, --compression differ from the earlier run's")
  # The output's own options do not count: where it is, how many reads are in flight.
  assert incremental_update.decide(record, values.settings(incremental=True, output='/other',
                                                           read_threads=3), HASH).updates


def test_an_output_hashed_before_mirror_images_hashed_alike_is_converted_again():
  """Its catalog's hashes of images whose right side outweighs their left are of the other
  facing: a new copy of one would not be found near it. Without near copies nothing compares
  them, and the output is updated."""
  settings = values.settings(incremental=True)
  near = run_record.NearDuplicates(distance=10, num_groups=0, num_images=0, removed=False, groups=[])
  record = dataclasses.replace(values_record([]), options={**settings.as_dict(), 'runner': 'DirectRunner'},
                               near_duplicates=near)
  assert near.hash_name == run_record.EARLIER_HASH != perceptual_hash.NAME
  assert 'another way' in incremental_update.decide(record, settings, HASH).full_conversion
  named = dataclasses.replace(record, near_duplicates=dataclasses.replace(near, hash=perceptual_hash.NAME))
  assert incremental_update.decide(named, settings, HASH).updates
  off = values.settings(incremental=True, near_copies='off')
  unnamed_off = dataclasses.replace(record, options={**off.as_dict(), 'runner': 'DirectRunner'})
  assert incremental_update.decide(unnamed_off, off, HASH).updates
