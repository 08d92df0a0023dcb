"""reader.load and the tf.Transform output, used the way training code uses them."""
import os
import random

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft

from beam_pipeline import reader
from helpers import photos
from helpers.commands import convert as run
from helpers.dataset_reader import read_output


@pytest.fixture(scope='module')
def converted(tmp_path_factory):
  root = tmp_path_factory.mktemp('converted')
  rng = random.Random(2)
  files = {f'{label}/{i}.jpg': photos.jpeg(rng.randrange(2**32), rng.randrange(30, 60), 40)
           for label in ('ant', 'bee', 'cat') for i in range(30)}
  files['bee/odd.png'] = photos.encode(photos.image(2, 20, 20, 'RGBA'), 'PNG')
  photos.write_files(root / 'in', files)
  assert run(f'--input={root}/in', f'--output={root}/out', '--splits=train=0.8,validation=0.2',
             '--image_size=32') == 0
  return str(root / 'out')


def _tiny_model(image_size):
  model = tf.keras.Sequential([
      tf.keras.Input((image_size, image_size, 3)),
      tf.keras.layers.Conv2D(4, 3, activation='relu'),
      tf.keras.layers.GlobalAveragePooling2D(),
      tf.keras.layers.Dense(3)])
  model.compile('adam', tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  return model


def test_reader_feeds_model_fit(converted):
  dataset = reader.load(converted, 'train', image_size=32, batch_size=8, shuffle_buffer=64, seed=1)
  images, labels = next(iter(dataset))
  assert images.shape == (8, 32, 32, 3) and images.dtype == tf.float32
  assert 0.0 <= float(tf.reduce_min(images)) and float(tf.reduce_max(images)) <= 1.0
  info = reader.run_record(converted)
  assert sum(len(y) for _, y in dataset) == info.splits['train'].num_examples
  history = _tiny_model(32).fit(dataset, validation_data=reader.load(converted, 'validation', image_size=32),
                                epochs=1, verbose=0)
  assert np.isfinite(history.history['loss'][0])


def test_reader_refuses_an_incomplete_output(converted, tmp_path):
  (tmp_path / 'train-00000-of-00001.tfrecord').write_bytes(b'')
  with pytest.raises(FileNotFoundError, match='not a completed conversion'):
    reader.load(str(tmp_path), 'train')
  with pytest.raises(ValueError, match='no split'):
    reader.load(converted, 'test')


def test_transform_layer_matches_labels_txt_and_trains(converted):
  info, records = read_output(converted)
  output = tft.TFTransformOutput(converted)
  layer = output.transform_features_layer()
  raw = {'image/encoded': tf.constant([r['image/encoded'] for r in records['train']]),
         'image/class/text': tf.constant([r['image/class/text'] for r in records['train']])}
  transformed = layer(raw)
  assert transformed['image'].shape == (len(records['train']), 32, 32, 3)
  expected = [r['image/class/label'] for r in records['train']]
  assert transformed['label'].numpy().tolist() == expected  # ids agree with labels.txt
  assert set(output.raw_feature_spec()) == {'image/encoded', 'image/class/text'}
  vocabulary = open(os.path.join(output.transform_savedmodel_dir, 'assets', 'class_labels.txt')).read()
  assert vocabulary == open(os.path.join(converted, 'labels.txt')).read() == 'ant\nbee\ncat\n'

  feature_spec = output.raw_feature_spec()
  train_files = [os.path.join(converted, s['file']) for s in info['splits']['train']['shards']]
  dataset = (tf.data.TFRecordDataset(train_files).batch(16)
             .map(lambda batch: tf.io.parse_example(batch, feature_spec))
             .map(lambda raw_batch: layer(raw_batch))
             .map(lambda t: (t['image'], t['label'])))
  history = _tiny_model(32).fit(dataset, epochs=1, verbose=0)
  assert np.isfinite(history.history['loss'][0])


def test_transform_vocabulary_is_labels_txt_even_for_a_class_with_no_training_images(tmp_path):
  """A manifest puts every eel in validation: the graph's ids still follow labels.txt,
  and its schema gives the label the range of three classes."""
  rng = random.Random(4)
  rows = []
  for i, (label, split) in enumerate([('cat', 'TRAIN'), ('dog', 'TRAIN'), ('eel', 'VALIDATION')] * 2):
    photos.write_files(tmp_path / 'in', {f'{i}.jpg': photos.jpeg(rng.randrange(2**32), 30, 20)})
    rows.append(f'{split},in/{i}.jpg,{label}')
  (tmp_path / 'data.csv').write_text('\n'.join(rows) + '\n')
  assert run(f'--input={tmp_path}/data.csv', f'--output={tmp_path}/out', '--image_size=8') == 0
  output = tft.TFTransformOutput(str(tmp_path / 'out'))
  _, records = read_output(str(tmp_path / 'out'))
  layer = output.transform_features_layer()
  for split in ('train', 'validation'):
    raw = {'image/encoded': tf.constant([r['image/encoded'] for r in records[split]]),
           'image/class/text': tf.constant([r['image/class/text'] for r in records[split]])}
    assert layer(raw)['label'].numpy().tolist() == [r['image/class/label'] for r in records[split]]
  assert {r['image/class/label'] for r in records['validation']} == {2}
  domain = output.transformed_domains()['label']
  assert (domain.min, domain.max) == (-1, 2)  # -1: a text labels.txt does not hold
