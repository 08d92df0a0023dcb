"""--embedding_model loaded and run in the core: every way a model is saved, the model's
files local and on the storage emulator (copied by pipeline/model_files.py), and the one-line
refusals."""
import hashlib
import os
import subprocess
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from beam_pipeline.pipeline import model_files
from beam_pipeline.core.writing import embedding_model, embeddings
from beam_pipeline.core.settings import EmbeddingSpec
from beam_pipeline.core.user_errors import ModelError

from helpers import gcs_emulator, models, photos


@pytest.mark.parametrize('how', sorted(models.SAVERS))
def test_every_saved_form_gives_the_models_own_output(cnn, saved, how):
  spec = EmbeddingSpec(saved[how], models.SIZE, batch_size=4, sha256=how)
  assert embedding_model.describe(embedding_model.load(saved[how]), models.SIZE) == models.SHAPE
  stored = [photos.jpeg(seed=i, width=40 + i, height=30) for i in range(5)]
  embedded = embedding_model.embedder(spec, saved[how])(stored)
  expected = cnn(tf.stack(embeddings.model_inputs(stored, models.SIZE))).numpy().reshape(len(stored), -1)
  assert [value.dtype for value in embedded] == [np.float32] * 5
  np.testing.assert_allclose(np.stack(embedded), expected, rtol=1e-5, atol=1e-6)


def test_a_process_loads_the_model_once_for_all_its_writes(saved, monkeypatch):
  loads = []
  load = embedding_model.load
  monkeypatch.setattr(embedding_model, 'load', lambda path: loads.append(path) or load(path))
  spec = EmbeddingSpec(saved['keras'], models.SIZE, sha256='once')
  assert embedding_model.check(spec, saved['keras']) == models.SHAPE
  first, second = embedding_model.embedder(spec, saved['keras']), embedding_model.embedder(spec, saved['keras'])
  assert len(first([photos.jpeg()])[0]) == len(second([photos.jpeg(seed=2)])[0]) == 32
  assert loads == [saved['keras']]


def _save(model, path):
  model.save(path)
  return str(path)


def _write(path):
  path.parent.mkdir(exist_ok=True)
  path.write_bytes(photos.jpeg())
  return str(path)


def _two_inputs():
  a, b = keras.Input((32, 32, 3)), keras.Input((32, 32, 3))
  return keras.Model([a, b], keras.layers.Add()([a, b]))


def _two_outputs():
  images = keras.Input((32, 32, 3))
  return keras.Model(images, [keras.layers.GlobalAveragePooling2D()(images), keras.layers.Flatten()(images)])


@pytest.mark.parametrize('make, message', [
    (lambda d: _save(models.dense(), d / 'dense.keras'), 'takes input of shape (None, 10), not a batch of RGB images'),
    (lambda d: _save(models.tiny_cnn(64), d / 'big.keras'),
     'takes images of 64x64 pixels, not 32x32; give --embedding_image_size=64'),
    (lambda d: _save(_two_inputs(), d / 'two.keras'), 'takes 2 input(s) and gives 1 output(s)'),
    (lambda d: _save(_two_outputs(), d / 'two_out.keras'), 'takes 1 input(s) and gives 2 output(s)'),
    (lambda d: _write(d / 'junk.keras'), 'is not a Keras model file (a .keras zip archive)'),
    (lambda d: _write(d / 'photos' / 'cat.jpg').rsplit('/', 1)[0], 'is a directory without saved_model.pb'),
])
def test_a_model_that_cannot_embed_images_is_refused_in_words(tmp_path, make, message):
  with pytest.raises(ModelError) as raised:
    embedding_model.describe(embedding_model.load(make(tmp_path)), 32)
  assert str(raised.value).startswith(message)
  assert '\n' not in str(raised.value)


def test_a_savedmodel_without_a_serving_signature_is_refused(tmp_path):
  module = tf.Module()
  module.v = tf.Variable(1.0)
  tf.saved_model.save(module, str(tmp_path / 'bare'))
  with pytest.raises(ModelError, match='without a serving_default signature'):
    embedding_model.load(str(tmp_path / 'bare'))


def test_the_fingerprint_is_what_sha256sum_gives(saved):
  with open(saved['keras'], 'rb') as f:
    assert model_files.fingerprint(saved['keras']) == hashlib.sha256(f.read()).hexdigest()
  listing = subprocess.run("find . -type f -printf '%P\\n' | LC_ALL=C sort | xargs sha256sum | sha256sum",
                           shell=True, cwd=saved['export'], capture_output=True, text=True, check=True).stdout
  assert model_files.fingerprint(saved['export']) == listing.split()[0]
  assert model_files.fingerprint(saved['export'] + '/') == listing.split()[0]


def test_a_missing_model_is_refused(tmp_path):
  with pytest.raises(ModelError, match='does not exist'):
    model_files.fingerprint(str(tmp_path / 'nothing.keras'))


def test_a_model_on_cloud_storage_is_read_with_beams_filesystems(saved, tmp_path):
  with gcs_emulator.serving(str(tmp_path), ('models',)):
    for how in ('keras', 'export'):
      local = saved[how]
      name = f'{how}/{os.path.basename(local)}'
      gcs_emulator.upload('models', {f'{name}/{path}'.rstrip('/'): Path(uri).read_bytes()
                                     for path, uri in model_files.model_files(local).items()})
      remote = f'gs://models/{name}'
      assert model_files.fingerprint(remote) == model_files.fingerprint(local)
      with model_files.local_copy(remote) as copy, model_files.local_copy(remote) as again:
        assert again == copy  # one copy in a process, however many hold it
        assert model_files.fingerprint(copy) == model_files.fingerprint(local)
        assert embedding_model.check(EmbeddingSpec(remote, models.SIZE, sha256=how), copy) == models.SHAPE
      assert not tf.io.gfile.exists(copy)  # removed once the last holder lets go
    with pytest.raises(ModelError, match='does not exist'):
      model_files.fingerprint('gs://models/nothing.keras')
