"""What --runner=DirectRunner runs on, and what other runners get."""
import inspect

import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner.fn_runner import FnApiRunner
from apache_beam.runners.worker import statesampler
from apache_beam.utils import counters
from google.protobuf import json_format

from beam_pipeline.beam import local_runner


@pytest.mark.parametrize('name', [None, 'DirectRunner', 'direct', 'SwitchingDirectRunner'])
def test_the_direct_runner_is_the_fn_api_runner_with_the_options(name):
  """No Prism attempt; the options reach the runner's SDK workers as DirectRunner sends them."""
  argv = ['--direct_num_workers=2', '--direct_running_mode=multi_processing'] + ([f'--runner={name}'] if name else [])
  runner = local_runner.runner_for(PipelineOptions(argv))
  assert isinstance(runner, FnApiRunner)
  sent = json_format.MessageToDict(runner._provision_info.provision_info.pipeline_options)  # pylint: disable=protected-access
  assert sent['beam:option:direct_running_mode:v1'] == 'multi_processing'


def test_other_runners_are_left_to_beam():
  assert local_runner.runner_for(PipelineOptions(['--runner=DataflowRunner'])) is None


def test_the_runners_step_time_samplers_sleep_briefly_and_still_stop():
  """A bundle's end waits out its sampler's sleep, so the in-process runner keeps it short;
  fails, loudly, if Beam stops making samplers with its default period."""
  local_runner.runner_for(PipelineOptions([]))
  sampler = statesampler.StateSampler('step', counters.CounterFactory())
  assert sampler.sampling_period_ms == local_runner.SAMPLING_PERIOD_MS < statesampler.DEFAULT_SAMPLING_PERIOD_MS
  sampler.start()
  with sampler.scoped_state('step', 'process'):
    pass
  sampler.stop()
  assert sampler.finished
  assert list(inspect.signature(statesampler.StateSampler).parameters) == [
      'prefix', 'counter_factory', 'sampling_period_ms']
