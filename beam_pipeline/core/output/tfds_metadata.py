"""TensorFlow Datasets' metadata for an output, so ``tfds.builder_from_directory(OUTPUT)``
reads it: ``dataset_info.json`` (the splits, their shards' lengths and our file names as a
template), ``features.json`` (what each Example key holds) and the class names of the
label's ClassLabel (of a --multi_label output, a Sequence of ClassLabel, and its texts a
Sequence of Text).

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
  splits = [{'name': name, 'filepathTemplate': output_layout.TFDS_SHARD_TEMPLATE, 'numBytes': str(split.num_bytes),
             'shardLengths': [str(shard.num_examples) for shard in split.shards]}
            for name, split in sorted(info.splits.items())]
  return {'description': f'Converted by beam_pipeline {info.version} from {info.options["input"]}; '
                         f'its run record is {output_layout.RUN_RECORD}.',
          'fileFormat': 'tfrecord', 'splits': splits, 'version': '1.0.0'}


def _features(info: run_record.RunRecord) -> Tuple[Dict[str, Any], Optional[Tuple[str, List[str]]]]:
  """The features of every field a record of ``info`` holds, nested by the '/' in their keys,
  and the ClassLabel's names file (name, labels) if the records are labelled."""
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
      flat[key] = {'pythonClassName': _CLASSES + 'tensor_feature.Tensor',
                   'tensor': {'dtype': 'float32', 'encoding': 'none',
                              'shape': {'dimensions': [str(embedding.num_values)]}}}
    elif field in _TYPES:
      flat[key] = _TYPES[field]
  return _nested(flat), label_names


def _sequence(feature: Dict[str, Any]) -> Dict[str, Any]:
  """A list of ``feature`` values, of any length: a --multi_label record's ids or texts."""
  return {'pythonClassName': _CLASSES + 'sequence_feature.Sequence', 'sequence': {'feature': feature, 'length': '-1'}}



def _nested(flat: Mapping[str, Dict[str, Any]]) -> Dict[str, Any]:
  """A FeaturesDict of features keyed 'a/b/c', nested as TFDS flattens them back to those
  keys. A key that is also the start of another (image/embedding, image/embedding/shape)
  cannot be both a feature and a dict: the longer one is left out."""
  tree: Dict[str, Any] = {}
  for key in sorted(flat, key=len):
    *parents, leaf = key.split('/')
    node = tree
    for parent in parents:
      node = node.setdefault(parent, {})
      if 'pythonClassName' in node:  # a feature already: skip the longer key
        break
    else:
      node[leaf] = flat[key]
  return _as_features_dict(tree)


def _as_features_dict(tree: Mapping[str, Any]) -> Dict[str, Any]:
  return {'pythonClassName': _CLASSES + 'features_dict.FeaturesDict',
          'featuresDict': {'features': {name: value if 'pythonClassName' in value else _as_features_dict(value)
                                        for name, value in sorted(tree.items())}}}


def _dumps(value: Any) -> str:
  return json.dumps(value, indent=2, sort_keys=True) + '\n'
