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
from apache_beam.runners.worker import statesampler

from beam_pipeline.beam import workers

# What --runner may say for the DirectRunner.
DIRECT_RUNNERS = {'directrunner', 'direct', 'switchingdirectrunner'}
# The longest a step-time sampler of the in-process runner sleeps (Beam's default: 200).
SAMPLING_PERIOD_MS = 10


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
  sample_promptly()
  encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
  return fn_runner.FnApiRunner(provision_info=fn_runner.ExtendedProvisionInfo(
      beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)))


def sample_promptly() -> None:
  """Makes the step-time samplers of bundles run in this process sleep SAMPLING_PERIOD_MS at most.

  Each bundle's StateSampler measures its steps on a thread whose sleeps grow to
  the sampling period, and the bundle's end joins that thread, waiting out its
  sleep. After a long bundle (the validation, the writes) the runner would sit
  idle for up to 200 ms, and the workers with it. Beam has no option for the
  period (bundle_processor makes each sampler with the default argument), so this
  sets that default; tests/beam/test_local_runner.py checks a new sampler takes
  it, so a Beam that moves it fails there, loudly.
  """
  init = statesampler.StateSampler.__init__
  init.__defaults__ = tuple(SAMPLING_PERIOD_MS if value == statesampler.DEFAULT_SAMPLING_PERIOD_MS else value
                            for value in init.__defaults__)
