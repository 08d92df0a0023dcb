"""End to end on the DirectRunner: real files in, TFRecords read back with TensorFlow."""
import hashlib
import json
import os
import random

import pytest
import tensorflow as tf

from beam_pipeline import cli, reader
from helpers import photos
from helpers.commands import convert
from helpers.dataset_reader import output_files, read_errors, read_output
from helpers.image_cases import cases

TRANSFORM_DIRS = ['metadata', 'transform_fn', 'transformed_metadata']


def test_every_odd_input_is_written_decodable_or_rejected_with_its_reason(tmp_path):
  table = cases()
  photos.write_files(tmp_path / 'in', {f'odd/{name}': case.data for name, case in table.items()})
  assert convert(f'--input={tmp_path}/in', f'--output={tmp_path}/out', '--max_error_fraction=1') == 0

  info, records = read_output(tmp_path / 'out')
  written = {os.path.basename(r['image/filename'].decode()): r for r in records['train']}
  rejected = {os.path.basename(e['uri']): e['reason'] for e in read_errors(tmp_path / 'out')}
  assert len(written) == len(records['train'])  # each input at most once
  assert set(written) | set(rejected) == set(table) and not set(written) & set(rejected)
  for name, case in table.items():
    if case.reason:
      assert rejected.get(name) == case.reason, name
      continue
    record = written[name]
    image = record['image/encoded']
    shape = tf.io.decode_image(image, channels=3, expand_animations=False).shape
    assert shape == (record['image/height'], record['image/width'], 3), name
    assert record['image/format'].decode() == case.format, name
    assert record['image/channels'] == case.channels, name
    assert record['image/key/sha256'].decode() == hashlib.sha256(image).hexdigest()
    assert (image == case.data) != case.reencoded, name
    assert (record['image/class/label'], record['image/class/text']) == (0, b'odd')
  assert info['num_errors'] == len(rejected)
  assert sum(info['errors_by_reason'].values()) == len(rejected)
  assert open(tmp_path / 'out' / 'labels.txt').read() == 'odd\n'
  assert output_files(tmp_path / 'out') == ([
      'beam_pipeline.json', 'dataset_info.json', 'errors-00000-of-00001.jsonl', 'features.json',
      'image.class.label.labels.txt', 'labels.txt', 'train-00000-of-00001.tfrecord'], TRANSFORM_DIRS)


def test_a_damaged_photo_collection_loses_nothing(tmp_path):
  """A few thousand photos, ~1% damaged: every good one once with its label, every bad one rejected."""
  rng = random.Random(7)
  good, damaged = {}, {}
  for i, data in enumerate(photos.jpegs(2000, seed=1, size=(40, 32))):
    label = ('Cat', 'Dog', 'Bird')[i % 3]
    name = f'PetImages/{label}/{i}.jpg'
    if i % 100 == 42:
      damaged[name] = rng.choice([data[:len(data) // 2], b'', b'<html>gone</html>', bytes(300)])
    else:
      good[name] = (data, label)
  photos.write_files(tmp_path, {name: data for name, (data, _) in good.items()} | damaged)

  assert convert(f'--input={tmp_path}/PetImages', f'--output={tmp_path}/out') == 0

  info, records = read_output(tmp_path / 'out')
  labels = info['labels']
  assert labels == ['Bird', 'Cat', 'Dog']
  seen = {}
  for record in records['train']:
    uri = record['image/filename'].decode()
    assert uri not in seen
    seen[uri] = labels[record['image/class/label']]
    assert record['image/class/text'].decode() == seen[uri]
  assert seen == {str(tmp_path / name): label for name, (_, label) in good.items()}
  assert {e['uri'] for e in read_errors(tmp_path / 'out')} == {str(tmp_path / n) for n in damaged}
  assert info['num_examples'] == len(good) and info['num_errors'] == len(damaged)


def test_glob_with_regex_labels(tmp_path):
  images = photos.jpegs(6)
  photos.write_files(tmp_path / 'imgs', {'cat.1.jpg': images[0], 'cat.2.jpg': images[1], 'dog.1.jpg': images[2],
                                  'IMG_0001.jpg': images[3], 'dog.2.png.txt': images[4]})
  assert convert(f'--input={tmp_path}/imgs/*.jpg', f'--output={tmp_path}/out', r'--label_source=regex:^([a-z]+)\.',
             '--max_error_fraction=0.5') == 0
  info, records = read_output(tmp_path / 'out')
  assert info['labels'] == ['cat', 'dog']
  assert sorted((r['image/class/text'], r['image/class/label']) for r in records['train']) == [
      (b'cat', 0), (b'cat', 0), (b'dog', 1)]
  assert [(os.path.basename(e['uri']), e['reason']) for e in read_errors(tmp_path / 'out')] == [
      ('IMG_0001.jpg', 'no_label')]


def test_unlabeled_dataset(tmp_path):
  photos.write_files(tmp_path / 'imgs', {f'a/{i}.jpg': d for i, d in enumerate(photos.jpegs(3))})
  assert convert(f'--input={tmp_path}/imgs', f'--output={tmp_path}/out', '--label_source=none') == 0
  info, records = read_output(tmp_path / 'out')
  assert info['labels'] == [] and open(tmp_path / 'out' / 'labels.txt').read() == ''
  assert {(r['image/class/label'], r['image/class/text']) for r in records['train']} == {(-1, b'')}


@pytest.mark.parametrize('header', [True, False])
def test_csv_manifest_with_splits(tmp_path, header):
  images = photos.jpegs(5)
  photos.write_files(tmp_path / 'imgs', {f'{i}.jpg': d for i, d in enumerate(images)})
  rows = ['TRAIN,imgs/0.jpg,cat', 'TRAIN,imgs/1.jpg,dog', 'VALIDATION,imgs/2.jpg,cat',
          f'TEST,{tmp_path}/imgs/3.jpg,dog', 'UNASSIGNED,imgs/missing.jpg,cat']
  (tmp_path / 'data.csv').write_text(('set,uri,label\n' if header else '') + '\n'.join(rows) + '\n')
  assert convert(f'--input={tmp_path}/data.csv', f'--output={tmp_path}/out', '--max_error_fraction=0.5') == 0
  info, records = read_output(tmp_path / 'out')
  assert {split: len(r) for split, r in records.items()} == {'train': 2, 'validation': 1, 'test': 1}
  assert output_files(tmp_path / 'out')[0][-3:] == [
      'test-00000-of-00001.tfrecord', 'train-00000-of-00001.tfrecord', 'validation-00000-of-00001.tfrecord']
  assert [(e['uri'], e['reason']) for e in read_errors(tmp_path / 'out')] == [
      (f'{tmp_path}/imgs/missing.jpg', 'unreadable')]


def test_jsonl_manifest_passes_extra_fields_through(tmp_path):
  images = photos.jpegs(2)
  photos.write_files(tmp_path / 'imgs', {'a.jpg': images[0], 'b.jpg': images[1]})
  lines = [{'uri': 'imgs/a.jpg', 'label': 'cat', 'weight': 0.25, 'source': 'web'},
           {'uri': 'imgs/b.jpg', 'label': 'dog', 'split': 'train', 'image/encoded': 'clash'}]
  (tmp_path / 'data.jsonl').write_text(''.join(json.dumps(line) + '\n' for line in lines))
  assert convert(f'--input={tmp_path}/data.jsonl', f'--output={tmp_path}/out', '--max_error_fraction=0.5') == 0
  _, records = read_output(tmp_path / 'out')
  [record] = records['train']
  assert record['weight'] == 0.25 and record['source'] == b'web'
  assert [e['reason'] for e in read_errors(tmp_path / 'out')] == ['bad_manifest_row']


def test_simple_schema_with_gzip_reads_with_the_seeds_recipe(tmp_path):
  photos.write_files(tmp_path / 'imgs', {f'{c}/{i}.jpg': d for i, d in enumerate(photos.jpegs(20, size=(160, 120)))
                                  for c in ('cat', 'dog') if i % 2 == (c == 'dog')})
  assert convert(f'--input={tmp_path}/imgs', f'--output={tmp_path}/out', '--schema=simple',
             '--compression=gzip') == 0
  info = json.load(open(tmp_path / 'out' / 'beam_pipeline.json'))
  files = [str(tmp_path / 'out' / s['file']) for s in info['splits']['train']['shards']]
  assert all(f.endswith('.tfrecord.gz') for f in files)
  spec = {'image_raw': tf.io.FixedLenFeature([], tf.string), 'label': tf.io.FixedLenFeature([], tf.int64),
          'id': tf.io.FixedLenFeature([], tf.string)}
  dataset = (tf.data.TFRecordDataset(files, compression_type='GZIP')
             .map(lambda r: tf.io.parse_single_example(r, spec))
             .map(lambda r: (tf.image.decode_jpeg(r['image_raw'], channels=3), r['label']))
             .shuffle(256).map(lambda x, y: (tf.image.resize(x, (150, 150)), y)).batch(64))
  batches = list(dataset)
  assert sum(len(y) for _, y in batches) == 20
  assert batches[0][0].shape[1:] == (150, 150, 3)


def test_shard_count_follows_the_target_size(tmp_path):
  images = photos.jpegs(120, size=(120, 100))
  photos.write_files(tmp_path / 'imgs', {f'x/{i}.jpg': d for i, d in enumerate(images)})
  total = sum(map(len, images))
  target_mb = total / 5.5 / 2**20
  assert convert(f'--input={tmp_path}/imgs', f'--output={tmp_path}/out', f'--target_shard_mb={target_mb}') == 0
  info, records = read_output(tmp_path / 'out')
  shards = info['splits']['train']['shards']
  assert [s['file'] for s in shards] == [f'train-{i:05d}-of-00006.tfrecord' for i in range(6)]
  for shard in shards[:-1]:
    assert 0.5 <= shard['num_bytes'] / (target_mb * 2**20) <= 1.5
  assert len(records['train']) == 120
  labels_in_order = [r['image/filename'] for r in records['train']]
  assert labels_in_order != sorted(labels_in_order)  # shuffled by content hash, not listed order


def test_rerun_replaces_the_previous_result_and_refuses_foreign_files(tmp_path, capsys):
  images = photos.jpegs(40, size=(120, 100))
  photos.write_files(tmp_path / 'imgs', {f'x/{i}.jpg': d for i, d in enumerate(images)})
  out = tmp_path / 'out'
  assert convert(f'--input={tmp_path}/imgs', f'--output={out}', '--target_shard_mb=0.05') == 0
  assert len([f for f in os.listdir(out) if f.startswith('train-')]) > 2
  assert convert(f'--input={tmp_path}/imgs', f'--output={out}', '--compression=gzip', '--skip_transform') == 0
  assert output_files(out) == (['beam_pipeline.json', 'errors-00000-of-00001.jsonl', 'labels.txt',
                                'train-00000-of-00001.tfrecord.gz'], [])
  (out / 'notes.txt').write_text('mine')
  capsys.readouterr()
  assert convert(f'--input={tmp_path}/imgs', f'--output={out}') == 2
  message = capsys.readouterr().err
  assert 'notes.txt' in message and message.count('\n') == 1
  assert (out / 'beam_pipeline.json').exists()  # refused before touching anything


def test_error_budget_fails_the_rerun_before_it_writes_and_keeps_the_earlier_output(tmp_path, capsys, monkeypatch):
  """A complete output, then a rerun whose input gained 4 bad files of 10. Expected: exit 1
  with the budget's line, naming the top reasons, a file of each and the budget that would do,
  before a shard is written, and what became of the output; the earlier output still committed,
  read whole by reader.load and passed by verify; a rerun with that budget then commits."""
  files = {f'a/{i}.jpg': d for i, d in enumerate(photos.jpegs(6))}
  photos.write_files(tmp_path / 'in', files)
  out = tmp_path / 'out'
  assert convert(f'--input={tmp_path}/in', f'--output={out}', '--skip_transform') == 0
  committed = (out / 'beam_pipeline.json').read_bytes()
  bad = {f'a/gone{i}.jpg': b'<html>403 Forbidden</html>' for i in range(3)}
  bad['a/empty.jpg'] = b''
  photos.write_files(tmp_path / 'in', bad)
  capsys.readouterr()
  monkeypatch.setattr('beam_pipeline.core.steps.write_shard', lambda *args: pytest.fail('a shard was written'))
  assert convert(f'--input={tmp_path}/in', f'--output={out}', '--max_error_fraction=0.3') == 1
  monkeypatch.undo()
  message = capsys.readouterr().err.strip().splitlines()[-2:]
  assert message[0] == (
      'error: error budget exceeded: 4 of 10 inputs (40.0%) were rejected as they were checked, more than '
      '--max_error_fraction=0.3, so nothing was written; top reasons: not_image 3 (first: '
      f'{tmp_path}/in/a/gone0.jpg), empty 1 (first: {tmp_path}/in/a/empty.jpg); to write the dataset anyway, '
      'rerun with --max_error_fraction=0.4')
  assert message[1] == f'  Nothing was committed: --output={out} still holds its earlier complete dataset, unchanged.'
  assert (out / 'beam_pipeline.json').read_bytes() == committed
  assert sum(len(batch[0]) for batch in reader.load(str(out), batch_size=4)) == 6
  assert cli.main(['verify', str(out)]) == 0
  assert convert(f'--input={tmp_path}/in', f'--output={out}', '--max_error_fraction=0.4') == 0
  assert len(read_errors(out)) == 4


def test_an_output_inside_the_input_is_left_out_of_it(tmp_path):
  """The output directory inside the input directory, converted into twice (the second run
  finds the first one's shards, metadata and tf.Transform graph there). Expected: both runs
  write exactly the photos and reject nothing."""
  photos.write_files(tmp_path / 'data', photos.labelled(('cat', 'dog'), 4, seed=8))
  for _ in range(2):
    assert convert(f'--input={tmp_path}/data', f'--output={tmp_path}/data/tfrecords') == 0
    info, records = read_output(tmp_path / 'data' / 'tfrecords')
    assert info['num_examples'] == 8 and info['num_errors'] == 0
  assert convert('--input=' + str(tmp_path / 'data' / '**.jpg'), f'--output={tmp_path}/data/tfrecords',
                 '--overwrite') == 0  # another --input than the folder the output was made from
  assert read_output(tmp_path / 'data' / 'tfrecords')[0]['num_examples'] == 8


def test_the_seeds_reader_reads_every_record_of_a_conversion_of_mixed_formats(tmp_path):
  """Seed 000's recipe, as written: image_raw/label/id in GZIP, tf.image.decode_jpeg with 3
  channels, cache, shuffle(256), resize to 150, batch(64). decode_jpeg reads JPEG, PNG and
  GIF but not BMP or WebP; by default no record is anything else."""
  table = cases()
  photos.write_files(tmp_path / 'in', {f'odd/{name}': case.data for name, case in table.items()})
  assert convert(f'--input={tmp_path}/in', f'--output={tmp_path}/out', '--schema=simple', '--compression=gzip',
                 '--max_error_fraction=1') == 0
  info = json.load(open(tmp_path / 'out' / 'beam_pipeline.json'))
  files = [str(tmp_path / 'out' / shard['file']) for shard in info['splits']['train']['shards']]
  spec = {'image_raw': tf.io.FixedLenFeature([], tf.string), 'label': tf.io.FixedLenFeature([], tf.int64),
          'id': tf.io.FixedLenFeature([], tf.string)}
  dataset = (tf.data.TFRecordDataset(files, compression_type='GZIP')
             .map(lambda r: tf.io.parse_single_example(r, spec), num_parallel_calls=tf.data.AUTOTUNE)
             .map(lambda r: (tf.cast(tf.image.decode_jpeg(r['image_raw'], channels=3), tf.float32), r['label']),
                  num_parallel_calls=tf.data.AUTOTUNE)
             .cache().shuffle(256)
             .map(lambda image, label: (tf.image.resize(image, (150, 150)), label), num_parallel_calls=tf.data.AUTOTUNE)
             .batch(64))
  assert sum(int(labels.shape[0]) for _, labels in dataset) == info['num_examples'] == len(
      [case for case in table.values() if case.reason is None])
  assert info['num_reencoded'] == len([case for case in table.values() if case.reason is None and case.reencoded])


def test_jpeg_records_at_a_longest_side_are_byte_identical_on_a_rerun(tmp_path):
  images = {f'x/{i}.png': photos.encode(photos.image(i, 90 + 7 * i, 60), 'PNG') for i in range(6)}
  images.update({f'x/{i}.jpg': data for i, data in enumerate(photos.jpegs(6, size=(120, 40)))})
  images['x/small.jpg'] = photos.jpeg(1, 50, 40)
  photos.write_files(tmp_path / 'in', images)
  args = (f'--input={tmp_path}/in', '--image_format=jpeg', '--max_side=64', '--jpeg_quality=90')
  assert convert(*args, f'--output={tmp_path}/one') == 0
  assert convert(*args, f'--output={tmp_path}/two') == 0
  info, records = read_output(tmp_path / 'one')
  assert (info['num_reencoded'], info['num_resized']) == (12, 12)
  assert {key: info['options'][key] for key in ('image_format', 'jpeg_quality', 'max_side')} == {
      'image_format': 'jpeg', 'jpeg_quality': 90, 'max_side': 64}
  for record in records['train']:
    assert record['image/format'] == b'jpeg' and max(record['image/height'], record['image/width']) <= 64
    name = os.path.basename(record['image/filename'].decode())
    if name == 'small.jpg':
      assert record['image/encoded'] == images['x/small.jpg']
      assert (record['image/original_width'], record['image/width']) == (50, 50)
    else:
      assert record['image/original_width'] > record['image/width'] == 64
  for name in output_files(tmp_path / 'one')[0]:
    if name.endswith('.tfrecord'):
      assert (tmp_path / 'one' / name).read_bytes() == (tmp_path / 'two' / name).read_bytes()
