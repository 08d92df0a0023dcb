"""Runs a command as DataflowRunner has Dataflow run it, offline.

Usage: python tests/helpers/dataflow_offline.py (-m MODULE | SCRIPT) [ARGS...]

Only the call that would leave this machine is replaced: the Dataflow API's
CreateJob. In its place, the pipeline that the job request names (pipeline.pb,
where DataflowRunner staged it: on the storage emulator for a gs:// temp
location) runs in this process on Beam's FnApiRunner, its environments made
embedded, with the pipeline options the job request carries (as Dataflow's workers
get them), and the job is answered as done. All else is the command as users run
it: option checks, translation, staging the package --setup_file builds, the
job request, Beam's log of the submission, waiting for the job.

``convert`` and ``in_process`` run the same in the caller's process (a test's), for
tests that check what the job writes or says rather than the command's process.
"""
import contextlib
import logging
import runpy
import subprocess
import sys
from typing import Iterator, Sequence

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability import python_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners.portability.fn_api_runner import fn_runner
from google.cloud import dataflow
from google.protobuf import json_format

JOB_ID = '2026-11-24_00_00_00-1234567890123456789'  # helpers.dataflow.JOB_ID


def _plain(value):
  """JSON as the job request carries it (a protobuf Struct, whose numbers are all floats),
  with whole numbers as ints again, as the options were given."""
  if isinstance(value, dict):
    return {key: _plain(item) for key, item in value.items()}
  if isinstance(value, list):
    return [_plain(item) for item in value]
  return int(value) if isinstance(value, float) and value.is_integer() else value


def _run_the_job(_client, request, **_kwargs) -> dataflow.Job:
  options = _plain(json_format.MessageToDict(dataflow.Environment.pb(request.job.environment).sdk_pipeline_options)
                   ['options'])
  with FileSystems.open(options['pipelineUrl']) as f:
    pipeline = beam_runner_api_pb2.Pipeline.FromString(f.read())
  for environment in pipeline.components.environments.values():
    environment.urn = python_urns.EMBEDDED_PYTHON
    environment.ClearField('payload')
    del environment.dependencies[:]
  # The job's own options, as a Dataflow worker reads them (sdk_worker_main._parse_pipeline_options).
  fn_runner.FnApiRunner().run_via_runner_api(pipeline, PipelineOptions.from_dictionary(options))
  return dataflow.Job(id=JOB_ID, project_id=request.project_id, location=request.location,
                      name=request.job.name, client_request_id=request.job.client_request_id,
                      current_state=dataflow.JobState.JOB_STATE_DONE)


@contextlib.contextmanager
def jobs_run_here() -> Iterator[None]:
  """CreateJob runs the job in this process (_run_the_job) while the block runs. The block's
  commands start, as in a process of their own, without the handler that shows Beam's lines
  of the submission (cli/launch.py adds it once a process, on the standard error of the time:
  an earlier test's capture, perhaps), and the one they add goes with the block."""
  create_job = dataflow.JobsV1Beta3Client.create_job
  submission = logging.getLogger('apache_beam.runners.dataflow.internal.apiclient')
  before = submission.handlers, submission.propagate, submission.level
  dataflow.JobsV1Beta3Client.create_job = _run_the_job
  submission.handlers = []
  try:
    yield
  finally:
    dataflow.JobsV1Beta3Client.create_job = create_job
    submission.handlers, submission.propagate = before[:2]
    submission.setLevel(before[2])


def convert(*args: object) -> int:
  """The exit code of ``python dataflow_offline.py -m beam_pipeline ARGS``, run in this process."""
  from beam_pipeline import cli  # pylint: disable=import-outside-toplevel
  with jobs_run_here():
    return cli.main([*map(str, args)])


def in_process(args: Sequence[object], capfd, caplog) -> subprocess.CompletedProcess:
  """``python dataflow_offline.py -m beam_pipeline ARGS`` run in this process, as its completed process
  would be (helpers.commands.in_process)."""
  from helpers import commands  # pylint: disable=import-outside-toplevel  # tests/ is on the path of tests only
  with jobs_run_here():
    return commands.in_process([*map(str, args)], capfd, caplog)


def main() -> None:
  dataflow.JobsV1Beta3Client.create_job = _run_the_job
  if sys.argv[1] == '-m':
    module, sys.argv = sys.argv[2], [sys.argv[2], *sys.argv[3:]]
    runpy.run_module(module, run_name='__main__', alter_sys=True)
  else:
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name='__main__')


if __name__ == '__main__':
  main()
