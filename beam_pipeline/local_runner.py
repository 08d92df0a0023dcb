"""The engine behind --runner=DirectRunner: Beam's FnApiRunner, without the Prism attempt.

Beam's DirectRunner first tries Prism, which downloads a runner binary and moves
every element through gRPC to SDK workers, then falls back to the FnApiRunner.
Offline the attempt fails (about 1 s of a small run: the pipeline is translated
twice); online it would trade the in-process engine for a slower one. This batch
pipeline needs nothing Prism adds, so it gets what DirectRunner falls back to,
set up as DirectRunner does (its options reach multi-process SDK workers).
"""
from typing import Optional

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability.api import beam_provision_api_pb2
from apache_beam.runners.portability.fn_api_runner import fn_runner
from apache_beam.runners.portability.portable_runner import JobServiceHandle
from apache_beam.runners.runner import PipelineRunner

from beam_pipeline import workers


def runner_for(runner_name: Optional[str], options: PipelineOptions) -> Optional[PipelineRunner]:
  """The FnApiRunner for the DirectRunner (the default); None to let Beam pick any other runner."""
  if runner_name is not None and runner_name.lower() not in workers.DIRECT_RUNNERS:
    return None
  encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
  return fn_runner.FnApiRunner(provision_info=fn_runner.ExtendedProvisionInfo(
      beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)))
