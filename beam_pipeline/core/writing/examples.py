"""Encode one image record as a serialized tf.train.Example (keys: see schemas)."""
import json
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np
from tensorflow.core.example import example_pb2, feature_pb2

from beam_pipeline.core import schemas
from beam_pipeline.core.images import masks


def encode_example(fields: Mapping[str, Any], extras: Mapping[str, Any], schema: str) -> bytes:
  """``fields`` maps schemas' field names to values: bytes, an int, a tuple of ints, a list
  of bytes or a float32 array. The schema picks which are written, under which keys. Serializes
  deterministically (sorted map keys), so reruns give identical bytes."""
  example = example_pb2.Example()
  feature = example.features.feature
  for field, key in schemas.keys(schema).items():
    if field not in fields or key in extras:  # a manifest's own (schemas.FROM_MANIFEST)
      continue
    value = fields[field]
    if isinstance(value, int):
      feature[key].int64_list.value.append(value)
    elif isinstance(value, bytes):
      feature[key].bytes_list.value.append(value)
    elif isinstance(value, tuple):
      feature[key].int64_list.value.extend(value)
    elif isinstance(value, list):
      feature[key].bytes_list.value.extend(value)
    else:
      _set_floats(feature[key], value)
  for key, value in extras.items():
    _set_extra(feature[key], value)
  return example.SerializeToString(deterministic=True)


# FloatList's one field, ``value`` (1), packed: wire type 2, a byte length, then the floats.
_PACKED_VALUES_TAG = b'\x0a'


def _set_floats(feature: feature_pb2.Feature, values: np.ndarray) -> None:
  """The float32 ``values`` as the feature's float list, as extend() would set them.

  extend() makes a Python float of each value, which for an embedding of tens of
  thousands of floats costs more than the rest of its record; parsing the list's
  packed wire form from the array's bytes runs in protobuf's C parser instead.
  tests/core/writing/test_examples.py checks both give one Example.
  """
  data = np.asarray(values, '<f4').tobytes()
  length, size = bytearray(), len(data)
  while True:  # the length as a protobuf varint: 7 bits a byte, low bits first
    length.append((size & 0x7F) | (0x80 if size > 0x7F else 0))
    size >>= 7
    if not size:
      break
  feature.float_list.MergeFromString(_PACKED_VALUES_TAG + bytes(length) + data)


def multi_label_fields(labels: Sequence[str], class_ids: Mapping[str, int]) -> Dict[str, Any]:
  """A --multi_label record's classes: every id, sorted, and the texts in the ids' order, so
  text N names id N; an image without labels holds empty lists (a multi-hot of zeros)."""
  ids = sorted((class_ids[label], label) for label in labels)
  return {schemas.LABEL: tuple(index for index, _ in ids), schemas.TEXT: [label.encode('utf-8') for _, label in ids]}


def object_fields(objects: Sequence[Any], class_ids: Mapping[str, int],
                  stored_size: Optional[Tuple[int, int]] = None) -> Dict[str, Any]:
  """The fields of a record's boxes.StoredObject, one value per object in each; class ids
  1-based, as label maps number them (0 is the background). With ``stored_size`` (width,
  height; --include_masks), each object's mask too."""
  def floats(name: str) -> np.ndarray:
    return np.array([getattr(obj, name) for obj in objects], np.float32)

  return {schemas.OBJECT_XMIN: floats('xmin'), schemas.OBJECT_YMIN: floats('ymin'),
          schemas.OBJECT_XMAX: floats('xmax'), schemas.OBJECT_YMAX: floats('ymax'),
          schemas.OBJECT_LABEL: tuple(class_ids[obj.label] + 1 for obj in objects),
          schemas.OBJECT_TEXT: [obj.label.encode('utf-8') for obj in objects],
          schemas.OBJECT_AREA: floats('area'),
          schemas.OBJECT_IS_CROWD: tuple(obj.is_crowd for obj in objects),
          schemas.OBJECT_DIFFICULT: tuple(obj.difficult for obj in objects),
          schemas.OBJECT_TRUNCATED: tuple(obj.truncated for obj in objects),
          **({schemas.OBJECT_MASK: [masks.encoded(obj.mask, stored_size) for obj in objects]} if stored_size else {})}


def source_id(order_key: str) -> bytes:
  """A record's image/source_id: the first 60 bits of its order key (content and uri, so
  copies under other names differ) as a decimal string, which Model Garden's detection
  decoders parse into an int64 and evaluation uses as the image id."""
  return str(int(order_key[:15], 16)).encode('ascii')


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
