"""Beam coders for the metadata that crosses the pipeline's shuffles.

Left to itself, Beam pickles each NamedTuple, which calls back into Python for
every record, and it encodes sampled elements a second time only to count their
bytes. These coders pickle the plain tuple of a record's fields and estimate
sizes from a record's uri, which halves the cost of encoding and decoding a
record and makes estimating its size almost free. The pipeline
declares its PCollections' element types, so Beam finds these coders in its
registry, also inside lists and key-value pairs.
"""
import dataclasses
import pickle
from typing import Any, Iterable, Tuple

import apache_beam as beam

from beam_pipeline.compat import beam_internals
from beam_pipeline.core.messages import (ContentGroup, CheckedImage, InputItem, InputItems, OutputUnit, ShardPlan,
                                         ShardRewrite, TransformGraph)

_PROTOCOL = pickle.HIGHEST_PROTOCOL
_SHARD, _GRAPH, _REWRITE = 0, 1, 2  # OutputUnitCoder's tags
# What a record's fields other than its uri, fingerprint and objects take, pickled: hashes (the
# perceptual one too), order key, size, shape, label; and what an annotated object takes.
_RECORD_BYTES = 220
_OBJECT_BYTES = 120


class _FieldsCoder(beam_internals.StreamCoder):
  """A NamedTuple as the pickled plain tuple of its fields; subclasses say how."""

  def encode_bytes(self, value: Any) -> bytes:
    return pickle.dumps(self.to_fields(value), _PROTOCOL)

  def decode_bytes(self, data: bytes) -> Any:
    return self.from_fields(pickle.loads(data))

  def to_fields(self, value: Any) -> tuple:
    return tuple(value)

  def from_fields(self, fields: tuple) -> Any:
    raise NotImplementedError

  def is_deterministic(self) -> bool:
    return False  # never used as keys

  def __eq__(self, other: Any) -> bool:
    return type(self) is type(other)

  def __hash__(self) -> int:
    return hash(type(self))


def _item_bytes(item: InputItem) -> int:
  return 16 + len(item.uri) + len(item.fingerprint)


def _record_bytes(record: CheckedImage) -> int:
  return _RECORD_BYTES + len(record.uri) + len(record.fingerprint) + _OBJECT_BYTES * len(record.objects)


def _records_bytes(records: Iterable[CheckedImage]) -> int:
  return sum(map(_record_bytes, records))


def _records_fields(records: Iterable[CheckedImage]) -> Tuple[tuple, ...]:
  return tuple(map(tuple, records))


def _records(fields: Iterable[tuple]) -> Tuple[CheckedImage, ...]:
  return tuple(map(CheckedImage._make, fields))


class InputItemCoder(_FieldsCoder):

  def from_fields(self, fields: tuple) -> InputItem:
    return InputItem._make(fields)

  def estimated_bytes(self, value: InputItem) -> int:
    return _item_bytes(value)

  def to_type_hint(self):
    return InputItem


class InputItemsCoder(_FieldsCoder):
  """Input items as one pickle of their columns."""

  def to_fields(self, value: InputItems) -> tuple:
    return value.columns

  def from_fields(self, fields: tuple) -> InputItems:
    return InputItems(fields)

  def estimated_bytes(self, value: InputItems) -> int:
    return 16 * len(value.uris) + sum(map(len, value.uris)) + sum(map(len, value.fingerprints))

  def to_type_hint(self):
    return InputItems


class CheckedImageCoder(_FieldsCoder):

  def from_fields(self, fields: tuple) -> CheckedImage:
    return CheckedImage._make(fields)

  def estimated_bytes(self, value: CheckedImage) -> int:
    return _record_bytes(value)

  def to_type_hint(self):
    return CheckedImage


class ContentGroupCoder(_FieldsCoder):

  def to_fields(self, value: ContentGroup) -> tuple:
    return _records_fields(value.records)

  def from_fields(self, fields: tuple) -> ContentGroup:
    return ContentGroup(_records(fields))

  def estimated_bytes(self, value: ContentGroup) -> int:
    return _records_bytes(value.records)

  def to_type_hint(self):
    return ContentGroup


def _plan_fields(plan: ShardPlan) -> tuple:
  return plan.split, plan.index, plan.count, _records_fields(plan.records)


def _plan(fields: tuple) -> ShardPlan:
  split, index, count, records = fields
  return ShardPlan(split, index, count, _records(records))


class ShardPlanCoder(_FieldsCoder):

  def to_fields(self, value: ShardPlan) -> tuple:
    return _plan_fields(value)

  def from_fields(self, fields: tuple) -> ShardPlan:
    return _plan(fields)

  def estimated_bytes(self, value: ShardPlan) -> int:
    return _records_bytes(value.records)

  def to_type_hint(self):
    return ShardPlan


class OutputUnitCoder(_FieldsCoder):
  """A ShardPlan, a ShardRewrite or a TransformGraph, behind a tag that says which."""

  def to_fields(self, value: OutputUnit) -> tuple:
    if isinstance(value, ShardPlan):
      return _SHARD, _plan_fields(value)
    return (_REWRITE if isinstance(value, ShardRewrite) else _GRAPH), dataclasses.astuple(value)

  def from_fields(self, fields: tuple) -> OutputUnit:
    tag, unit = fields
    return _plan(unit) if tag == _SHARD else ShardRewrite(*unit) if tag == _REWRITE else TransformGraph(*unit)

  def estimated_bytes(self, value: OutputUnit) -> int:
    return _records_bytes(value.records) if isinstance(value, ShardPlan) else 0

  def to_type_hint(self):
    return OutputUnit


class PickledDict(dict):
  """A dict that crosses a shuffle pickled, as a whole: a summary that lists uris. Beam's coder
  of untyped values encodes a plain dict entry by entry, and each string as UTF-8, which a local
  file name that is not UTF-8 (lone surrogates) is not; a subclass of dict it pickles. Its
  producers declare no type (Any), which every consumer's Mapping takes."""


def register() -> None:
  """Makes Beam encode these types with the coders above wherever it knows an element's type."""
  for value_type, coder in ((InputItem, InputItemCoder), (InputItems, InputItemsCoder),
                            (CheckedImage, CheckedImageCoder), (ContentGroup, ContentGroupCoder),
                            (ShardPlan, ShardPlanCoder), (OutputUnit, OutputUnitCoder)):
    beam.coders.registry.register_coder(value_type, coder)
