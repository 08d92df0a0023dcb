"""Runs Airflow's own commands for real, several in turn in one process of Airflow's own
environment, with only Airflow's calls to the Dataflow service replaced. Airflow takes seconds
of CPU to start (its imports, then the Execution API a task reports to), which one process
pays once for all of a file's commands instead of once for each.

Usage (with the Airflow venv's python, in the environment of an Airflow home):
  python tests/helpers/airflow_task.py

It reads one request a line on standard input, a JSON object:
  {"argv": ["tasks", "test", DAG_ID, TASK_ID, DATE, "-t", PARAMS], "environment": {...}, "log": PATH}
runs ``airflow ARGV`` in this process as the command line would, with the variables of
"environment" (Airflow Variables as AIRFLOW_VAR_*, configuration as AIRFLOW__*__*, the record
file AIRFLOW_TASK_RECORD) set for that command alone, and its standard output and error (the
task's log) written to "log"; then answers one line on standard output: {"exit": CODE}.
{"dagbag": FOLDER, "log": PATH} instead loads FOLDER in Airflow's DagBag and answers
{"exit": 0, "dagbag": {"errors": {file: error}, "dags": {dag_id: [task class names]}}}.

Airflow's waits on a Dataflow job (DataflowHook.wait_for_done) return at once: the
job, run offline by dataflow_offline.py behind the Beam operator's command, is done
by the time its id is logged. A Flex Template launch (DataflowHook.start_flex_template)
writes its request body to AIRFLOW_TASK_RECORD and answers with a job that is done: what the
template's launcher does with such a body, run the entry file with the parameters as
--name=value flags, is test_flex_template's.
"""
import contextlib
import json
import os
import sys
import traceback
from typing import Dict, Iterator, List, TextIO

from airflow import settings
from airflow.configuration import conf
from airflow.providers.google.cloud.hooks.dataflow import DataflowHook

JOB_ID = '2026-11-24_00_00_00-1234567890123456789'


def _wait_for_done(*_args, **_kwargs) -> None:
  return None


def _start_flex_template(_hook, body, location, project_id, on_new_job_id_callback=None, on_new_job_callback=None):
  with open(os.environ['AIRFLOW_TASK_RECORD'], 'w', encoding='utf-8') as f:
    json.dump({'body': body, 'location': location, 'project_id': project_id}, f)
  job = {'id': JOB_ID, 'projectId': project_id, 'location': location, 'currentState': 'JOB_STATE_DONE'}
  if on_new_job_callback:
    on_new_job_callback(job)
  return job


@contextlib.contextmanager
def _environment(variables: Dict[str, str]) -> Iterator[None]:
  """``variables`` set for one command, and the DAGs folder Airflow read when it started taken
  again from the configuration, as a process of its own would (settings reads it once)."""
  before = {name: os.environ.get(name) for name in variables}
  os.environ.update(variables)
  settings.DAGS_FOLDER = os.path.expanduser(conf.get('core', 'dags_folder'))
  try:
    yield
  finally:
    for name, value in before.items():
      if value is None:
        os.environ.pop(name, None)
      else:
        os.environ[name] = value
    settings.DAGS_FOLDER = os.path.expanduser(conf.get('core', 'dags_folder'))


@contextlib.contextmanager
def _output_to(log: str) -> Iterator[None]:
  """Standard output and error, this process's and its children's, into the file ``log``."""
  sys.stdout.flush()
  sys.stderr.flush()
  saved = [os.dup(1), os.dup(2)]
  with open(log, 'a', encoding='utf-8') as f:
    os.dup2(f.fileno(), 1)
    os.dup2(f.fileno(), 2)
    try:
      yield
    finally:
      sys.stdout.flush()
      sys.stderr.flush()
      os.dup2(saved[0], 1)
      os.dup2(saved[1], 2)
      for fd in saved:
        os.close(fd)


def _airflow(argv: List[str]) -> int:
  """``airflow ARGV``, its exit code (an exception's traceback in the log, as the command's)."""
  from airflow.__main__ import main  # pylint: disable=import-outside-toplevel
  sys.argv = ['airflow', *argv]
  try:
    main()
  except SystemExit as exit_:
    return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
  except Exception:  # pylint: disable=broad-except  # the command failed: say so, and take the next one
    traceback.print_exc()
    return 1
  return 0


def _dagbag(folder: str) -> dict:
  """What Airflow's DagBag loads from ``folder``: its import errors, and each DAG's task classes."""
  from airflow.dag_processing.dagbag import DagBag  # pylint: disable=import-outside-toplevel
  bag = DagBag(dag_folder=folder)
  return {'errors': {name: str(error) for name, error in bag.import_errors.items()},
          'dags': {dag_id: [type(task).__name__ for task in dag.tasks] for dag_id, dag in bag.dags.items()}}


def serve(requests: TextIO, answers: TextIO) -> None:
  """Each request of ``requests`` in turn (see the module's docstring), its answer on ``answers``."""
  for line in requests:
    request = json.loads(line)
    answer = {}
    with _output_to(request['log']), _environment(request.get('environment', {})):
      if 'dagbag' in request:
        answer = {'exit': 0, 'dagbag': _dagbag(request['dagbag'])}
      else:
        answer = {'exit': _airflow(request['argv'])}
    answers.write(json.dumps(answer) + '\n')
    answers.flush()


def main() -> None:
  DataflowHook.wait_for_done = _wait_for_done
  DataflowHook.start_flex_template = _start_flex_template
  # The answers on a standard output of their own: whatever Airflow prints goes to the logs.
  answers = os.fdopen(os.dup(1), 'w', encoding='utf-8')
  os.dup2(2, 1)
  serve(sys.stdin, answers)
  # Every command's work is in its files and the database by now: skip Python's finalization of
  # Airflow's modules and threads (a second or two of CPU, longer on the clock).
  os._exit(0)  # pylint: disable=protected-access


if __name__ == '__main__':
  main()
