"""Whether a run may replace an earlier output: silently from the same input, only with
--overwrite from another."""
import os
import pathlib

import pytest

from beam_pipeline.core.output import earlier_input
from beam_pipeline.core.output.run_record import RunRecord
from beam_pipeline.core.settings import InputSpec
from beam_pipeline.core.user_errors import UsageError

from helpers.values import settings

EARLIER = RunRecord.from_json((pathlib.Path(__file__).parent / 'run_records' / 'beam_pipeline-0.2.json').read_text())


def test_the_same_input_however_written_is_the_retry_path(tmp_path, monkeypatch):
  (tmp_path / 'photos').mkdir()
  os.symlink(tmp_path / 'photos', tmp_path / 'link')
  monkeypatch.chdir(tmp_path)
  for recorded, given in (('photos/**', f'{tmp_path}/photos/**'), ('link/**', 'photos/**'),
                          ('gs://b/photos/**', 'gs://b/photos/**'), ('gs://b/m.csv', 'gs://b/m.csv')):
    assert earlier_input.same_input(recorded, given), (recorded, given)
  assert not earlier_input.same_input('photos/**', 'photos/**/*.jpg')
  assert not earlier_input.same_input('gs://b/photos/**', f'{tmp_path}/photos/**')


def test_another_input_needs_overwrite_and_is_refused_saying_what_it_would_replace():
  """EARLIER holds 6 examples from the folder gs://bucket/photos."""
  earlier_input.check(None, settings(input=InputSpec('directory', '/new/**')))  # a new output
  earlier_input.check(EARLIER, settings(input=InputSpec('directory', 'gs://bucket/photos/**'), output='gs://b/out'))
  earlier_input.check(EARLIER, settings(input=InputSpec('jsonl', '/new.jsonl'), overwrite=True))
  with pytest.raises(UsageError) as raised:
    earlier_input.check(EARLIER, settings(input=InputSpec('jsonl', '/new.jsonl'), output='gs://b/out'))
  assert str(raised.value) == ('--output=gs://b/out holds 6 examples converted from --input=gs://bucket/photos '
                               '(2026-11-26T09:00:00+00:00), which this run from --input=/new.jsonl would replace: '
                               'pass --overwrite to replace them, or give another --output')
