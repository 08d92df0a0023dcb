"""A shard's file name, ``train-00003-of-00012.tfrecord`` (``.tfrecord.gz`` gzipped), and
the patterns that find it again: the writer names shards, the output directory tells
its own files from a user's, verify lists the shards present, and TensorFlow Datasets
reads them by a template. One format, so they never disagree.
"""
import re

from beam_pipeline.core import record_index
from beam_pipeline.core.records import ShardPlan

SUFFIX = '.tfrecord'
GZIP_SUFFIX = '.tfrecord.gz'
SUFFIXES = (SUFFIX, GZIP_SUFFIX)
_DIGITS = '[0-9]' * 5

# The names as a glob; it matches their index files (record_index.SUFFIX) too, which SUFFIXES tell apart.
GLOB = f'*-{_DIGITS}-of-{_DIGITS}{SUFFIX}*'
# The names, and their index files', as a regular expression (split names are lowercase words).
PATTERN = rf'[a-z][a-z0-9_]*-\d{{5}}-of-\d{{5}}{re.escape(SUFFIX)}(?:\.gz|{re.escape(record_index.SUFFIX)})?'
# The names in TensorFlow Datasets' template language.
TFDS_TEMPLATE = '{SPLIT}-{SHARD_X_OF_Y}.{FILEFORMAT}'


def file_name(plan: ShardPlan, compression: str) -> str:
  """The name of the shard ``plan`` is written to: numbered from 0, zero-padded so that names
  sort in shard order."""
  return f'{plan.split}-{plan.index:05d}-of-{plan.count:05d}{GZIP_SUFFIX if compression == "gzip" else SUFFIX}'
