"""What --runner=DirectRunner runs on: Beam's FnApiRunner, without the Prism attempt,
its CPU work handed to the local worker pool (workers.py).

Beam's DirectRunner first tries Prism, which downloads a runner binary and moves
every element through gRPC to SDK workers, then falls back to the FnApiRunner.
Offline the attempt fails, at a cost a small run notices (the pipeline is
translated twice); online it would trade the in-process engine for a slower
one. This batch pipeline needs nothing Prism adds, so it gets what DirectRunner
falls back to, set up as DirectRunner does (its options reach multi-process SDK
workers).
"""
from typing import Optional

from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions
from apache_beam.portability.api import beam_provision_api_pb2
from apache_beam.runners.portability.fn_api_runner import fn_runner
from apache_beam.runners.portability.portable_runner import JobServiceHandle
from apache_beam.runners.runner import PipelineRunner

from beam_pipeline.beam import workers

# What --runner may say for the DirectRunner.
DIRECT_RUNNERS = {'directrunner', 'direct', 'switchingdirectrunner'}


def is_direct(options: PipelineOptions) -> bool:
  runner = options.view_as(StandardOptions).runner
  return runner is None or runner.lower() in DIRECT_RUNNERS


def runs_in_process(options: PipelineOptions) -> bool:
  """Whether the DoFns run in this process (the DirectRunner's default mode), where the
  worker pool can serve them."""
  return (is_direct(options) and options.view_as(DirectOptions).direct_running_mode != 'multi_processing'
          and workers.available())


def runner_for(options: PipelineOptions) -> Optional[PipelineRunner]:
  """The FnApiRunner for the DirectRunner (the default); None to let Beam pick any other runner."""
  if not is_direct(options):
    return None
  encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
  return fn_runner.FnApiRunner(provision_info=fn_runner.ExtendedProvisionInfo(
      beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)))
