import numpy as np
import pytest
import tensorflow as tf

from beam_pipeline.core import schemas
from beam_pipeline.core.planning import sharding
from beam_pipeline.core.writing import examples
from beam_pipeline.core.rejections import Rejected

FIELDS = {schemas.IMAGE: b'\xff\xd8bytes', schemas.FORMAT: b'jpeg', schemas.HEIGHT: 4, schemas.WIDTH: 5,
          schemas.ORIGINAL_HEIGHT: 8, schemas.ORIGINAL_WIDTH: 10,
          schemas.CHANNELS: 3, schemas.LABEL: 1, schemas.TEXT: b'dog', schemas.URI: b'gs://b/dog/1.jpg',
          schemas.SHA256: b'ab' * 32, schemas.SOURCE_ID: b'12345'}


def test_default_schema_keys_and_extras():
  serialized = examples.encode_example(FIELDS, {'weight': 0.5, 'count': 2, 'tags': ['a', 'b'], 'meta': {'k': 1},
                                                'flag': True}, 'default')
  features = tf.train.Example.FromString(serialized).features.feature
  assert set(features) == {'image/encoded', 'image/format', 'image/height', 'image/width', 'image/original_height',
                           'image/original_width', 'image/channels',
                           'image/class/label', 'image/class/text', 'image/filename', 'image/key/sha256',
                           'image/source_id', 'weight', 'count', 'tags', 'meta', 'flag'}
  assert features['image/encoded'].bytes_list.value == [b'\xff\xd8bytes']
  assert features['image/height'].int64_list.value == [4]
  assert features['image/class/label'].int64_list.value == [1]
  assert features['image/class/text'].bytes_list.value == [b'dog']
  assert features['image/filename'].bytes_list.value == [b'gs://b/dog/1.jpg']
  assert features['weight'].float_list.value == [0.5]
  assert features['count'].int64_list.value == [2]
  assert features['flag'].int64_list.value == [1]
  assert features['tags'].bytes_list.value == [b'a', b'b']
  assert features['meta'].bytes_list.value == [b'{"k": 1}']


def test_simple_schema_matches_the_seeds_reader():
  serialized = examples.encode_example(FIELDS, {}, 'simple')
  assert set(tf.train.Example.FromString(serialized).features.feature) == {'image_raw', 'label', 'id'}
  parsed = tf.io.parse_single_example(serialized, {
      'image_raw': tf.io.FixedLenFeature([], tf.string),
      'label': tf.io.FixedLenFeature([], tf.int64),
      'id': tf.io.FixedLenFeature([], tf.string)})
  assert parsed['label'].numpy() == 1 and parsed['id'].numpy() == b'gs://b/dog/1.jpg'


def test_serialization_is_deterministic():
  extras = {f'k{i}': i for i in range(20)}
  assert (examples.encode_example(FIELDS, extras, 'default') ==
          examples.encode_example(dict(reversed(list(FIELDS.items()))), dict(reversed(list(extras.items()))),
                                  'default'))


def test_extras_may_not_overwrite_schema_keys_but_a_manifests_own_image_ids():
  schemas.check_extras({'image/source_id': '397133'}, 'default')
  features = tf.train.Example.FromString(examples.encode_example(FIELDS, {'image/source_id': '397133'}, 'default'))
  assert features.features.feature['image/source_id'].bytes_list.value == [b'397133']
  with pytest.raises(Rejected) as raised:
    schemas.check_extras({'image/encoded': 'x'}, 'default')
  assert raised.value.reason == 'bad_manifest_row'
  with pytest.raises(Rejected):
    schemas.check_extras({'label': 'x'}, 'simple')


@pytest.mark.parametrize('size', [0, 1, 31, 32, 4096, 62720])
def test_an_embedding_is_the_float_list_extend_would_make(size):
  """The packed form the encoder writes (the varint of its length crosses 1, 2 and 3 bytes
  across these sizes) parses as the same floats, and serializes to the same bytes."""
  values = np.random.RandomState(size).standard_normal(size).astype(np.float32)
  values[:3] = [np.inf, -0.0, np.nan][:size]
  fields = {**FIELDS, schemas.EMBEDDING: values, schemas.EMBEDDING_SHAPE: (size,)}
  serialized = examples.encode_example(fields, {}, 'default')
  expected = tf.train.Example.FromString(serialized)
  del expected.features.feature['image/embedding']
  expected.features.feature['image/embedding'].float_list.value.extend(values.tolist())
  assert serialized == expected.SerializeToString(deterministic=True)
  parsed = tf.train.Example.FromString(serialized).features.feature
  np.testing.assert_array_equal(np.array(parsed['image/embedding'].float_list.value, np.float32), values)
  assert parsed['image/embedding/shape'].int64_list.value == [size]


def test_source_ids_are_int64_decimals_that_differ_for_copies_under_other_names():
  """Model Garden's detection decoders parse image/source_id as a decimal int64; copies of one
  file under two names are two images to an evaluation, so they get two ids."""
  ids = [examples.source_id(sharding.order_key('ab' * 32, uri)) for uri in ('a/1.jpg', 'b/1.jpg')]
  assert ids[0] != ids[1]
  parsed = tf.strings.to_number(tf.constant(ids), tf.int64).numpy()
  assert [str(number).encode() for number in parsed] == ids and all(0 <= number < 2**63 for number in parsed)
  assert examples.source_id('f' * 32) == str(2**60 - 1).encode()


@pytest.mark.parametrize('given, stored', [('397133', '397133'), (' 0017', '17'), (17, '17'), ('0', '0'),
                                           (str(2**63 - 1), str(2**63 - 1))])
def test_a_given_source_id_is_stored_as_the_decimal_text_the_key_promises(given, stored):
  """A JSON number too: stored as bytes, as Model Garden's decoders read the key, not as int64."""
  extras = schemas.with_given_source_id((('a', 1), ('image/source_id', given)), 'default')
  assert extras == (('a', 1), ('image/source_id', stored))
  feature = tf.train.Example.FromString(examples.encode_example(FIELDS, dict(extras), 'default')).features.feature
  assert feature['image/source_id'].bytes_list.value == [stored.encode()]


@pytest.mark.parametrize('given', ['abc', '-1', '1e3', '1.0', '0x11', '', str(2**63), 2**63, -1, True, 1.0, ['1']])
def test_a_given_source_id_that_is_no_int64_decimal_rejects_the_row(given):
  with pytest.raises(Rejected) as raised:
    schemas.with_given_source_id((('image/source_id', given),), 'default')
  assert raised.value.reason == 'bad_manifest_row' and 'is not a decimal number' in raised.value.detail


def test_the_simple_schema_has_no_source_id_to_check():
  assert schemas.with_given_source_id((('image/source_id', 'abc'),), 'simple') == (('image/source_id', 'abc'),)
