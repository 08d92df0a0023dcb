"""Runs a command as DataflowRunner has Dataflow run it, offline.

Usage: python tests/helpers/dataflow_offline.py (-m MODULE | SCRIPT) [ARGS...]

Only the call that would leave this machine is replaced: the Dataflow API's
CreateJob. In its place, the pipeline that the job request names (pipeline.pb,
where DataflowRunner staged it: on the storage emulator for a gs:// temp
location) runs in this process on Beam's FnApiRunner, its environments made
embedded, and the job is answered as done. All else is the command as users run
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

JOB_ID = '2026-11-24_00_00_00-1234567890123456789'  # helpers.dataflow.JOB_ID


def _run_the_job(_client, request, **_kwargs) -> dataflow.Job:
  options = dict(request.job.environment.sdk_pipeline_options['options'])
  with FileSystems.open(options['pipelineUrl']) as f:
    pipeline = beam_runner_api_pb2.Pipeline.FromString(f.read())
  for environment in pipeline.components.environments.values():
    environment.urn = python_urns.EMBEDDED_PYTHON
    environment.ClearField('payload')
    del environment.dependencies[:]
  fn_runner.FnApiRunner().run_via_runner_api(pipeline, PipelineOptions([]))
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
