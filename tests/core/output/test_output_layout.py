"""The output's layout: every name the tool writes is recognised by the patterns made beside it,
and nothing else is."""
import fnmatch
import re

from beam_pipeline.core import schemas
from beam_pipeline.core.output import output_layout
from beam_pipeline.core.messages import ShardPlan


def test_the_patterns_find_every_shard_name_the_writer_gives_and_its_index_file():
  for compression in ('none', 'gzip'):
    name = output_layout.shard_file(ShardPlan('validation_2', 7, 120, ()), compression)
    assert name == 'validation_2-00007-of-00120.tfrecord' + ('.gz' if compression == 'gzip' else '')
    assert fnmatch.fnmatchcase(name, output_layout.SHARD_GLOB) and name.endswith(output_layout.SHARD_SUFFIXES)
    assert re.fullmatch(output_layout.SHARD_PATTERN, name) and output_layout.LISTED_NAME.match(name)
  index_file = output_layout.index_file(output_layout.shard_file(ShardPlan('train', 0, 1, ()), 'none'))
  assert index_file == 'train-00000-of-00001.tfrecord.idx'
  assert fnmatch.fnmatchcase(index_file, output_layout.SHARD_GLOB)
  assert not index_file.endswith(output_layout.SHARD_SUFFIXES)
  assert re.fullmatch(output_layout.SHARD_PATTERN, index_file)


def test_names_not_the_writers_are_not_matched():
  for name in ('train-0001-of-00002.tfrecord', 'Train-00001-of-00002.tfrecord', 'train-00001-of-00002.tfrecord.gz.idx',
               'train-00001-of-00002.record', 'errors-00000-of-00001.json', 'notes.txt', 'labels.txt.bak',
               'metadata/annotations.csv', 'transform_fn/README.md', 'transformed_metadata/schema.pbtxt.orig'):
    assert not output_layout.LISTED_NAME.match(name) and not output_layout.FIXED_NAME.match(name), name


def test_errors_files_are_named_in_order_and_said_as_one_pattern():
  assert output_layout.errors_files(3) == ['errors-00000-of-00003.jsonl', 'errors-00001-of-00003.jsonl',
                                           'errors-00002-of-00003.jsonl']
  assert all(output_layout.LISTED_NAME.match(name) for name in output_layout.errors_files(3))
  assert output_layout.errors_pattern(1) == 'errors-00000-of-00001.jsonl'
  assert fnmatch.fnmatchcase(output_layout.errors_file(2, 3), output_layout.errors_pattern(3))


def test_every_fixed_file_of_an_output_is_recognised():
  fixed = [output_layout.RUN_RECORD, output_layout.OLD_RUN_RECORD, output_layout.LABELS_TXT, output_layout.LABEL_MAP,
           output_layout.TFDS_DATASET_INFO, output_layout.TFDS_FEATURES, output_layout.LOCK,
           *(output_layout.tfds_label_names(schema) for schema in schemas.SCHEMAS), output_layout.OLD_TFDS_LABEL_NAMES,
           f'transform_fn/assets/{output_layout.VOCABULARY_FILE}', 'transform_fn/saved_model.pb',
           'transform_fn/variables/variables.data-00000-of-00001', 'metadata/schema.pbtxt',
           'transformed_metadata/schema.pbtxt.tmp' + '0' * 32,
           output_layout.staged('20270101T000000Z-abcdef', output_layout.FAILED_RUN_LOG)]
  assert [name for name in fixed if not output_layout.FIXED_NAME.match(name)] == []
  assert output_layout.tfds_label_names('default') == 'image.class.label.labels.txt'
