"""What --runner=DirectRunner runs on, and what other runners get."""
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner.fn_runner import FnApiRunner
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
