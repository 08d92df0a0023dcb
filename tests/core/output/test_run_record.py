"""The typed run record: the JSON it writes is the text outputs have always held, and records
of 0.1 (dataset_info.json, fields added since absent) are still read.

run_records/beam_pipeline-0.2.json was written by run_totals.build and dumps as they
were before the record was typed (commit 41947a2), from the inputs below;
run_records/dataset_info-0.1.json by the last 0.1 (the parent of commit bcf05be).
"""
import dataclasses
import json
import pathlib

import pytest

from beam_pipeline.core.output import run_totals
from beam_pipeline.core.messages import ShardReport
from beam_pipeline.core.output.run_record import RunRecord
from beam_pipeline.core.settings import EmbeddingSpec

RECORDS = pathlib.Path(__file__).parent / 'run_records'
CREATED = '2026-11-26T09:00:00+00:00'


def _report(split, index, count, labels, sides, sizes):
  name = f'{split}-{index:05d}-of-{count:05d}.tfrecord'
  return ShardReport(split=split, file=name, num_examples=len(labels), num_bytes=sum(sizes) + 16 * len(labels),
                     num_reencoded=1, num_resized=1, num_rotated=1, num_damaged_jpeg=1, index_file=name + '.idx',
                     **run_totals.image_statistics(labels, sides, sizes))


def built() -> RunRecord:
  """The record of the inputs the 0.2 fixture was written from."""
  reports = [_report('train', 1, 2, ['dog', 'cat', 'dog'], [4000, 64, 300], [900_000, 700, 3000]),
             _report('validation', 0, 1, ['cat', 'ünïcode'], [33, 1], [0, 5000]),
             _report('train', 0, 2, ['ünïcode'], [200], [60_000])]
  settings = {'input': 'gs://bucket/photos/**', 'input_kind': 'directory', 'output': 'gs://bucket/out',
              'schema': 'default', 'compression': 'none', 'index_files': True,
              'splits': {'train': 0.8, 'validation': 0.2}, 'max_side': None, 'strict_jpeg': False,
              'embedding_model': 'gs://bucket/model.keras', 'embedding_only': False}
  spec = EmbeddingSpec('gs://bucket/model.keras', 32, False, 16, 'ab' * 32, (4, 4, 2))
  groups = [['gs://bucket/photos/a.jpg', 'gs://bucket/photos/b.jpg', 'gs://bucket/photos/c.jpg']]
  record = run_totals.build(
      written=run_totals.written_totals(reports), labels=['cat', 'dog', 'ünïcode'],
      errors_by_reason={'truncated': 1, 'damaged_jpeg': 2}, num_errors_files=1,
      duplicates={'num_groups': 1, 'num_extra_copies': 2, 'groups': groups}, dedupe=True, num_removed=2,
      settings=settings, runner='DataflowRunner', embedding=run_totals.embedding_info(spec, 'default'))
  return dataclasses.replace(record, created=CREATED)


def test_the_json_written_is_the_text_of_the_untyped_record():
  assert built().to_json() == (RECORDS / 'beam_pipeline-0.2.json').read_text(encoding='utf-8')


def test_a_record_reads_back_as_it_was_written(tmp_path):
  record = built()
  (tmp_path / 'beam_pipeline.json').write_text(record.to_json(), encoding='utf-8')
  read = RunRecord.read(str(tmp_path))
  assert read == record
  assert read.splits['train'].shards[1].index_file == 'train-00001-of-00002.tfrecord.idx'
  assert read.embedding.output_shape == [4, 4, 2] and read.duplicates.num_removed == 2


def test_a_shard_without_an_index_file_is_written_without_the_key():
  record = built()
  shard = dataclasses.replace(record.splits['validation'].shards[0], index_file=None)
  assert shard.as_dict() == {'file': 'validation-00000-of-00001.tfrecord', 'num_examples': 2, 'num_bytes': 5032}


def test_a_record_of_0_1_is_read_from_dataset_info_json(tmp_path):
  text = (RECORDS / 'dataset_info-0.1.json').read_text(encoding='utf-8')
  (tmp_path / 'dataset_info.json').write_text(text, encoding='utf-8')
  record = RunRecord.read(str(tmp_path))
  assert (record.version, record.compression, record.num_rotated, record.embedding) == ('0.1.0', 'gzip', 0, None)
  assert [shard.file for shard in record.splits['train'].shards] == ['train-00000-of-00002.tfrecord.gz',
                                                                     'train-00001-of-00002.tfrecord.gz']
  assert record.splits['train'].shards[0].index_file is None
  assert record.as_dict() == {**json.loads(text), 'num_rotated': 0}


def test_fields_earlier_0_1_records_lack_have_the_values_they_imply():
  old = json.loads((RECORDS / 'dataset_info-0.1.json').read_text(encoding='utf-8'))
  for key in ('num_damaged_jpeg', 'errors_files', 'embedding'):
    del old[key]
  del old['duplicates']['num_removed']
  old['a_field_of_a_later_version'] = 1
  record = RunRecord.from_dict(old)
  assert (record.num_damaged_jpeg, record.duplicates.num_removed, record.embedding) == (0, 0, None)
  assert record.errors_files == [old['errors_file']]


def test_tensorflow_datasets_own_dataset_info_json_is_no_run_record(tmp_path):
  (tmp_path / 'dataset_info.json').write_text(json.dumps({'fileFormat': 'tfrecord'}))
  with pytest.raises(FileNotFoundError, match='is not a completed conversion'):
    RunRecord.read(str(tmp_path))
