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
"""
import runpy
import sys

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
