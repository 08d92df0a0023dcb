"""A shard's name is found by the patterns made beside it, and nothing else is."""
import fnmatch
import re

from beam_pipeline.core import record_index, shard_name
from beam_pipeline.core.records import ShardPlan


def test_the_patterns_find_every_name_the_writer_gives_and_its_index_file():
  for compression in ('none', 'gzip'):
    name = shard_name.file_name(ShardPlan('validation_2', 7, 120, ()), compression)
    assert name == 'validation_2-00007-of-00120.tfrecord' + ('.gz' if compression == 'gzip' else '')
    assert fnmatch.fnmatchcase(name, shard_name.GLOB) and name.endswith(shard_name.SUFFIXES)
    assert re.fullmatch(shard_name.PATTERN, name)
  index_file = shard_name.file_name(ShardPlan('train', 0, 1, ()), 'none') + record_index.SUFFIX
  assert fnmatch.fnmatchcase(index_file, shard_name.GLOB) and not index_file.endswith(shard_name.SUFFIXES)
  assert re.fullmatch(shard_name.PATTERN, index_file)


def test_names_not_the_writers_are_not_matched():
  for name in ('train-0001-of-00002.tfrecord', 'Train-00001-of-00002.tfrecord', 'train-00001-of-00002.tfrecord.gz.idx',
               'train-00001-of-00002.record'):
    assert not re.fullmatch(shard_name.PATTERN, name), name
