"""What convert() returns: the summary --json prints, as typed values."""
from beam_pipeline.core.output.conversion_summary import ConversionSummary, SplitSummary, Submission

DATA = {
    'output': 'gs://b/out', 'num_inputs': 12, 'num_examples': 10, 'num_classes': 2,
    'splits': {'train': {'num_examples': 10, 'num_bytes': 300, 'num_shards': 2, 'classes': {'cat': 4, 'dog': 6},
                         'shards': [{'file': 'train-00000-of-00002.tfrecord', 'num_examples': 5, 'num_bytes': 150},
                                    {'file': 'train-00001-of-00002.tfrecord', 'num_examples': 5, 'num_bytes': 150}]}},
    'num_errors': 2, 'errors_by_reason': {'empty': 2}, 'errors_file': 'gs://b/out/errors-00000-of-00001.jsonl',
    'duplicates': {'num_groups': 0, 'num_extra_copies': 0, 'removed': False}, 'num_damaged_jpeg': 0,
    'strict_jpeg': False, 'wall_seconds': 2.0, 'images_per_second': 6.0,
}


def test_the_summary_has_the_jsons_numbers_and_prints_as_the_command_does():
  summary = ConversionSummary.of(DATA, 'Wrote 10 examples ...')
  assert (summary.output, summary.num_inputs, summary.num_examples, summary.num_errors) == ('gs://b/out', 12, 10, 2)
  assert summary.splits == {'train': SplitSummary(10, 300, 2, {'cat': 4, 'dog': 6}, [
      'gs://b/out/train-00000-of-00002.tfrecord', 'gs://b/out/train-00001-of-00002.tfrecord'])}
  assert summary.errors_by_reason == {'empty': 2} and summary.wall_seconds == 2.0
  assert str(summary) == 'Wrote 10 examples ...'
  assert summary.as_dict() == DATA and summary.as_dict() is not summary.as_dict()
  assert 'text=' not in repr(summary) and 'num_examples=10' in repr(summary)


def test_a_submission_is_its_line():
  assert str(Submission('Dry run: ...')) == 'Dry run: ...'
