"""Reads a finished output directory back with TensorFlow, for end-to-end assertions."""
import json
import os
from typing import Dict, List, Tuple

import tensorflow as tf


def read_output(output: str) -> Tuple[dict, Dict[str, List[dict]]]:
  """dataset_info.json and, per split, every record's features as plain Python values."""
  with open(os.path.join(output, 'dataset_info.json')) as f:
    info = json.load(f)
  compression = 'GZIP' if info['compression'] == 'gzip' else ''
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
