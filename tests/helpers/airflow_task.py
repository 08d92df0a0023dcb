"""Runs one Airflow task for real, in Airflow's own environment, with only Airflow's
calls to the Dataflow service replaced.

Usage (with the Airflow venv's python):
  python tests/helpers/airflow_task.py RECORD DAG_ID TASK_ID DATE PARAMS_JSON

It runs ``airflow tasks test DAG_ID TASK_ID DATE -t PARAMS_JSON`` in this process.
Airflow's waits on a Dataflow job (DataflowHook.wait_for_done) return at once: the
job, run offline by dataflow_offline.py behind the Beam operator's command, is done
by the time its id is logged. A Flex Template launch (DataflowHook.start_flex_template)
writes its request body to RECORD and does what the template's launcher does: runs
the entry file with the parameters as --name=value flags and Dataflow's own options
(offline, through dataflow_offline.py, with the Python of the Variable
tfrecords_python).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

from airflow.providers.google.cloud.hooks.dataflow import DataflowHook

HELPERS = Path(__file__).resolve().parent
ROOT = HELPERS.parents[1]
JOB_ID = '2026-11-24_00_00_00-1234567890123456789'


def _wait_for_done(*_args, **_kwargs) -> None:
  return None


def _start_flex_template(_hook, body, location, project_id, on_new_job_id_callback=None, on_new_job_callback=None):
  with open(os.environ['AIRFLOW_TASK_RECORD'], 'w', encoding='utf-8') as f:
    json.dump({'body': body, 'location': location, 'project_id': project_id}, f)
  launch = body['launchParameter']
  environment = launch.get('environment', {})
  flags = [f'--{name}={value}' for name, value in launch['parameters'].items()]
  flags += ['--runner=DataflowRunner', f'--project={project_id}', f'--region={location}',
            f'--temp_location={environment["tempLocation"]}', f'--job_name={launch["jobName"]}',
            f'--sdk_container_image={environment["sdkContainerImage"]}']
  subprocess.run([os.environ['AIRFLOW_VAR_TFRECORDS_PYTHON'], str(HELPERS / 'dataflow_offline.py'),
                  str(ROOT / 'deploy' / 'dataflow' / 'main.py'), *flags], check=True)
  job = {'id': JOB_ID, 'projectId': project_id, 'location': location, 'currentState': 'JOB_STATE_DONE'}
  if on_new_job_callback:
    on_new_job_callback(job)
  return job


def main() -> None:
  record, dag_id, task_id, date, params = sys.argv[1:6]
  os.environ['AIRFLOW_TASK_RECORD'] = record
  DataflowHook.wait_for_done = _wait_for_done
  DataflowHook.start_flex_template = _start_flex_template
  from airflow.__main__ import main as airflow  # pylint: disable=import-outside-toplevel
  sys.argv = ['airflow', 'tasks', 'test', dag_id, task_id, date, '-t', params]
  airflow()


if __name__ == '__main__':
  main()
