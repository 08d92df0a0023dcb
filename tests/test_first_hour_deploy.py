"""The first hour on the ways to run it (issue 38): a Dataflow dry run tried offline, with no
credentials; the Python API a notebook or an Airflow PythonOperator calls."""
import os
import re
import subprocess

import pytest
from apache_beam.portability.api import beam_runner_api_pb2

from helpers.commands import command, ROOT, TIMEOUT, user_environment

DATAFLOW = ('--runner=DataflowRunner', '--project=my-project', '--region=us-central1',
            '--temp_location=gs://my-bucket/tmp')


@pytest.fixture(scope='module')
def dry_run(sample_set, tmp_path_factory):
  """The README's Dataflow command with --dry_run=True and --setup_file, on the sample set, on a
  machine with no Google credentials at all (and no storage emulator: no network either)."""
  home = tmp_path_factory.mktemp('no-credentials')
  environment = {name: value for name, value in user_environment().items()
                 if name not in ('GOOGLE_APPLICATION_CREDENTIALS', 'STORAGE_EMULATOR_HOST')}
  environment.update(CLOUDSDK_CONFIG=str(home / 'gcloud'), HOME=str(home))
  return subprocess.run(command(f'--input={sample_set}', '--output=gs://my-bucket/tfrecords', *DATAFLOW,
                                '--setup_file=./setup.py', '--dry_run=True'),
                        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=TIMEOUT, check=False)


def test_a_dry_run_needs_no_credentials_and_says_where_the_job_went(dry_run):
  assert dry_run.returncode == 0, dry_run.stderr[-3000:]
  last = dry_run.stdout.strip().splitlines()[-1]
  found = re.fullmatch(r'Dry run: the job was translated and checked, and nothing was submitted; the job is in (.+)\.',
                       last)
  assert found, dry_run.stdout
  folder = found.group(1)
  assert sorted(os.listdir(folder)) == ['job.json', 'pipeline.pb', 'pipeline_options.json']
  with open(os.path.join(folder, 'pipeline.pb'), 'rb') as f:
    pipeline = beam_runner_api_pb2.Pipeline.FromString(f.read())
  names = [transform.unique_name for transform in pipeline.components.transforms.values()]
  assert any(name.startswith('WriteShards') or 'Write' in name for name in names), names


def test_a_dataflow_command_prints_nothing_of_beams_packaging(dry_run):
  """Beam's stager builds --setup_file's package with `python -m build`, and printed
  'No module named build' before falling back to setup.py sdist."""
  assert dry_run.returncode == 0, dry_run.stderr[-3000:]
  assert 'No module named' not in dry_run.stderr, dry_run.stderr[-3000:]
  assert 'Traceback' not in dry_run.stderr
