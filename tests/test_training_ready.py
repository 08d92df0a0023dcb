"""Training-ready output end to end: stratified reproducible splits, no leakage, mixed shards, determinism."""
import itertools
import json
import random
from collections import Counter
from pathlib import Path
from typing import Dict, Tuple

import pytest
import tensorflow as tf

from helpers import photos
from helpers.commands import convert as run
from helpers.dataset_reader import output_files, read_errors, read_output

CLASSES = ('cat', 'dog', 'fox')


def _class_sorted_set(root: Path, per_class: int, duplicates: int = 0, seed: int = 0,
                      across: bool = True) -> Tuple[Dict[str, bytes], Dict[str, str]]:
  """Tiny photos, listed class by class; `duplicates` files copied under new names, some into other
  classes, or with ``across`` False into their own."""
  rng = random.Random(seed)
  files = photos.labelled(CLASSES, per_class, seed, size=(24, 20), name='{label}/{label}.{i:05d}.jpg')
  originals = sorted(files)
  planted = {}
  for i in range(duplicates):
    source = originals[rng.randrange(len(originals))]
    target = f'{CLASSES[i % len(CLASSES)] if across else source.split("/")[0]}/copy-{i}.jpg'
    files[target] = files[source]
    planted[target] = source
  photos.write_files(root, files)
  return files, planted


@pytest.fixture(scope='module')
def class_sorted_output(tmp_path_factory) -> Tuple[Path, Dict[str, bytes], Dict[str, str]]:
  """(root, files, planted copies): 3,000 photos of three classes, 1,000 each, listed class by
  class in root/in, 30 of them copies (some into other classes), converted into root/out, split
  80/20 into shards of about 600 records. One conversion for the two tests that only read it."""
  root = tmp_path_factory.mktemp('class-sorted')
  files, planted = _class_sorted_set(root / 'in', per_class=990, duplicates=30)
  # The content-hash split alone: sample_set's photos share one gradient, so to a perceptual
  # hash they look alike and near-copy groups would chain them (test_near_duplicates has those).
  assert run(f'--input={root}/in', f'--output={root}/out', '--splits=train=0.8,validation=0.2',
             '--target_shard_mb=0.8', '--near_copies=off', '--skip_transform') == 0
  return root, files, planted


def test_splits_are_stratified_and_copies_never_leak(class_sorted_output):
  root, files, planted = class_sorted_output
  out = root / 'out'
  info, records = read_output(out)
  split_of = {r['image/filename'].decode(): split for split, rs in records.items() for r in rs}
  assert len(split_of) == len(files)  # copies are kept without --dedupe
  for label in CLASSES:
    in_class = [split for uri, split in split_of.items() if f'/{label}/' in uri]
    assert abs(in_class.count('validation') / len(in_class) - 0.2) <= 0.01, label
  for copy, source in planted.items():
    assert split_of[str(root / 'in' / copy)] == split_of[str(root / 'in' / source)]
  listed = info['duplicates']
  assert listed['num_extra_copies'] == len(planted) and not listed['removed']
  assert all(len(group) > 1 for group in listed['groups'])

  # The seeds' recipe sees every class in every shuffled batch of a class-sorted input.
  spec = {'image/encoded': tf.io.FixedLenFeature([], tf.string),
          'image/class/label': tf.io.FixedLenFeature([], tf.int64)}
  files_ = [str(out / s['file']) for s in info['splits']['train']['shards']]
  dataset = (tf.data.TFRecordDataset(files_).map(lambda r: tf.io.parse_single_example(r, spec))
             .map(lambda r: (tf.image.resize(tf.image.decode_jpeg(r['image/encoded'], channels=3), (150, 150)),
                             r['image/class/label']))
             .shuffle(256).batch(64, drop_remainder=True))
  batches = [set(labels.numpy()) for _, labels in dataset]
  assert len(batches) == info['splits']['train']['num_examples'] // 64
  assert all(len(labels) == len(CLASSES) for labels in batches)


def test_every_shard_mixes_the_classes_as_its_split_does(class_sorted_output):
  """Expected: in every shard, no run of one class longer than a random order gives, and each
  class's share within sampling noise of its split's. The shards' order keys hash the files'
  paths, which differ from run to run (the temporary folder), so the bounds are random events
  and must be rare ones: in 600 records of three classes equally likely, a run longer than 18
  has a chance of about 1 in a million, a share five standard deviations off about 1 in 1.5
  million (at three, one of the run's 15 shares fell outside about one run in 25). A class-sorted
  shard misses both by far: runs of hundreds, shares of 0 or 1."""
  root, files, _ = class_sorted_output
  info, records = read_output(root / 'out')
  assert len(info['splits']['train']['shards']) >= 3 and info['num_examples'] == len(files) == 3000
  for split, split_records in records.items():
    split_labels = [r['image/class/text'] for r in split_records]
    split_shares = {label: split_labels.count(label) / len(split_labels) for label in set(split_labels)}
    assert len(split_shares) == len(CLASSES), split
    for shard, in_shard in itertools.groupby(split_records, key=lambda r: r['_shard']):
      labels = [r['image/class/text'] for r in in_shard]
      longest = max(len(list(run_)) for _, run_ in itertools.groupby(labels))
      assert longest <= 18, (shard, longest)
      for label, split_share in split_shares.items():
        share = labels.count(label) / len(labels)
        assert abs(share - split_share) <= 5 * (split_share * (1 - split_share) / len(labels)) ** 0.5, (shard, label,
                                                                                                      share)


def test_dedupe_keeps_one_copy_and_dropped_copies_are_no_errors(tmp_path):
  """One file in ten a copy in its class, with the default --max_error_fraction (0.05). Expected:
  the run completes; each dropped copy listed with the rejections (reason duplicate, naming the
  copy kept), counted under duplicates, not as an error. (A copy in another class is one
  picture under two labels: tests/test_checks_nothing_lost.py has those.)"""
  files, planted = _class_sorted_set(tmp_path / 'in', per_class=40, duplicates=14, seed=3, across=False)
  assert len(planted) / len(files) >= 0.1
  assert run(f'--input={tmp_path}/in', f'--output={tmp_path}/out', '--dedupe') == 0
  info, records = read_output(tmp_path / 'out')
  errors = read_errors(tmp_path / 'out')
  assert info['num_examples'] + len(errors) == len(files)
  assert {e['reason'] for e in errors} == {'duplicate'} and len(errors) == len(planted)
  assert info['num_errors'] == 0 and info['errors_by_reason'] == {}
  assert info['duplicates']['num_removed'] == len(planted) and info['duplicates']['removed']
  hashes = Counter(r['image/key/sha256'] for r in records['train'])
  assert max(hashes.values()) == 1


def test_split_folders_and_default_split(tmp_path):
  photos.write_files(tmp_path / 'in', {f'{split}/{name}': data for seed, split in enumerate(('train', 'val'))
                                       for name, data in photos.labelled(('a', 'b'), 3, seed, (24, 20)).items()})
  assert run(f'--input={tmp_path}/in', f'--output={tmp_path}/out', '--splits=train=0.5,test=0.5') == 0
  info, records = read_output(tmp_path / 'out')
  assert {split: len(rs) for split, rs in records.items()} == {'train': 6, 'validation': 6}
  assert info['labels'] == ['a', 'b']


def test_output_is_byte_identical_across_runs_and_worker_counts(tmp_path):
  _class_sorted_set(tmp_path / 'in', per_class=60, duplicates=4, seed=9)
  (tmp_path / 'in' / 'broken.jpg').write_bytes(b'\xff\xd8 not really')
  runs = {'first': [], 'again': [], 'two_processes': ['--direct_num_workers=2',
                                                        '--direct_running_mode=multi_processing']}
  contents = {}
  for name, extra in runs.items():
    out = tmp_path / name
    assert run(f'--input={tmp_path}/in', f'--output={out}', '--splits=train=0.7,validation=0.3',
               '--target_shard_mb=0.005', *extra) == 0
    info = json.load(open(out / 'beam_pipeline.json'))
    info.pop('created')
    info['options'].pop('output')
    files = {f: (out / f).read_bytes() for f in output_files(out)[0] if f != 'beam_pipeline.json'}
    contents[name] = (info, files)
  first_info, first_files = contents['first']
  assert len([f for f in first_files if f.startswith('train-')]) > 1
  for name in ('again', 'two_processes'):
    info, files = contents[name]
    assert info == first_info, name
    assert files == first_files, name
