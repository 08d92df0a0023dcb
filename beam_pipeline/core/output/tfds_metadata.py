"""TensorFlow Datasets' metadata for an output, so ``tfds.builder_from_directory(OUTPUT)``
reads it: ``dataset_info.json`` (the splits, their shards' lengths, our file names as a
template and, where each record has one label, the supervised keys), ``features.json``
(what each Example key holds) and the class names of the label's ClassLabel (of a
--multi_label output, a Sequence of ClassLabel, and its texts a Sequence of Text).

Every feature is at the top level, under its Example key ('image/encoded', as TFDS's own
ImageFolder has 'image/filename'): TFDS finds the supervised keys of
``as_dataset(as_supervised=True)`` at the top level only, so nesting the keys by their '/'
(as 0.2 did) left ``(image, label)`` out of its reach.

Written as JSON here rather than with ``tfds.folder_dataset.write_metadata``, which would
make TensorFlow Datasets a dependency of every worker; tests/test_readers.py loads the
output with TFDS itself. TFDS reads uncompressed shards only, so a gzip output gets none.
"""
import json
from typing import Any, Dict, List, Mapping, Optional, Tuple

from beam_pipeline.core import schemas
from beam_pipeline.core.output import output_layout, run_record


_CLASSES = 'tensorflow_datasets.core.features.'
_INT64 = {'pythonClassName': _CLASSES + 'tensor_feature.Tensor',
          'tensor': {'dtype': 'int64', 'encoding': 'none', 'shape': {}}}
_TEXT = {'pythonClassName': _CLASSES + 'text_feature.Text', 'text': {}}
# Decoded as the converter checks and reader.load reads them: three channels.
_IMAGE = {'pythonClassName': _CLASSES + 'image_feature.Image',
          'image': {'dtype': 'uint8', 'shape': {'dimensions': ['-1', '-1', '3']}}}
_TYPES = {schemas.FORMAT: _TEXT, schemas.HEIGHT: _INT64, schemas.WIDTH: _INT64, schemas.ORIGINAL_HEIGHT: _INT64,
          schemas.ORIGINAL_WIDTH: _INT64, schemas.CHANNELS: _INT64, schemas.TEXT: _TEXT, schemas.URI: _TEXT,
          schemas.SHA256: _TEXT, schemas.SOURCE_ID: _TEXT}


def files(info: run_record.RunRecord) -> Dict[str, str]:
  """Name -> text of TFDS's files for the output whose run record is ``info``; none for gzip."""
  if info.compression != 'none':
    return {}
  features, label_names = _features(info)
  result = {output_layout.TFDS_DATASET_INFO: _dumps(_dataset_info(info)), output_layout.TFDS_FEATURES: _dumps(features)}
  if label_names:
    name, labels = label_names
    result[name] = ''.join(f'{label}\n' for label in labels)
  return result


def _dataset_info(info: run_record.RunRecord) -> Dict[str, Any]:
  template = output_layout.tfds_template(bool(info.options.get('incremental')))
  splits = [{'name': name, 'filepathTemplate': template, 'numBytes': str(split.num_bytes),
             'shardLengths': [str(shard.num_examples) for shard in split.shards]}
            for name, split in sorted(info.splits.items())]
  supervised = _supervised_keys(info)
  return {'description': f'Converted by beam_pipeline {info.version} from {info.options["input"]}; '
                         f'its run record is {output_layout.RUN_RECORD}.',
          'fileFormat': 'tfrecord', 'splits': splits, 'version': '1.0.0',
          **({'supervisedKeys': supervised} if supervised else {})}


def _supervised_keys(info: run_record.RunRecord) -> Optional[Dict[str, Any]]:
  """(input, label) for ``as_dataset(as_supervised=True)``, where each record has one label of
  labels.txt: (image, label), or (embedding, label) under --embedding_only. None for an
  unlabelled, --multi_label or detection output, whose label is not one class per record.
  DatasetInfo's SupervisedKeys: its tuple, and the input and output older TFDS read."""
  if not info.labels or info.options.get('multi_label') or 'annotations' in info.options:
    return None
  keys = schemas.keys(info.schema)
  images = not info.embedding or info.embedding.images_stored
  given, label = keys[schemas.IMAGE if images else schemas.EMBEDDING], keys[schemas.LABEL]
  return {'input': given, 'output': label, 'tuple': {'items': [{'featureKey': given}, {'featureKey': label}]}}


def _features(info: run_record.RunRecord) -> Tuple[Dict[str, Any], Optional[Tuple[str, List[str]]]]:
  """The features of every field a record of ``info`` holds, each under its key, and the
  ClassLabel's names file (name, labels) if the records are labelled."""
  keys = schemas.keys(info.schema)
  embedding = info.embedding
  flat: Dict[str, Dict[str, Any]] = {}
  label_names = None
  multi_label = bool(info.options.get('multi_label'))
  for field, key in keys.items():
    if field == schemas.IMAGE and (not embedding or embedding.images_stored):
      flat[key] = _IMAGE
    elif field == schemas.LABEL:
      if info.labels:
        flat[key] = {'pythonClassName': _CLASSES + 'class_label_feature.ClassLabel',
                     'classLabel': {'numClasses': str(len(info.labels))}}
        label_names = (output_layout.tfds_label_names(info.schema), list(info.labels))
      else:
        flat[key] = _INT64
      if multi_label:
        flat[key] = _sequence(flat[key])
    elif field == schemas.TEXT and multi_label:
      flat[key] = _sequence(_TEXT)
    elif field == schemas.EMBEDDING and embedding:
      flat[key] = _tensor('float32', embedding.num_values)
    elif field == schemas.EMBEDDING_SHAPE and embedding:
      flat[key] = _tensor('int64', len(embedding.output_shape))
    elif field in _TYPES:
      flat[key] = _TYPES[field]
  return _as_features_dict(flat), label_names


def _tensor(dtype: str, length: int) -> Dict[str, Any]:
  """A list of ``length`` values of ``dtype``."""
  return {'pythonClassName': _CLASSES + 'tensor_feature.Tensor',
          'tensor': {'dtype': dtype, 'encoding': 'none', 'shape': {'dimensions': [str(length)]}}}


def _sequence(feature: Dict[str, Any]) -> Dict[str, Any]:
  """A list of ``feature`` values, of any length: a --multi_label record's ids or texts."""
  return {'pythonClassName': _CLASSES + 'sequence_feature.Sequence', 'sequence': {'feature': feature, 'length': '-1'}}


def _as_features_dict(features: Mapping[str, Dict[str, Any]]) -> Dict[str, Any]:
  return {'pythonClassName': _CLASSES + 'features_dict.FeaturesDict',
          'featuresDict': {'features': dict(sorted(features.items()))}}


def _dumps(value: Any) -> str:
  return json.dumps(value, indent=2, sort_keys=True) + '\n'
