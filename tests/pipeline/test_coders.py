"""The metadata coders: exact round trips through Beam's own list and key-value coders."""
from typing import List, Tuple

import apache_beam as beam
from apache_beam.typehints import native_type_compatibility

from beam_pipeline.pipeline import coders
from beam_pipeline.core.messages import (ContentGroup, CheckedImage, InputItem, InputItems, OutputUnit, ShardPlan,
                                         TransformGraph)

coders.register()

# A local name that is not UTF-8 (lone surrogates) and manifest extras of every JSON shape.
URI = '/data/caf\udce9/\udcff1.jpg'
EXTRAS = (('boxes', [[1, 2.5], {'x': None}]), ('score', 0.5), ('source', 'web'), ('views', 3))
RECORD = CheckedImage(URI, 'cat', None, EXTRAS, 'a' * 64, 'b' * 64, 1234, 'png', 20, 30, 4, True, 'c' * 32)


def coder_for(type_hint):
  """The coder Beam gives a PCollection declared with this element type."""
  return beam.coders.registry.get_coder(native_type_compatibility.convert_to_beam_type(type_hint))


def round_trip(value, type_hint):
  coder = coder_for(type_hint)
  return coder.decode(coder.encode(value))


def test_declared_element_types_get_these_coders_not_pickle():
  assert coder_for(List[InputItem]) == beam.coders.ListCoder(coders.InputItemCoder())
  assert coder_for(Tuple[str, List[CheckedImage]]) == beam.coders.TupleCoder(
      [beam.coders.StrUtf8Coder(), beam.coders.ListCoder(coders.CheckedImageCoder())])
  assert coder_for(Tuple[str, List[ContentGroup]]).coders()[1] == beam.coders.ListCoder(coders.ContentGroupCoder())
  assert coder_for(ShardPlan) == coders.ShardPlanCoder()
  assert coder_for(OutputUnit) == coders.OutputUnitCoder()
  assert coder_for(Tuple[int, InputItems]).coders()[1] == coders.InputItemsCoder()


def test_every_metadata_type_survives_its_coder_exactly():
  item = InputItem(URI, 'd\u00f6g', 'test', EXTRAS)
  fingerprinted = InputItem(URI, fingerprint='file:1234:1700000000123456789')
  group = ContentGroup((RECORD, RECORD._replace(uri='gs://b/x.jpg', split='train')))
  plan = ShardPlan('validation', 2, 7, (RECORD,) * 3)
  hashed = RECORD._replace(phash='0f1e2d3c4b5a6978', quality=('blurry', 'dark'))
  cases = [([item, fingerprinted], List[InputItem]),
           ([RECORD, RECORD._replace(fingerprint='gcs:17:AAAAAA==:9'), hashed], List[CheckedImage]),
           (('ab', [RECORD]), Tuple[str, List[CheckedImage]]), (('cat', [group]), Tuple[str, List[ContentGroup]]),
           (plan, ShardPlan), (plan, OutputUnit), (TransformGraph(224, 'simple'), OutputUnit),
           (TransformGraph(32, 'default', (7, 7, 1280), False), OutputUnit),
           ((7, InputItems.of((item, fingerprinted))), Tuple[int, InputItems]),
           ((0, InputItems.of(())), Tuple[int, InputItems])]
  for value, type_hint in cases:
    decoded = round_trip(value, type_hint)
    assert decoded == value
    assert type(decoded) is type(value)
  assert type(round_trip([RECORD], List[CheckedImage])[0]) is CheckedImage
  assert type(round_trip(plan, ShardPlan).records[0]) is CheckedImage
  assert type(round_trip((7, InputItems.of((item,))), Tuple[int, InputItems])[1].items[0]) is InputItem


def test_sizes_are_estimated_without_encoding_yet_close_to_the_encoded_size():
  items = InputItems.of(tuple(InputItem(f'/data/cat/{i}.jpg', fingerprint=f'file:123456:17000000001234{i:05d}')
                              for i in range(100)))
  assert 0.5 < coders.InputItemsCoder().estimated_bytes(items) / len(coders.InputItemsCoder().encode(items)) < 2
  coder = coder_for(List[CheckedImage])
  for fingerprint in ('', 'file:123456:1700000000123456789|row:0123456789abcdef'):
    records = [RECORD._replace(uri=f'/data/cat/{i}.jpg', extras=(), fingerprint=fingerprint, phash='0f1e2d3c4b5a6978')
               for i in range(100)]
    estimate = coder.get_impl().estimate_size(records)
    assert 0.5 < estimate / len(coder.encode(records)) < 2
