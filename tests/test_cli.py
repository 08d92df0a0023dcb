"""The real command, as users and Airflow run it: exit codes and one-line errors."""
import gc
import os
import tempfile

import pytest

from beam_pipeline import cli
from helpers import photos
from helpers.commands import convert, run_cli
from helpers.photos import write_sample_set


def test_converts_the_sample_set_and_says_where_it_went(tmp_path):
  count = write_sample_set(str(tmp_path / 'images'), per_class=4)
  result = run_cli(f'--input={tmp_path}/images', f'--output={tmp_path}/out', '--runner=DirectRunner',
                   '--max_error_fraction=0.5')
  assert result.returncode == 0, result.stderr[-3000:]
  summary = [line for line in result.stdout.splitlines() if not line.startswith('progress: ')]
  assert summary[0].startswith(f'Wrote 11 examples of 13 images, 2 classes, to {tmp_path}/out in ')
  assert 'Rejected 2 inputs: not_image 1, truncated 1' in result.stdout
  assert '\nSkipped 1 file as no images' in result.stdout  # dog/Thumbs.db
  assert (tmp_path / 'out' / 'beam_pipeline.json').exists()
  assert count == 14


@pytest.mark.parametrize('good', [True, False])
def test_a_run_leaves_nothing_in_the_temporary_directory(tmp_path, good):
  """Neither the forkserver's socket nor what the workers' libraries wrote (the graph's
  SavedModel leaves an autograph source file): the command and its workers end
  without the interpreter's exit, which would have removed them. (A short TMPDIR: the
  forkserver's socket path must fit in 108 bytes, which pytest-xdist's tmp_path can exceed.)"""
  write_sample_set(str(tmp_path / 'images'), per_class=2)
  with tempfile.TemporaryDirectory(prefix='bp-') as temporary:
    result = run_cli(f'--input={tmp_path}/images', f'--output={tmp_path}/out', '--max_error_fraction=1',
                     *([] if good else ['--splits=train']), environment={'TMPDIR': temporary})
    assert result.returncode == (0 if good else 2), result.stderr[-3000:]
    assert not os.listdir(temporary)


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
def test_bad_invocations_fail_before_any_work_with_one_line(args, message):
  """Only the error: not Beam's warning about an unknown flag, nor anything from the workers'
  forkserver, which had started importing TensorFlow meanwhile."""
  result = run_cli(*args)
  assert result.returncode == 2
  lines = result.stderr.splitlines()
  assert len(lines) == 1 and lines[0].startswith(message), result.stderr[-2000:]


def test_help_lists_our_options():
  result = run_cli('--help')
  assert result.returncode == 0
  for flag in ('--input', '--output', '--target_shard_mb', '--schema', '--compression', '--label_source'):
    assert flag in result.stdout


def test_inspect_summarizes_a_completed_output_and_refuses_anything_else(tmp_path):
  """The output to inspect is made in this process (the conversion as a command is the first
  test's); inspect itself runs as the command."""
  write_sample_set(str(tmp_path / 'images'), per_class=4)
  assert convert(f'--input={tmp_path}/images', f'--output={tmp_path}/out', '--max_error_fraction=0.5',
                 '--skip_transform') == 0
  result = run_cli('inspect', tmp_path / 'out')
  assert result.returncode == 0
  assert result.stdout.startswith(f'{tmp_path}/out holds 11 examples of 13 images, 2 classes, converted from '
                                  f'{tmp_path}/images on ')
  assert 'train-00000-of-00001.tfrecord: 11 examples' in result.stdout
  (tmp_path / 'out' / 'beam_pipeline.json').unlink()
  result = run_cli('inspect', tmp_path / 'out')
  assert result.returncode == 2 and 'is not a completed conversion' in result.stderr
  result = run_cli('inspect')
  assert result.returncode == 2 and result.stderr.count('\n') == 1 and result.stderr.startswith('error: ')


def test_splits_given_beside_split_folders_are_said_to_apply_to_the_rest_once(tmp_path):
  files = photos.labelled(('cat', 'dog'), 4, seed=3, size=(40, 30))
  photos.write_files(tmp_path / 'in', {f'{folder}/{name}': data for folder in ('train', 'val', 'extra')
                                       for name, data in files.items()})
  result = run_cli(f'--input={tmp_path}/in', f'--output={tmp_path}/out', '--splits=train=0.5,validation=0.5',
                   '--dedupe')
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stderr.splitlines() == [
      "note: the folders train/, val/ of --input set their images' splits; --splits=train=0.5,validation=0.5 "
      'assigns only the images outside them']
