"""Encode one image record as a serialized tf.train.Example (keys: see schemas)."""
import json
from typing import Any, Mapping

from tensorflow.core.example import example_pb2, feature_pb2

from beam_pipeline.core import schemas


def encode_example(fields: Mapping[str, Any], extras: Mapping[str, Any], schema: str) -> bytes:
  """``fields`` maps schemas' field names to values: bytes, an int, a tuple of ints or a
  float32 array. The schema picks which are written, under which keys. Serializes
  deterministically (sorted map keys), so reruns give identical bytes."""
  example = example_pb2.Example()
  feature = example.features.feature
  for field, key in schemas.keys(schema).items():
    if field not in fields:
      continue
    value = fields[field]
    if isinstance(value, int):
      feature[key].int64_list.value.append(value)
    elif isinstance(value, bytes):
      feature[key].bytes_list.value.append(value)
    elif isinstance(value, tuple):
      feature[key].int64_list.value.extend(value)
    else:
      feature[key].float_list.value.extend(value)
  for key, value in extras.items():
    _set_extra(feature[key], value)
  return example.SerializeToString(deterministic=True)


def uri_bytes(uri: str) -> bytes:
  """The uri's bytes; a local file name that is not UTF-8 keeps its original bytes."""
  return uri.encode('utf-8', 'surrogateescape')


def _set_extra(feature: feature_pb2.Feature, value: Any) -> None:
  """Maps a manifest value to the natural Feature type; anything nested becomes JSON text."""
  values = value if isinstance(value, list) else [value]
  if values and all(isinstance(v, (bool, int)) for v in values):
    feature.int64_list.value.extend(int(v) for v in values)
  elif values and all(isinstance(v, (bool, int, float)) for v in values):
    feature.float_list.value.extend(float(v) for v in values)
  elif values and all(isinstance(v, str) for v in values):
    feature.bytes_list.value.extend(v.encode('utf-8') for v in values)
  else:
    feature.bytes_list.value.append(json.dumps(value, sort_keys=True, ensure_ascii=False).encode('utf-8'))
