"""What --runner=DirectRunner runs on, and what other runners get."""
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner.fn_runner import FnApiRunner

from beam_pipeline.pipeline import local_runner


@pytest.mark.parametrize('name', [None, 'DirectRunner', 'direct', 'SwitchingDirectRunner'])
def test_the_direct_runner_is_the_fn_api_runner_with_the_options(name):
  """No Prism attempt (tests/compat/test_beam_internals.py checks the options reach it)."""
  assert isinstance(local_runner.runner_for(PipelineOptions([f'--runner={name}'] if name else [])), FnApiRunner)


def test_other_runners_are_left_to_beam():
  assert local_runner.runner_for(PipelineOptions(['--runner=DataflowRunner'])) is None
