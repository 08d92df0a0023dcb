"""Reads a finished output back with TensorFlow, for end-to-end assertions, and compares two."""
import json
import os
from typing import Dict, List, Tuple

import tensorflow as tf

from beam_pipeline.core.output import output_layout
from beam_pipeline.core.settings import COMPRESSIONS
from helpers import gcs_emulator

# What two runs of one conversion may differ in: when, where to, on which runner.
RUN_SPECIFIC = ('created', 'options.output', 'options.runner')


def read_output(output: str) -> Tuple[dict, Dict[str, List[dict]]]:
  """beam_pipeline.json and, per split, every record's features as plain Python values."""
  with open(os.path.join(output, 'beam_pipeline.json')) as f:
    info = json.load(f)
  compression = COMPRESSIONS[info['compression']]
  records = {}
  for split, entry in info['splits'].items():
    records[split] = []
    for shard in entry['shards']:
      path = os.path.join(output, shard['file'])
      assert os.path.getsize(path) == shard['num_bytes'], shard
      in_shard = [_features(r.numpy()) for r in tf.data.TFRecordDataset(path, compression_type=compression)]
      assert len(in_shard) == shard['num_examples'], shard
      for record in in_shard:
        record['_shard'] = shard['file']
      records[split].extend(in_shard)
    assert len(records[split]) == entry['num_examples']
  return info, records


def output_files(output: str) -> Tuple[List[str], List[str]]:
  """Top-level files of an output, and its directories (tf.Transform's) separately."""
  names = sorted(os.listdir(output))
  return ([n for n in names if os.path.isfile(os.path.join(output, n))],
          [n for n in names if os.path.isdir(os.path.join(output, n))])


def read_errors(output: str) -> List[dict]:
  with open(os.path.join(output, 'errors-00000-of-00001.jsonl'), encoding='utf-8') as f:
    return [json.loads(line) for line in f]


def _features(serialized: bytes) -> dict:
  example = tf.train.Example.FromString(serialized)
  values = {}
  for key, feature in example.features.feature.items():
    kind = feature.WhichOneof('kind')
    items = list(getattr(feature, kind).value)
    values[key] = items[0] if len(items) == 1 else items
  return values


def local_files(output) -> Dict[str, bytes]:
  """Every file of a local output: {relative path: bytes}."""
  files = {}
  for directory, _, names in os.walk(output):
    for name in names:
      with open(os.path.join(directory, name), 'rb') as f:
        files[os.path.relpath(os.path.join(directory, name), output)] = f.read()
  return files


def bucket_files(bucket: str, prefix: str) -> Dict[str, bytes]:
  """Every object of an output on the storage emulator: {path under prefix: bytes}."""
  return {name[len(prefix) + 1:]: gcs_emulator.download(bucket, name)
          for name in gcs_emulator.list_names(bucket, prefix + '/')}


def assert_same_dataset(files: Dict[str, bytes], expected: Dict[str, bytes]) -> None:
  """Equal file for file, but for beam_pipeline.json's run-specific fields, the SavedModel's
  bytes, which TensorFlow does not write the same twice, and the near-copy index, which only an
  update that groups near copies on workers (not in one process) keeps."""
  files, expected = _without_index(files), _without_index(expected)
  assert sorted(files) == sorted(expected)
  infos = json.loads(files['beam_pipeline.json']), json.loads(expected['beam_pipeline.json'])
  for info in infos:
    info.get('catalog_lookup', {}).pop('near_index', None)
  for field in RUN_SPECIFIC:
    *path, key = field.split('.')
    for info in infos:
      for step in path:
        info = info[step]
      del info[key]
  assert infos[0] == infos[1]
  for name, data in expected.items():
    if name != 'beam_pipeline.json' and not name.startswith('transform_fn/'):
      assert files[name] == data, name


def _without_index(files: Dict[str, bytes]) -> Dict[str, bytes]:
  return {name: data for name, data in files.items() if not name.startswith(output_layout.NEAR_INDEX_DIR + '/')}
