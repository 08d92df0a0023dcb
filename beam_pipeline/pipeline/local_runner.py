"""What --runner=DirectRunner runs on: Beam's FnApiRunner, without the Prism attempt,
its CPU work handed to the local worker pool (beam_pipeline/local).

Beam's DirectRunner first tries Prism, which downloads a runner binary and moves
every element through gRPC to SDK workers, then falls back to the FnApiRunner.
Offline the attempt fails, at a cost a small run notices (the pipeline is
translated twice); online it would trade the in-process engine for a slower
one. This batch pipeline needs nothing Prism adds, so it gets what DirectRunner
falls back to, set up as DirectRunner does (compat/beam_internals.py).
"""
from typing import Optional

from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions
from apache_beam.runners.runner import PipelineRunner

from beam_pipeline.compat import beam_internals
from beam_pipeline.local import workers

# What --runner may say for the DirectRunner.
DIRECT_RUNNERS = {'directrunner', 'direct', 'switchingdirectrunner'}


def is_direct(options: PipelineOptions) -> bool:
  runner = options.view_as(StandardOptions).runner
  return runner is None or runner.lower() in DIRECT_RUNNERS


def runs_in_process(options: PipelineOptions) -> bool:
  """Whether the DoFns run in this process (the DirectRunner's default mode), where the
  worker pool can serve them."""
  return is_direct(options) and not runs_in_sdk_workers(options) and workers.available()


def runs_in_sdk_workers(options: PipelineOptions) -> bool:
  """Whether the DoFns run in SDK worker processes this process starts (Beam's multi-process mode)."""
  return is_direct(options) and options.view_as(DirectOptions).direct_running_mode == 'multi_processing'


def runner_for(options: PipelineOptions) -> Optional[PipelineRunner]:
  """The FnApiRunner for the DirectRunner (the default); None to let Beam pick any other runner."""
  if not is_direct(options):
    return None
  return beam_internals.fn_api_runner(options)
