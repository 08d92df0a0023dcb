"""The DAGs of deploy/airflow in a real Airflow (its own environment, .venv-airflow, which
`make test` builds): they load, and their task runs the conversion with Airflow's Beam
operator, on the DirectRunner (the daily update; test_airflow_readme.py runs the README's try of
the DAG) and on Dataflow (offline), or launches the Flex Template."""
import contextlib
import json
import os
import re
import select
import shlex
import stat
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from beam_pipeline import cli
from helpers import gcs_emulator, readme
from helpers.airflow_logs import AIRFLOW_BIN, TIMEOUT
from helpers.commands import ROOT
from helpers.dataflow import JOB_ID, OFFLINE
from helpers.dataset_reader import bucket_files, local_files, read_output

DAGS = ROOT / 'deploy' / 'airflow' / 'dags'
TASK = ROOT / 'tests' / 'helpers' / 'airflow_task.py'


class Airflow:
  """One Airflow process (helpers/airflow_task.py) in an Airflow home, running the tests' Airflow
  commands in turn: each a process of its own would take seconds of CPU to start Airflow."""

  def __init__(self, home: Path, process: subprocess.Popen):
    self.home = home
    self.process = process

  def run(self, request: dict, log: Path) -> dict:
    """The process's answer to ``request`` (helpers/airflow_task.py), with the text of ``log``,
    where it wrote the command's output, as 'log'."""
    self.process.stdin.write(json.dumps({**request, 'log': str(log)}) + '\n')
    self.process.stdin.flush()
    ready, _, _ = select.select([self.process.stdout], [], [], TIMEOUT)
    answer = self.process.stdout.readline() if ready else ''
    text = log.read_text() if log.exists() else ''
    if not answer:
      self.process.kill()
    assert answer, f'Airflow ended or timed out (see {self.home}/airflow.log): {text[-8000:]}'
    return {**json.loads(answer), 'log': text}


@pytest.fixture(scope='module')
def airflow(tmp_path_factory):
  """An Airflow installation: its home, with the database migrated, run by one Airflow process
  for every test; and the storage emulator (for Dataflow's staging and gs:// outputs). The
  DAGs need no `dags reserialize`: `tasks test` and `dags test` parse them and write them to
  the database themselves."""
  if not (AIRFLOW_BIN / 'airflow').exists():
    pytest.fail('no Airflow environment: `make airflow` (which `make test` runs) builds .venv-airflow')
  home = tmp_path_factory.mktemp('airflow')
  with gcs_emulator.serving(str(home), ('stage', 'data')):
    environment = dict(os.environ, AIRFLOW_HOME=str(home), AIRFLOW__CORE__DAGS_FOLDER=str(DAGS),
                       AIRFLOW__CORE__LOAD_EXAMPLES='False', AIRFLOW_VAR_TFRECORDS_PYTHON=sys.executable,
                       AIRFLOW_VAR_TFRECORDS_OUTPUT_ROOT='gs://data/runs',
                       # Composer defines it; the Dataflow hook reads it (and calls nothing with it here).
                       AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT=json.dumps({'conn_type': 'google_cloud_platform'}))
    with open(home / 'airflow.log', 'w', encoding='utf-8') as output:
      process = subprocess.Popen([str(AIRFLOW_BIN / 'python'), str(TASK)], env=environment, cwd=home,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=output, text=True)
      try:
        running = Airflow(home, process)
        done = running.run({'argv': ['db', 'migrate']}, home / 'migrate.log')
        assert done['exit'] == 0, done['log'][-3000:]
        yield running
      finally:
        with contextlib.suppress(OSError):  # a process killed on a timeout has no stdin left
          process.stdin.close()
        try:
          process.wait(timeout=60)
        except subprocess.TimeoutExpired:
          process.kill()
          process.wait()


def run_task(airflow: Airflow, dag_id: str, params: dict, record: Path,
             environment: Optional[Dict[str, str]] = None) -> str:
  """``airflow tasks test DAG convert 2026-11-24 -t PARAMS``, with the Variables (and the like)
  of ``environment`` for it alone; its log, once the task has succeeded (the command's exit
  code does not say)."""
  done = airflow.run({'argv': ['tasks', 'test', dag_id, 'convert', '2026-11-24', '-t', json.dumps(params)],
                      'environment': {**(environment or {}), 'AIRFLOW_TASK_RECORD': str(record)}},
                     record.with_name('task.log'))
  log = done['log']
  assert done['exit'] == 0 and 'new_state=success' in log, log[-8000:]
  return log


def command_line(log: str) -> List[str]:
  """The command the Beam operator ran, as it logged it."""
  line = next(line for line in log.splitlines() if 'Running command: ' in line)
  return shlex.split(line.split('Running command: ')[1].split(' [airflow.')[0])


def test_the_dags_load_in_airflows_dagbag(airflow, tmp_path):
  done = airflow.run({'dagbag': str(DAGS)}, tmp_path / 'dagbag.log')
  assert done['exit'] == 0, done['log'][-3000:]
  assert done['dagbag'] == {'errors': {}, 'dags': {'images_to_tfrecords': ['_BeamPythonPipeline'],
                                                  'images_to_tfrecords_daily': ['_BeamPythonPipeline'],
                                                  'images_to_tfrecords_flex': ['DataflowStartFlexTemplateOperator']}}


def test_the_daily_dag_updates_its_output_with_what_changed(airflow, sample_set, tmp_path):
  """A scheduled run takes its input and output from the Variables and converts only what
  changed since the day before: here, after a conversion of the same photos, nothing, which it
  says in one line."""
  out = tmp_path / 'out'
  assert cli.main([f'--input={sample_set}', f'--output={out}', '--incremental', '--max_error_fraction=0.5']) == 0
  earlier = {path.name: path.stat().st_mtime_ns for path in out.iterdir() if path.is_file()}
  environment = dict(AIRFLOW_VAR_TFRECORDS_DAILY_INPUT=str(sample_set), AIRFLOW_VAR_TFRECORDS_DAILY_OUTPUT=str(out))
  log = run_task(airflow, 'images_to_tfrecords_daily', {'options': {'max_error_fraction': 0.5}},
                 tmp_path / 'record.json', environment)
  assert command_line(log) == [sys.executable, '-m', 'beam_pipeline', '--runner=DirectRunner',
                               '--max_error_fraction=0.5', f'--input={sample_set}', f'--output={out}', '--incremental',
                               '--labels=airflow-version=v3-3-2']
  # Every photo unchanged, the two rejected ones and the skipped file too: nothing to do, and no
  # file of the output touched, its run record included.
  assert {path.name: path.stat().st_mtime_ns for path in out.iterdir() if path.is_file()} == earlier
  assert re.search(r'\[info\s*\] --incremental: nothing changed since the run of ', log), log[-8000:]


def test_the_task_submits_a_dataflow_job_and_airflow_finds_its_id(airflow, sample_set, tmp_path):
  """The Beam operator's command, rendered with the Dataflow Variables, run as Dataflow runs
  it (offline); Airflow reads the job id from its log, and the job writes the dataset."""
  gcs_emulator.upload('data', {f'in/{name}': data for name, data in local_files(sample_set).items()})
  python = tmp_path / 'python'  # the Variable tfrecords_python: this environment's, running jobs offline
  python.write_text(f'#!/bin/sh\nif [ "$1" = "-m" ]; then exec {sys.executable} {OFFLINE} "$@"; fi\n'
                    f'exec {sys.executable} "$@"\n')
  python.chmod(python.stat().st_mode | stat.S_IXUSR)
  environment = dict(AIRFLOW_VAR_TFRECORDS_PYTHON=str(python), AIRFLOW_VAR_TFRECORDS_PROJECT='test-project',
                     AIRFLOW_VAR_TFRECORDS_REGION='us-central1', AIRFLOW_VAR_TFRECORDS_TEMP_LOCATION='gs://stage/tmp',
                     AIRFLOW_VAR_TFRECORDS_CONTAINER_IMAGE='us-docker.pkg.dev/p/r/tfrecords:1')
  params = {'input': 'gs://data/in', 'output': 'gs://data/beam', 'runner': 'DataflowRunner',
            'options': {'max_error_fraction': 0.5, 'dedupe': True}}
  log = run_task(airflow, 'images_to_tfrecords', params, tmp_path / 'record.json', environment)
  command = command_line(log)
  job_name = next(arg for arg in command if arg.startswith('--job_name=images-to-tfrecords-'))
  assert command[:3] == [str(python), '-m', 'beam_pipeline'] and sorted(command[3:]) == sorted([
      '--runner=DataflowRunner', '--max_error_fraction=0.5', '--dedupe', '--input=gs://data/in',
      '--output=gs://data/beam', job_name, '--project=test-project', '--region=us-central1',
      '--labels=airflow-version=v3-3-2', '--temp_location=gs://stage/tmp',
      '--sdk_container_image=us-docker.pkg.dev/p/r/tfrecords:1', '--no_wait'])
  assert f'Created job with id: [{JOB_ID}]' in log
  info = json.loads(bucket_files('data', 'beam')['beam_pipeline.json'])
  assert info['num_examples'] == 27 and info['options']['dedupe']


def test_the_flex_dag_launches_the_template_with_the_runs_parameters(airflow, tmp_path):
  """The request body Airflow sends, with the default output dated for the run: the parameters
  as the template's launcher passes them to the entry file (test_flex_template runs it so)."""
  environment = dict(AIRFLOW_VAR_TFRECORDS_PROJECT='test-project', AIRFLOW_VAR_TFRECORDS_REGION='us-central1',
                     AIRFLOW_VAR_TFRECORDS_TEMP_LOCATION='gs://stage/tmp',
                     AIRFLOW_VAR_TFRECORDS_TEMPLATE='gs://stage/templates/images-to-tfrecords.json',
                     AIRFLOW_VAR_TFRECORDS_CONTAINER_IMAGE='us-docker.pkg.dev/p/r/tfrecords:1',
                     AIRFLOW_VAR_TFRECORDS_INPUT_ROOT='gs://data/flex-in')
  # The Variable's --input_root wins over one a run's options give: whoever triggers cannot widen it.
  run_task(airflow, 'images_to_tfrecords_flex',
           {'input': 'gs://data/flex-in', 'options': {'max_error_fraction': 0.5, 'skip_transform': True,
                                                      'input_root': 'gs://data'}},
           tmp_path / 'record.json', environment)
  record = json.loads((tmp_path / 'record.json').read_text())
  launch = record['body']['launchParameter']
  assert (record['project_id'], record['location']) == ('test-project', 'us-central1')
  assert launch['jobName'].startswith('images-to-tfrecords-')
  assert launch['containerSpecGcsPath'] == 'gs://stage/templates/images-to-tfrecords.json'
  assert launch['parameters'] == {'max_error_fraction': '0.5', 'skip_transform': 'true', 'input': 'gs://data/flex-in',
                                  'output': 'gs://data/runs/20261124T000000', 'input_root': 'gs://data/flex-in'}
  assert launch['environment'] == {'tempLocation': 'gs://stage/tmp',
                                   'sdkContainerImage': 'us-docker.pkg.dev/p/r/tfrecords:1'}


def test_the_readmes_python_task_converts_with_the_api_in_this_packages_environment(airflow, sample_set, tmp_path):
  """deploy/README.md's DAG of one external_python task calling beam_pipeline.convert, its interpreter
  this environment's, on local paths: the summary comes back to Airflow as plain values."""
  dag = next(block.text for block in readme.blocks() if block.language == 'python' and 'external_python' in block.text)
  dags = tmp_path / 'dags'
  dags.mkdir()
  (dags / 'python_task.py').write_text(
      dag.replace("'/opt/tfrecords/bin/python'", repr(sys.executable))
      .replace("'gs://my-bucket/PetImages'", repr(str(sample_set)))
      .replace("'gs://my-bucket/tfrecords/pets'", repr(str(tmp_path / 'out')))
      .replace('dedupe=True', 'dedupe=True, max_error_fraction=0.5'))
  done = airflow.run({'argv': ['dags', 'test', 'images_to_tfrecords_in_python'],
                      'environment': {'AIRFLOW__CORE__DAGS_FOLDER': str(dags)}}, tmp_path / 'dag.log')
  log = done['log']
  assert done['exit'] == 0 and 'state=success' in log and "'num_examples': 27" in log, log[-8000:]
  info, _ = read_output(tmp_path / 'out')
  assert info['num_examples'] == 27 and info['options']['dedupe']
