"""The first hour on the ways to run it (issue 38): a Dataflow dry run tried offline, with no
credentials; the Python API a notebook or an Airflow PythonOperator calls. (The README's Usage
in a shell fresh from `make run` is test_readme_blocks.py's.)"""
import glob
import json
import os
import re
import subprocess
import sys

import pandas
import pytest
from apache_beam.portability.api import beam_runner_api_pb2

import beam_pipeline
from helpers import readme
from helpers.commands import convert, error_line, in_process, ROOT, TIMEOUT, user_environment
from helpers.dataset_reader import assert_same_dataset, local_files, read_output


def test_a_dry_run_needs_no_credentials_and_says_where_the_job_went(sample_set, tmp_path):
  """deploy/README.md's dry-run block, as written, in a folder laid out as the repository after `make run`
  (work/sample-images: the sample set), on a machine with no Google credentials at all (and no
  storage emulator: no network either). test_readme_blocks leaves the block to this test."""
  block = next(block for block in readme.blocks() if '--dry_run=True' in block.text)
  (tmp_path / 'work').mkdir()
  (tmp_path / 'work' / 'sample-images').symlink_to(sample_set)
  environment = readme.shell_environment()
  for name in ('GOOGLE_APPLICATION_CREDENTIALS', 'STORAGE_EMULATOR_HOST'):
    environment.pop(name, None)
  environment.update(CLOUDSDK_CONFIG=str(tmp_path / 'home' / 'gcloud'), HOME=str(tmp_path / 'home'))
  dry_run = subprocess.run(['bash', '-euo', 'pipefail', '-c', block.text], cwd=tmp_path, env=environment,
                           capture_output=True, text=True, timeout=TIMEOUT, check=False)
  assert dry_run.returncode == 0, dry_run.stderr[-3000:]
  last = dry_run.stdout.strip().splitlines()[-1]
  found = re.fullmatch(r'Dry run: the job was translated and checked, and nothing was submitted; the job is in (.+)\.',
                       last)
  assert found, dry_run.stdout
  job = found.group(1)
  assert sorted(os.listdir(job)) == ['job.json', 'pipeline.pb', 'pipeline_options.json']
  with open(os.path.join(job, 'pipeline.pb'), 'rb') as f:
    pipeline = beam_runner_api_pb2.Pipeline.FromString(f.read())
  names = [transform.unique_name for transform in pipeline.components.transforms.values()]
  assert any(name.startswith('WriteShards') or 'Write' in name for name in names), names
  assert 'Traceback' not in dry_run.stderr


def test_importing_the_package_imports_neither_beam_nor_tensorflow_nor_pandas():
  """A notebook imports it first: the conversion imports Beam and TensorFlow when it runs, and
  pandas only ever comes with the caller's DataFrame."""
  done = subprocess.run([sys.executable, '-c', 'import sys, beam_pipeline\n'
                         'print(beam_pipeline.convert, beam_pipeline.ConversionError, beam_pipeline.__version__)\n'
                         'print([m for m in ("apache_beam", "tensorflow", "pandas", "numpy") if m in sys.modules])'],
                        cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT, check=False)
  assert done.returncode == 0, done.stderr[-2000:]
  assert done.stdout.splitlines()[-1] == '[]'


def test_convert_writes_what_the_command_writes_and_returns_its_summary(sample_set, tmp_path, capsys):
  options = {'max_error_fraction': 0.5, 'splits': 'train=0.75,validation=0.25', 'dedupe': True}
  assert convert(f'--input={sample_set}', f'--output={tmp_path}/command', *(f'--{name}={value}' for name, value in
                                                                          options.items())) == 0
  printed = [line for line in capsys.readouterr().out.splitlines() if not line.startswith('progress: ')]
  summary = beam_pipeline.convert(input=sample_set, output=str(tmp_path / 'api'), runner='DirectRunner', **options)
  assert_same_dataset(local_files(tmp_path / 'api'), local_files(tmp_path / 'command'))
  info, records = read_output(tmp_path / 'api')
  assert isinstance(summary, beam_pipeline.ConversionSummary)
  assert (summary.output, summary.num_inputs, summary.num_examples, summary.num_errors, summary.num_skipped) == (
      str(tmp_path / 'api'), 29, 27, 2, 1)  # dog/Thumbs.db skipped
  assert {name: split.num_examples for name, split in summary.splits.items()} == {
      name: len(split_records) for name, split_records in records.items()}
  assert summary.splits['train'].files == [str(tmp_path / 'api' / shard['file'])
                                           for shard in info['splits']['train']['shards']]
  assert summary.errors_by_reason == info['errors_by_reason'] and os.path.exists(summary.errors_file)
  assert str(summary).splitlines()[1:] == [line.replace('command', 'api') for line in printed[1:]]


@pytest.mark.parametrize('keywords', [
    {'input': '/no/such/dir'},
    {'splitz': 'train=0.8'},
    {'splits': 'train=0.8,validation=0.3'},
    {'max_side': 'big'},
    {'dedupe': 'maybe'},
    {'runner': 'DataflowRunner'},
])
def test_convert_raises_the_commands_one_line_errors(sample_set, tmp_path, keywords, capfd, caplog):
  """Each keyword as the command's flag gives the command's error line: the call raises it. The
  command runs in this process (test_cli checks a bad option's line and exit code as a process)."""
  keywords = {'input': str(sample_set), 'output': str(tmp_path / 'out'), **keywords}
  result = in_process([f'--{name}={value}' for name, value in keywords.items()], capfd, caplog)
  with pytest.raises(beam_pipeline.ConversionError) as raised:
    beam_pipeline.convert(**keywords)
  assert raised.value.exit_code == result.returncode == 2
  assert f'error: {raised.value.message}' == error_line(result.stderr)


def test_a_run_that_fails_raises_what_the_command_says_after_its_error_line(sample_set, tmp_path):
  with pytest.raises(beam_pipeline.ConversionError) as raised:
    beam_pipeline.convert(input=sample_set, output=str(tmp_path / 'out'), max_error_fraction=0.01)
  failed = raised.value
  assert failed.exit_code == 1 and failed.message.startswith('error budget exceeded: 2 of 29 inputs (6.9%) were '
                                                             'rejected as they were checked')
  assert failed.details == ('Nothing was committed: --output=' + str(tmp_path / 'out') + ' holds no complete dataset.',)
  assert str(failed) == failed.message + '\n  ' + failed.details[0]


def test_a_dataframe_converts_as_its_manifest_and_again_as_the_same_input(sample_set, tmp_path, monkeypatch):
  monkeypatch.chdir(sample_set)  # the frame's paths are relative to the notebook's folder
  paths = sorted(glob.glob('*/*.jpg'))
  frame = pandas.DataFrame({'uri': paths, 'label': [path.split('/')[0] for path in paths],
                            'split': ['validation' if index % 4 == 0 else 'train' for index in range(len(paths))]})
  first = beam_pipeline.convert(input=frame, output=str(tmp_path / 'out'), max_error_fraction=0.5)
  info, records = read_output(tmp_path / 'out')
  written = {record['image/filename'].decode(): record for split in records.values() for record in split}
  expected = {str(sample_set / path): (label, split) for path, label, split in frame.itertuples(index=False)}
  assert set(written) <= set(expected) and len(written) == first.num_examples == len(paths) - first.num_errors
  assert all(record['image/class/text'].decode() == expected[uri][0] for uri, record in written.items())
  assert {name: len(split) for name, split in records.items()} == {
      name: sum(1 for uri in written if expected[uri][1] == name) for name in ('train', 'validation')}
  manifest = info['options']['input']
  assert manifest.endswith('.jsonl') and [json.loads(line)['uri'] for line in open(manifest)] == [
      str(sample_set / path) for path in paths]
  beam_pipeline.convert(input=frame.copy(), output=str(tmp_path / 'out'), max_error_fraction=0.5)
  assert read_output(tmp_path / 'out')[0]['options']['input'] == manifest  # a rerun of the same input


def test_convert_called_by_a_script_without_a_main_guard(sample_set, tmp_path):
  """The call at a script's top level, as Airflow's external_python task runs it: the local
  workers never run the script again (multiprocessing would, as __mp_main__, in each)."""
  script = tmp_path / 'script.py'
  script.write_text(f'import beam_pipeline\n'
                    f'summary = beam_pipeline.convert(input={str(sample_set)!r}, output={str(tmp_path / "out")!r}, '
                    f'max_error_fraction=0.5)\n'
                    f'print("converted", summary.num_examples)\n')
  done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=user_environment(), capture_output=True,
                        text=True, timeout=TIMEOUT, check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  assert [line for line in done.stdout.splitlines() if line.startswith('converted')] == ['converted 27']
