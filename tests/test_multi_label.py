"""--multi_label end to end: JSONL and CSV manifests whose rows name 1-3 labels, converted,
then read back record by record, with reader.load, TensorFlow Datasets and the tf.Transform graph."""
import collections
import json
import random

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft

from beam_pipeline import reader
from helpers import photos
from helpers.commands import convert
from helpers.dataset_reader import read_errors, read_output

CLASSES = ('cat', 'dog', 'eel', 'fox')
COUNT = 40


def _labels(rng: random.Random):
  """1-3 labels, sometimes one repeated (it counts once), in no particular order."""
  chosen = rng.sample(CLASSES, rng.randint(1, 3))
  return chosen + chosen[:1] if rng.random() < 0.2 else chosen


@pytest.fixture(scope='module')
def manifests(tmp_path_factory):
  """(root, {file name: its labels, unique, in the row's order}); the images, a JSONL manifest and a
  header-less CSV one whose first row has three labels (four cells, which a detection row also has)."""
  root = tmp_path_factory.mktemp('multi')
  rng = random.Random(5)
  files = {f'imgs/{i}.jpg': data for i, data in enumerate(photos.jpegs(COUNT, seed=3))}
  photos.write_files(root, files)
  rows = {name: _labels(rng) for name in files}
  rows['imgs/0.jpg'] = ['fox', 'cat', 'dog']
  with open(root / 'm.jsonl', 'w') as f:
    for i, (name, labels) in enumerate(rows.items()):
      f.write(json.dumps({'uri': name, ('label' if i % 2 else 'labels'): labels}) + '\n')
  with open(root / 'm.csv', 'w') as f:
    f.writelines(','.join([name, *labels]) + '\n' for name, labels in rows.items())
  return root, {name: list(dict.fromkeys(labels)) for name, labels in rows.items()}


@pytest.fixture(scope='module', params=['m.jsonl', 'm.csv'])
def converted(request, manifests):
  root, expected = manifests
  out = root / f'out-{request.param}'
  assert convert(f'--input={root}/{request.param}', f'--output={out}', '--multi_label',
                 '--splits=train=0.8,validation=0.2', '--image_size=16') == 0
  return str(out), {str(root / name): labels for name, labels in expected.items()}


def _ids(record):
  value = record['image/class/label']
  return value if isinstance(value, list) else [value]


def _texts(record):
  value = record['image/class/text']
  return [text.decode() for text in (value if isinstance(value, list) else [value])]


def test_every_record_holds_its_sorted_ids_and_their_texts(converted):
  out, expected = converted
  info, records = read_output(out)
  assert info['labels'] == list(CLASSES) and info['options']['multi_label'] is True
  with open(f'{out}/labels.txt') as f:
    assert f.read() == ''.join(name + '\n' for name in CLASSES)
  seen = set()
  for split, in_split in records.items():
    counts = collections.Counter()
    for record in in_split:
      labels = expected[record['image/filename'].decode()]
      assert _ids(record) == sorted(CLASSES.index(label) for label in labels)
      assert _texts(record) == [CLASSES[i] for i in _ids(record)]
      counts.update(labels)
      seen.add(record['image/filename'])
    assert info['splits'][split]['classes'] == dict(counts), split
  assert len(seen) == COUNT and sorted(records) == ['train', 'validation']
  assert info['num_errors'] == 0


def test_reader_load_gives_multi_hot_float_labels(converted):
  out, expected = converted
  _, records = read_output(out)
  assert sorted(records) == ['train', 'validation'] and all(records.values())  # an empty output reads nothing
  for split, in_split in records.items():
    hot = [labels.numpy() for _, labels in reader.load(out, split, image_size=16, batch_size=8)]
    assert all(batch.dtype == np.float32 and batch.shape[1] == len(CLASSES) for batch in hot)
    read = collections.Counter(tuple(row) for row in np.concatenate(hot).tolist())
    wanted = collections.Counter(tuple(float(name in expected[r['image/filename'].decode()]) for name in CLASSES)
                                 for r in in_split)
    assert read == wanted and sum(read.values()) == len(in_split), split


def test_tensorflow_datasets_reads_the_labels_as_a_sequence_of_class_label(converted):
  import tensorflow_datasets as tfds  # pylint: disable=import-outside-toplevel
  out, expected = converted
  builder = tfds.builder_from_directory(out)
  assert builder.info.features['image/class/label'].feature.names == list(CLASSES)
  assert builder.info.supervised_keys is None  # several labels a record: no (image, label)
  read = {}
  for split in ('train', 'validation'):
    for example in tfds.as_numpy(builder.as_dataset(split=split)):
      read[example['image/filename'].decode()] = (example['image/class/label'].tolist(),
                                                  [text.decode() for text in example['image/class/text']])
  assert read == {name: (sorted(CLASSES.index(label) for label in labels), sorted(labels, key=CLASSES.index))
                  for name, labels in expected.items()}


def test_the_transform_graph_gives_a_multi_hot_label(converted):
  out, _ = converted
  _, records = read_output(out)
  train = records['train']
  layer = tft.TFTransformOutput(out).transform_features_layer()
  transformed = layer({'image/encoded': tf.constant([r['image/encoded'] for r in train]),
                       'image/class/label': tf.ragged.constant([_ids(r) for r in train], tf.int64).to_sparse()})
  assert transformed['image'].shape == (len(train), 16, 16, 3)
  assert transformed['label'].dtype == tf.float32
  assert transformed['label'].numpy().tolist() == [[float(i in _ids(r)) for i in range(len(CLASSES))] for r in train]


def test_without_multi_label_rows_of_several_labels_are_rejected_and_say_so(manifests, tmp_path):
  root, expected = manifests
  out = tmp_path / 'out'
  assert convert(f'--input={root}/m.jsonl', f'--output={out}', '--max_error_fraction=1') == 0
  info, records = read_output(str(out))
  several = [i for i, labels in enumerate(expected.values(), start=1) if len(labels) > 1]
  assert several and info['num_errors'] == len(several)
  for error in read_errors(str(out)):
    assert error['reason'] == 'bad_manifest_row' and error['detail'].endswith('use --multi_label'), error
  assert sorted(int(e['uri'].rpartition(' ')[2]) for e in read_errors(str(out))) == several
  assert sum(len(split) for split in records.values()) == COUNT - len(several)


def test_verify_and_the_contact_sheet_read_a_multi_label_output(converted, tmp_path):
  from beam_pipeline import cli  # pylint: disable=import-outside-toplevel
  out, _ = converted
  assert cli.main(['verify', out]) == 0
  assert cli.main(['inspect', out, f'--contact_sheet={tmp_path}/sheet.png']) == 0
  assert (tmp_path / 'sheet.png').stat().st_size > 0


def test_multi_label_needs_a_manifest_in_the_default_schema(manifests, tmp_path):
  from beam_pipeline.cli import options  # pylint: disable=import-outside-toplevel
  from beam_pipeline.core.user_errors import UsageError  # pylint: disable=import-outside-toplevel
  root, _ = manifests
  with pytest.raises(UsageError, match='--multi_label reads several labels per row of a CSV or JSONL manifest'):
    options.parse([f'--input={root}/imgs', f'--output={tmp_path}/out', '--multi_label'])
  with pytest.raises(UsageError, match='--schema=default'):
    options.parse([f'--input={root}/m.csv', f'--output={tmp_path}/out', '--multi_label', '--schema=simple'])
  assert options.parse([f'--input={root}/m.csv', f'--output={tmp_path}/out', '--multi_label']).settings.multi_label
