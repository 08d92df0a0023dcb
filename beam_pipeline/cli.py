"""``python -m beam_pipeline``: check everything, run the pipeline, print what was written.

``python -m beam_pipeline inspect OUTPUT`` summarizes a completed output.
"""
import argparse
import contextlib
import gc
import re
import sys
from concurrent.futures.process import BrokenProcessPool
from typing import Iterator, List, Optional

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.runner import PipelineState

from beam_pipeline import options as options_lib
from beam_pipeline import dataset_info, local_runner, output_dir, pipeline, workers
from beam_pipeline.dataset_info import ErrorBudgetExceeded
from beam_pipeline.reading import TransientReadError
from beam_pipeline.usage import UsageError


def main(argv: Optional[List[str]] = None) -> int:
  argv = sys.argv[1:] if argv is None else list(argv)
  if argv[:1] == ['inspect']:
    return inspect(argv[1:])
  if '-h' in argv or '--help' in argv:
    _print_help()
    return 0
  label_mode, beam_argv = options_lib.split_label_flag(argv)
  beam_options = PipelineOptions(beam_argv)
  try:
    settings = options_lib.validate(beam_options, label_mode)
    output_dir.prepare(settings.output)
  except UsageError as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  runner_name = beam_options.view_as(StandardOptions).runner
  runner = runner_name or 'DirectRunner'
  if workers.runs_in_process(beam_argv):
    workers.start()
  try:
    with _long_lived_objects():
      p = beam.Pipeline(runner=local_runner.runner_for(runner_name, beam_options), options=beam_options)
      pipeline.build(p, settings, runner)
    state = p.run().wait_until_finish()
  except Exception as e:  # runners wrap worker errors; ours carry a message for the user
    budget = re.search(re.escape(ErrorBudgetExceeded.PREFIX) + r'[^\n]*', str(e))
    if budget:
      print(f'error: {budget.group(0)}', file=sys.stderr)
      return 1
    if isinstance(e, BrokenProcessPool):
      print('error: a worker process ended abruptly (killed by the system, perhaps for memory) and the run '
            'stopped; nothing was committed; rerun to complete it', file=sys.stderr)
      return 1
    if isinstance(e, TransientReadError) or TransientReadError.__name__ in str(e):
      print(f'error: storage kept failing, so the run stopped (no image was rejected for it); '
            f'rerun when it recovers: {str(e).splitlines()[0]}', file=sys.stderr)
      return 1
    raise
  finally:
    gc.unfreeze()
    workers.shutdown()
  if state != PipelineState.DONE:
    print(f'error: the pipeline ended in state {state}', file=sys.stderr)
    return 1
  _print_summary(settings.output)
  return 0


@contextlib.contextmanager
def _long_lived_objects() -> Iterator[None]:
  """Builds what lives as long as the run without collecting garbage, then freezes it.

  Beam's modules and the pipeline graph are some 200,000 objects, which every
  full collection during the run would rescan. (With TensorFlow, imported here
  before worker processes took it over, they were 500,000 and cost 1.3 s of a
  20,000-image run.)
  """
  gc.disable()
  try:
    yield
  finally:
    gc.freeze()
    gc.enable()


def _print_help() -> None:
  parser = argparse.ArgumentParser(
      prog='python -m beam_pipeline',
      description='Convert images to validated, sharded TFRecords. Every standard Beam option '
      '(--runner, --project, --region, --temp_location, --direct_num_workers, ...) also works.')
  options_lib.ConversionOptions._add_argparse_args(parser)  # pylint: disable=protected-access
  parser.epilog = options_lib.LABELS_HELP
  parser.print_help()


def _print_summary(output: str) -> None:
  print('Wrote ' + '\n'.join(dataset_info.summary(dataset_info.read(output), output)))


def inspect(argv: List[str]) -> int:
  """``python -m beam_pipeline inspect OUTPUT``: what a completed output holds."""
  if len(argv) != 1:
    print('error: usage: python -m beam_pipeline inspect OUTPUT_DIRECTORY', file=sys.stderr)
    return 2
  try:
    info = dataset_info.read(argv[0])
  except FileNotFoundError as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  print('\n'.join(dataset_info.summary(info, argv[0])))
  for name, split in info['splits'].items():
    for shard in split['shards']:
      print(f'  {shard["file"]}: {shard["num_examples"]} examples, {shard["num_bytes"]} bytes')
  print(f'labels: {", ".join(info["labels"]) or "(unlabeled)"}')
  return 0
