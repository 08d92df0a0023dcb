"""The real command, as users and Airflow run it: exit codes and one-line errors."""
import gc
import os
import subprocess
import sys

import pytest

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner.fn_runner import FnApiRunner
from google.protobuf import json_format

from beam_pipeline import cli, local_runner
from beam_pipeline.sample_images import write_sample_set

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_cli(*args):
  return subprocess.run([sys.executable, '-m', 'beam_pipeline', *map(str, args)], cwd=ROOT,
                        capture_output=True, text=True, timeout=300)


def test_converts_the_sample_set_and_says_where_it_went(tmp_path):
  count = write_sample_set(str(tmp_path / 'images'), per_class=4)
  result = run_cli(f'--input={tmp_path}/images', f'--output={tmp_path}/out', '--runner=DirectRunner',
                   '--max_error_fraction=0.5')
  assert result.returncode == 0, result.stderr[-3000:]
  assert f'in {tmp_path}/out' in result.stdout
  assert 'Rejected 3 inputs' in result.stdout
  assert (tmp_path / 'out' / 'dataset_info.json').exists()
  assert count == 14


def test_called_as_a_function_main_leaves_garbage_collection_as_it_found_it(tmp_path, capsys):
  """The run freezes the long-lived objects it built; a caller's process gets them back."""
  write_sample_set(str(tmp_path / 'images'), per_class=2)
  assert cli.main([f'--input={tmp_path}/images', f'--output={tmp_path}/out', '--max_error_fraction=1']) == 0
  assert gc.isenabled() and gc.get_freeze_count() == 0
  assert 'Wrote' in capsys.readouterr().out


@pytest.mark.parametrize('args, message', [
    (['--input=/no/such/dir', '--output=/tmp/x'], 'error: --input=/no/such/dir does not exist'),
    (['--output=/tmp/x'], 'error: --input is required'),
    (['--input=.', '--output=/tmp/x', '--compresion=gzip'], 'error: unknown option --compresion; did you mean'),
])
def test_bad_invocations_fail_before_any_work_with_one_line(args, message):
  """Only the error (and Beam's own warning about an unknown flag): nothing from the
  workers' forkserver, which had started importing TensorFlow meanwhile."""
  result = run_cli(*args)
  assert result.returncode == 2
  lines = [line for line in result.stderr.splitlines() if not line.startswith('WARNING:apache_beam')]
  assert len(lines) == 1 and lines[0].startswith(message), result.stderr[-2000:]


def test_help_lists_our_options():
  result = run_cli('--help')
  assert result.returncode == 0
  for flag in ('--input', '--output', '--target_shard_mb', '--schema', '--compression', '--labels'):
    assert flag in result.stdout


def test_inspect_summarizes_a_completed_output_and_refuses_anything_else(tmp_path):
  write_sample_set(str(tmp_path / 'images'), per_class=4)
  assert run_cli(f'--input={tmp_path}/images', f'--output={tmp_path}/out', '--runner=DirectRunner',
                 '--max_error_fraction=0.5', '--skip_transform').returncode == 0
  result = run_cli('inspect', tmp_path / 'out')
  assert result.returncode == 0
  assert result.stdout.startswith(f'11 examples (train: 11 in 1 shard(s)), 2 classes, in {tmp_path}/out')
  assert 'train-00000-of-00001.tfrecord: 11 examples' in result.stdout
  (tmp_path / 'out' / 'dataset_info.json').unlink()
  result = run_cli('inspect', tmp_path / 'out')
  assert result.returncode == 2 and 'is not a completed conversion' in result.stderr


@pytest.mark.parametrize('name', [None, 'DirectRunner', 'direct', 'SwitchingDirectRunner'])
def test_the_direct_runner_is_the_fn_api_runner_with_the_options(name):
  """No Prism attempt; the options reach the runner's SDK workers as DirectRunner sends them."""
  options = PipelineOptions(['--direct_num_workers=2', '--direct_running_mode=multi_processing'])
  runner = local_runner.runner_for(name, options)
  assert isinstance(runner, FnApiRunner)
  sent = json_format.MessageToDict(runner._provision_info.provision_info.pipeline_options)  # pylint: disable=protected-access
  assert sent['beam:option:direct_running_mode:v1'] == 'multi_processing'


def test_other_runners_are_left_to_beam():
  assert local_runner.runner_for('DataflowRunner', PipelineOptions([])) is None
