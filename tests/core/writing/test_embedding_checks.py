"""The embedding's plain parts, without a runner: the model's input, the checks of what a
model takes and gives, the shard writer's batches, and shard sizes with embeddings."""
import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from beam_pipeline.core import schemas
from beam_pipeline.core.images import image_info
from beam_pipeline.core.planning import hash_order, sharding
from beam_pipeline.core.writing import embeddings, shard_writer
from beam_pipeline.core.messages import ShardPlan
from beam_pipeline.core.settings import EmbeddingSpec
from beam_pipeline.core.user_errors import ModelError

from helpers import photos
from helpers.values import image_record, plan_shards, settings


def test_the_model_input_is_the_decoded_rgb_image_resized_bilinearly_in_0_to_255():
  jpeg = photos.jpeg(seed=3, width=50, height=30)
  [given] = embeddings.model_inputs([jpeg], 16)
  expected = tf.image.resize(tf.io.decode_jpeg(jpeg, channels=3), [16, 16], method='bilinear')
  assert given.dtype == tf.float32 and given.shape == (16, 16, 3)
  np.testing.assert_array_equal(given.numpy(), expected.numpy())
  assert given.numpy().max() > 1.5  # not scaled to [0, 1]: the model normalizes


@pytest.mark.parametrize('mode', ['L', 'LA', 'RGBA', 'P', 'I;16'])
def test_every_stored_mode_becomes_8_bit_rgb(mode):
  pixels = np.linspace(0, 255, 20 * 12, dtype=np.uint8).reshape(12, 20)
  image = Image.fromarray(pixels, 'L')
  if mode == 'I;16':
    image = Image.fromarray(pixels.astype(np.uint16) * 257, 'I;16')
  else:
    image = image.convert(mode)
  [given] = embeddings.model_inputs([photos.encode(image, 'PNG')], 12)
  assert given.shape == (12, 12, 3)
  assert 0 <= given.numpy().min() and given.numpy().max() <= 255
  assert given.numpy().max() > 200  # a 16-bit image is scaled to 8 bits, not clipped or left at 65535


def test_an_animation_gives_its_first_frame():
  frames = [Image.new('RGB', (8, 8), color) for color in ((255, 0, 0), (0, 0, 255))]
  buffer = io.BytesIO()
  frames[0].save(buffer, 'GIF', save_all=True, append_images=frames[1:])
  [given] = embeddings.model_inputs([buffer.getvalue()], 8)
  red, _, blue = given.numpy().mean(axis=(0, 1))
  assert red > 200 and blue < 50


@pytest.mark.parametrize('shape, dtype, message', [
    ((None, 10), tf.float32, 'takes input of shape (None, 10), not a batch of RGB images'),
    ((None, 32, 32, 1), tf.float32, 'takes input of shape (None, 32, 32, 1)'),
    ((None, 32, 32, 3), tf.uint8, 'takes uint8 input, not float32 images'),
    ((None, 299, 299, 3), tf.float32, 'takes images of 299x299 pixels, not 32x32; give --embedding_image_size=299'),
    ((None, 299, None, 3), tf.float32, 'takes images of 299xany pixels, not 32x32'),
])
def test_a_model_that_takes_no_image_batch_of_the_size_is_refused(shape, dtype, message):
  with pytest.raises(ModelError) as raised:
    embeddings.check_input(shape, dtype, 32)
  assert str(raised.value).startswith(message)


@pytest.mark.parametrize('shape', [(None, None, None, 3), (None, 32, 32, 3), (None, None, None, None), (1, 32, 32, 3)])
def test_a_model_that_takes_image_batches_of_the_size_is_accepted(shape):
  embeddings.check_input(shape, tf.float32, 32)


def test_the_output_shape_is_of_one_image_and_must_be_float_per_image():
  assert embeddings.output_shape(tf.zeros([1, 7, 7, 1280]), 1) == (7, 7, 1280)
  for output in (tf.zeros([1]), tf.zeros([2, 4]), tf.zeros([1, 4], tf.int32)):
    with pytest.raises(ModelError, match='not one float embedding per image'):
      embeddings.output_shape(output, 1)


class _Model:
  """A stand-in model for the writer's batching: each image's embedding is its size and first byte."""

  def __init__(self):
    self.batches = []

  def __call__(self, stored):
    self.batches.append(len(stored))
    return [np.array([len(image), image[0], 0.5, -1], np.float32) for image in stored]


def _plan(tmp_path, count):
  records = []
  for i in range(count):
    data = photos.jpeg(seed=i)
    path = tmp_path / f'{i}.jpg'
    path.write_bytes(data)
    records.append(image_record(str(path), split='train', sha256=image_info.sha256_hex(data), num_bytes=len(data),
                                height=40, width=48))
  return ShardPlan('train', 0, 1, tuple(records))


@pytest.mark.parametrize('only', [False, True])
def test_the_writer_embeds_in_batches_in_order_and_only_drops_the_image(tmp_path, only):
  plan = _plan(tmp_path, 7)
  spec = EmbeddingSpec('model.keras', 32, only, batch_size=3, sha256='0' * 64, output_shape=(2, 2))
  model = _Model()
  written = shard_writer.write_shard(plan, str(tmp_path / 'shard'), settings(embedding=spec), ['cat'], embed=model)
  assert model.batches == [3, 3, 1] and written.shard.num_examples == 7
  keys = schemas.keys('default')
  for record, serialized in zip(plan.records, tf.data.TFRecordDataset(str(tmp_path / 'shard'))):
    feature = tf.train.Example.FromString(serialized.numpy()).features.feature
    data = open(record.uri, 'rb').read()
    assert list(feature[keys[schemas.EMBEDDING]].float_list.value) == [len(data), data[0], 0.5, -1]
    assert list(feature[keys[schemas.EMBEDDING_SHAPE]].int64_list.value) == [2, 2]
    assert (keys[schemas.IMAGE] in feature) is not only
    assert feature[keys[schemas.SHA256]].bytes_list.value[0] == record.sha256.encode()


def test_an_embedding_of_another_size_than_the_check_gave_rejects_its_image(tmp_path):
  """Each image then fails alone: rejected as internal_error (the run's error budget then
  stops it), none written."""
  spec = EmbeddingSpec('model.keras', 32, sha256='0' * 64, output_shape=(3,))
  written = shard_writer.write_shard(_plan(tmp_path, 2), str(tmp_path / 'shard'), settings(embedding=spec), ['cat'],
                                     embed=_Model())
  assert written.shard.num_examples == 0
  assert [(r.reason, r.detail.split(': ')[0]) for r in written.rejections] == [('internal_error', 'embed')] * 2
  assert all('gave an embedding of 4 values' in r.detail for r in written.rejections)


def test_a_model_that_fails_on_one_image_rejects_that_image_alone(tmp_path):
  """The model raises for any batch holding image 4: its batch (3, 4, 5) is embedded again image
  by image, and only image 4 is rejected; every other record is written with its embedding."""
  plan = _plan(tmp_path, 7)
  failing = open(plan.records[4].uri, 'rb').read()
  model = _Model()

  def embed(stored):
    if failing in stored:
      raise ValueError('the model cannot take this image')
    return model(stored)

  spec = EmbeddingSpec('model.keras', 32, batch_size=3, sha256='0' * 64, output_shape=(4,))
  written = shard_writer.write_shard(plan, str(tmp_path / 'shard'), settings(embedding=spec), ['cat'], embed=embed)
  assert [(r.uri, r.reason) for r in written.rejections] == [(plan.records[4].uri, 'internal_error')]
  assert written.rejections[0].detail == 'embed: ValueError: the model cannot take this image'
  assert model.batches == [3, 1, 1, 1] and written.shard.num_examples == 6
  keys = schemas.keys('default')
  kept = [record for i, record in enumerate(plan.records) if i != 4]
  for record, serialized in zip(kept, tf.data.TFRecordDataset(str(tmp_path / 'shard')), strict=True):
    feature = tf.train.Example.FromString(serialized.numpy()).features.feature
    assert list(feature[keys[schemas.EMBEDDING]].float_list.value)[0] == len(open(record.uri, 'rb').read())


def test_shards_are_planned_on_what_records_hold():
  record = image_record('/a/b.jpg', num_bytes=50_000)
  image_only = sharding.estimated_record_bytes(record)
  with_embedding = sharding.estimated_record_bytes(record, sharding.RecordSizes(True, 1000))
  embedding_only = sharding.estimated_record_bytes(record, sharding.RecordSizes(False, 1000))
  assert with_embedding - image_only == 4000
  assert image_only - embedding_only == record.num_bytes - 4000


def test_with_embeddings_a_split_has_a_shard_per_1024_images_however_small_they_are():
  records = [image_record(f'/in/{i}.jpg', split='train', num_bytes=1000) for i in range(5000)]
  sizes = sharding.RecordSizes(False, 1280, sharding.EMBEDDED_IMAGES_PER_SHARD)
  plans = plan_shards(records, 150 * 2**20, sizes=sizes)
  assert len(plans) == 5  # 25 MB of embeddings would be one shard by size
  assert all(900 <= len(plan.records) <= 1100 for plan in plans)
  assert sum(len(plan.records) for plan in plans) == 5000
  assert len(sharding.assign_shards('', records, 150 * 2**20, hash_order.offsets(
      sharding.split_bytes('', records)))) == 1  # without embeddings, by size alone
