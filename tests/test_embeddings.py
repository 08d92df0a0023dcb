"""--embedding_model end to end: a tiny Keras CNN (random weights, saved here), the real
command on the local path, the Dataflow-style path and an offline Dataflow job, and every
stored embedding checked against the model's own output on the same image."""
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft

from beam_pipeline import cli, reader
from beam_pipeline.pipeline.model_files import fingerprint

from helpers import dataflow_offline, gcs_emulator, models, photos
from helpers.commands import convert, in_process, run_cli
from helpers.dataflow import OPTIONS as DATAFLOW
from helpers.dataset_reader import assert_same_dataset, bucket_files, local_files, read_errors, read_output

EMBEDDING = (f'--embedding_image_size={models.SIZE}', '--embedding_batch_size=5', '--target_shard_mb=0.02',
             '--splits=train=0.75,validation=0.25', '--max_error_fraction=0.5')


def _expected(cnn, image: bytes) -> np.ndarray:
  """The model's output on one image, decoded and resized here as the issue says (not by the
  pipeline's code, nor in the writer's batch)."""
  decoded = tf.io.decode_image(image, channels=3, expand_animations=False)
  resized = tf.image.resize(decoded, [models.SIZE, models.SIZE], method='bilinear')
  return cnn(tf.expand_dims(resized, 0)).numpy()[0]


def _assert_embeddings_are_the_models(cnn, records, image_of) -> None:
  assert records
  for record in records:
    assert record['image/embedding/shape'] == list(models.SHAPE)
    stored = np.array(record['image/embedding'], np.float32).reshape(models.SHAPE)
    np.testing.assert_allclose(stored, _expected(cnn, image_of(record)), rtol=1e-5, atol=1e-5)


@pytest.fixture(scope='module')
def local_conversions(saved, sample_set, tmp_path_factory):
  """The sample set converted on the local path with the model saved ``how``, made once:
  ``local_conversions(how)`` is its output, which the tests only read."""
  outputs = {}

  def output(how: str):
    if how not in outputs:
      out = tmp_path_factory.mktemp(f'local-{how}') / 'out'
      assert convert(f'--input={sample_set}', f'--output={out}', f'--embedding_model={saved[how]}', *EMBEDDING) == 0
      outputs[how] = out
    return outputs[how]
  return output


@pytest.mark.parametrize('how', ['keras', 'export'])
def test_every_stored_embedding_is_the_models_output_on_its_stored_image(cnn, saved, local_conversions, how):
  out = local_conversions(how)
  info, records = read_output(out)
  every = [record for split in records.values() for record in split]
  assert len(every) == 27 and len(info['splits']['train']['shards']) >= 2
  _assert_embeddings_are_the_models(cnn, every, lambda record: record['image/encoded'])
  embedding = info['embedding']
  assert embedding['sha256'] == fingerprint(saved[how])  # what sha256sum gives (test_embedding_model)
  assert (embedding['model'], embedding['output_shape'], embedding['input_size']) == (
      str(saved[how]), list(models.SHAPE), [models.SIZE, models.SIZE, 3])
  assert embedding['images_stored'] and info['options']['embedding_batch_size'] == 5
  assert len(read_errors(out)) == 3  # the sample set's damaged files, rejected as without embeddings
  assert cli.main(['verify', str(out)]) == 0

  # The tf.Transform graph gives the embedding in its shape, beside the image.
  transform = tft.TFTransformOutput(str(out))
  assert set(transform.raw_feature_spec()) == {'image/encoded', 'image/embedding', 'image/class/text'}
  shard = str(out / info['splits']['train']['shards'][0]['file'])
  batch = tf.constant([r.numpy() for r in tf.data.TFRecordDataset(shard)])
  transformed = transform.transform_features_layer()(tf.io.parse_example(batch, transform.raw_feature_spec()))
  first = records['train'][0]
  np.testing.assert_array_equal(transformed['embedding'][0].numpy(),
                                np.array(first['image/embedding'], np.float32).reshape(models.SHAPE))
  assert transformed['image'].shape[1:] == (224, 224, 3)


def test_embedding_only_keeps_everything_but_the_image_and_trains(cnn, saved, tmp_path):
  model = saved['module']
  images = {f'{label}/{i}.jpg': photos.jpeg(seed=i, width=40 + i, height=36) for label in ('cat', 'dog')
            for i in range(12)}
  images['dog/broken.jpg'] = images['dog/3.jpg'][:200]
  photos.write_files(tmp_path / 'in', images)
  out = tmp_path / 'out'
  assert convert(f'--input={tmp_path}/in', f'--output={out}', f'--embedding_model={model}', '--embedding_only',
                 *EMBEDDING, '--schema=default') == 0
  info, records = read_output(out)
  every = [record for split in records.values() for record in split]
  assert len(every) == 24 and not [record for record in every if 'image/encoded' in record]
  assert {'image/key/sha256', 'image/height', 'image/class/label', 'image/filename'} <= set(every[0])
  _assert_embeddings_are_the_models(cnn, every, lambda record: open(record['image/filename'], 'rb').read())
  assert [error['uri'] for error in read_errors(out)] == [str(tmp_path / 'in' / 'dog' / 'broken.jpg')]
  assert not info['embedding']['images_stored']
  assert cli.main(['verify', str(out)]) == 0

  train = reader.load(str(out), 'train', features='embedding', batch_size=4, shuffle_buffer=32, seed=1)
  assert train.element_spec[0].shape.as_list() == [None, *models.SHAPE]
  classifier = keras.Sequential([keras.Input(models.SHAPE), keras.layers.Flatten(), keras.layers.Dense(2)])
  classifier.compile('adam', keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  history = classifier.fit(train, validation_data=reader.load(str(out), 'validation', features='embedding'),
                           epochs=1, verbose=0)
  assert np.isfinite(history.history['loss'][0]) and np.isfinite(history.history['val_loss'][0])
  with pytest.raises(ValueError, match='embeddings instead of images'):
    reader.load(str(out), 'train')
  transform = tft.TFTransformOutput(str(out))
  assert set(transform.raw_feature_spec()) == {'image/embedding', 'image/class/text'}


def test_without_a_model_the_reader_says_how_to_get_embeddings(sample_set, tmp_path):
  assert convert(f'--input={sample_set}', f'--output={tmp_path}', '--max_error_fraction=0.5') == 0
  with pytest.raises(ValueError, match='convert with --embedding_model'):
    reader.load(str(tmp_path), 'train', features='embedding')


def test_a_model_that_is_not_there_fails_before_any_work_with_one_line(sample_set, tmp_path, capsys):
  """In this process: it fails before any model is loaded, so no worker can add to its line
  (tests/test_cli.py's bad invocations show the command, in a process of its own, prints a
  usage error's line alone)."""
  path = tmp_path / 'nothing' / 'there.keras'
  capsys.readouterr()
  assert cli.main([f'--input={sample_set}', f'--output={tmp_path}/out', f'--embedding_model={path}']) == 2
  assert capsys.readouterr().err.splitlines() == [
      f'error: --embedding_model={path} does not exist; give a .keras file or a SavedModel directory, local or gs://']
  assert not (tmp_path / 'out').exists()


@pytest.mark.parametrize('model, message, run', [
    ('dense.keras', 'takes input of shape (None, 10), not a batch of RGB images (batch, height, width, 3)',
     'in_process'),
    ('tiny.keras --embedding_image_size=64', 'takes images of 32x32 pixels, not 64x64; give '
     '--embedding_image_size=32', 'own_process'),
])
def test_a_model_that_cannot_embed_images_fails_before_any_work_with_one_line(saved, sample_set, tmp_path, capfd,
                                                                              caplog, model, message, run):
  """The workers load the model before the line is printed: one case is a command of its own, in the
  user's environment (no TF_ settings), so that nothing TensorFlow or Keras print on loading it joins
  the line; the other runs in this process (helpers.commands.in_process)."""
  models.dense().save(tmp_path / 'dense.keras')
  path, *more = model.split()
  path = saved['keras'] if path == 'tiny.keras' else tmp_path / path
  args = [f'--input={sample_set}', f'--output={tmp_path}/out', f'--embedding_model={path}', *more]
  result = run_cli(*args) if run == 'own_process' else in_process(args, capfd, caplog)
  assert result.returncode == 2
  assert result.stderr.splitlines() == [f'error: --embedding_model={path} {message}']
  assert not (tmp_path / 'out').exists()


def test_the_dataflow_style_path_writes_what_the_local_path_writes(saved, sample_set, local_conversions, tmp_path):
  assert convert(f'--input={sample_set}', f'--embedding_model={saved["keras"]}', *EMBEDDING, f'--output={tmp_path}/sdk',
                 '--direct_running_mode=multi_processing', '--direct_num_workers=2') == 0
  assert_same_dataset(local_files(tmp_path / 'sdk'), local_files(local_conversions('keras')))


def test_a_dataflow_job_with_the_model_on_cloud_storage_writes_what_the_direct_runner_writes(saved, sample_set,
                                                                                            tmp_path):
  with gcs_emulator.serving(str(tmp_path), ('stage', 'data')):
    gcs_emulator.upload('data', {f'in/{name}': data for name, data in local_files(sample_set).items()})
    model = os.path.basename(saved['export'])
    gcs_emulator.upload('data', {f'models/{model}/{name}': data for name, data in local_files(saved['export']).items()})
    given = ('--input=gs://data/in', f'--embedding_model=gs://data/models/{model}', *EMBEDDING,
             '--skip_transform')
    assert convert(*given, '--output=gs://data/direct') == 0
    # In this process: what the job writes is checked here, the command's process in test_dataflow.py.
    assert dataflow_offline.convert(*given, '--output=gs://data/dataflow', *DATAFLOW) == 0
    files = bucket_files('data', 'dataflow')
    assert_same_dataset(files, bucket_files('data', 'direct'))
