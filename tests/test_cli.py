"""The real command, as users and Airflow run it: exit codes and one-line errors."""
import gc
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import List, NamedTuple

import pytest

from beam_pipeline import cli
from helpers import photos
from helpers.commands import in_process, run_cli
from helpers.photos import write_sample_set


class CommandRun(NamedTuple):
  folder: Path  # holding images/, the input, and out/, the output
  count: int  # files written to images/
  result: subprocess.CompletedProcess
  left: List[str]  # what the run left in its temporary directory


def _converting(folder: Path, *args: str) -> CommandRun:
  """The command converting the sample set, written to ``folder``/images, to ``folder``/out with
  ``args``, with a temporary directory of its own (a short TMPDIR: the forkserver's socket path
  must fit in 108 bytes, which pytest-xdist's tmp_path can exceed)."""
  count = write_sample_set(str(folder / 'images'), per_class=4)
  with tempfile.TemporaryDirectory(prefix='bp-') as temporary:
    result = run_cli(f'--input={folder}/images', f'--output={folder}/out', *args, environment={'TMPDIR': temporary})
    return CommandRun(folder, count, result, os.listdir(temporary))


@pytest.fixture(scope='module')
def sample_run(tmp_path_factory) -> CommandRun:
  """A conversion by the command: for the tests of what it says, what it leaves, and inspect."""
  return _converting(tmp_path_factory.mktemp('sample-run'), '--runner=DirectRunner', '--max_error_fraction=0.5')


@pytest.fixture(scope='module')
def bad_option_run(tmp_path_factory) -> CommandRun:
  """The command ended by a bad option once it had started its workers' forkserver: for the tests
  of what it says and what it leaves."""
  return _converting(tmp_path_factory.mktemp('bad-option-run'), '--max_error_fraction=1', '--splits=train')


def test_converts_the_sample_set_and_says_where_it_went(sample_run):
  folder, result = sample_run.folder, sample_run.result
  assert result.returncode == 0, result.stderr[-3000:]
  summary = [line for line in result.stdout.splitlines() if not line.startswith('progress: ')]
  assert summary[0].startswith(f'Wrote 11 examples of 13 images, 2 classes, to {folder}/out in ')
  assert 'Rejected 2 inputs: not_image 1, truncated 1' in result.stdout
  assert '\nSkipped 1 file as no images' in result.stdout  # dog/Thumbs.db
  assert (folder / 'out' / 'beam_pipeline.json').exists()
  assert sample_run.count == 14


@pytest.mark.parametrize('good', [True, False])
def test_a_run_leaves_nothing_in_the_temporary_directory(good, request):
  """Neither the forkserver's socket nor what the workers' libraries wrote (the graph's
  SavedModel leaves an autograph source file): the command and its workers end
  without the interpreter's exit, which would have removed them."""
  run = request.getfixturevalue('sample_run' if good else 'bad_option_run')
  assert run.result.returncode == (0 if good else 2), run.result.stderr[-3000:]
  assert not run.left


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
    (['--input=.', '--output=/tmp/x', '--labels=parent_dir'], 'error: --labels=parent_dir sets a Dataflow job label'),
    (['--input=.', '--output'], 'error: argument --output: expected one argument'),
])
def test_bad_invocations_fail_before_any_work_with_one_line(args, message, capfd, caplog):
  """Only the error, not Beam's warning about an unknown flag; in this process (the command's own
  process is the next test's)."""
  done = in_process(args, capfd, caplog)
  lines = done.stderr.splitlines()
  assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith(message), lines


def test_a_bad_invocation_of_the_command_says_only_the_error(bad_option_run):
  """Nor anything from the workers' forkserver, which the command started first and which had
  started importing TensorFlow meanwhile; the exit code is the process's."""
  result = bad_option_run.result
  assert result.returncode == 2
  lines = result.stderr.splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: --splits=train: give each split as name=fraction'), \
      result.stderr[-2000:]


def test_help_lists_our_options():
  result = run_cli('--help')
  assert result.returncode == 0
  for flag in ('--input', '--output', '--target_shard_mb', '--schema', '--compression', '--label_source'):
    assert flag in result.stdout


def test_inspect_summarizes_a_completed_output_and_refuses_anything_else(sample_run, tmp_path):
  """The output to inspect is the first test's; inspect itself runs as the command."""
  folder = sample_run.folder
  result = run_cli('inspect', folder / 'out')
  assert result.returncode == 0
  assert result.stdout.startswith(f'{folder}/out holds 11 examples of 13 images, 2 classes, converted from '
                                  f'{folder}/images on ')
  assert 'train-00000-of-00001.tfrecord: 11 examples' in result.stdout
  shutil.copytree(folder / 'out', tmp_path / 'out', ignore=shutil.ignore_patterns('beam_pipeline.json'))
  result = run_cli('inspect', tmp_path / 'out')
  assert result.returncode == 2 and 'is not a completed conversion' in result.stderr
  result = run_cli('inspect')
  assert result.returncode == 2 and result.stderr.count('\n') == 1 and result.stderr.startswith('error: ')


def test_splits_given_beside_split_folders_are_said_to_apply_to_the_rest_once(tmp_path, capfd, caplog):
  files = photos.labelled(('cat', 'dog'), 4, seed=3, size=(40, 30))
  photos.write_files(tmp_path / 'in', {f'{folder}/{name}': data for folder in ('train', 'val', 'extra')
                                       for name, data in files.items()})
  done = in_process([f'--input={tmp_path}/in', f'--output={tmp_path}/out', '--splits=train=0.5,validation=0.5',
                     '--dedupe'], capfd, caplog)
  assert done.returncode == 0 and done.stderr.splitlines() == [
      "note: the folders train/, val/ of --input set their images' splits; --splits=train=0.5,validation=0.5 "
      'assigns only the images outside them']
