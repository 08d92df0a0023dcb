"""``python -m beam_pipeline [options]``: check everything, run the pipeline, say what was written."""
import contextlib
import gc
import re
import sys
from concurrent.futures.process import BrokenProcessPool
from typing import Iterator, List

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.runners.runner import PipelineState

from beam_pipeline.beam import graph, local_runner, options as options_lib, output_dir, workers
from beam_pipeline.core import dataset_info
from beam_pipeline.core.dataset_info import ErrorBudgetExceeded
from beam_pipeline.core.reading import TransientReadError
from beam_pipeline.core.usage import UsageError


def convert(argv: List[str]) -> int:
  """Runs the conversion the command line asks for; returns the exit code (2: a bad option)."""
  try:
    options, settings = options_lib.parse(argv)
    output_dir.prepare(settings.output)
  except UsageError as e:
    workers.stop_forkserver()  # a bad option: no run, no workers
    print(f'error: {e}', file=sys.stderr)
    return 2
  except SystemExit as e:  # --help, printed
    workers.stop_forkserver()
    return e.code or 0
  if local_runner.runs_in_process(options):
    workers.start()
  else:
    workers.stop_forkserver()
  runner = options.view_as(StandardOptions).runner or 'DirectRunner'
  try:
    with _long_lived_objects():
      pipeline = beam.Pipeline(runner=local_runner.runner_for(options), options=options)
      graph.build(pipeline, settings, runner)
    state = pipeline.run().wait_until_finish()
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
  info = dataset_info.read(settings.output, FileSystems.exists, FileSystems.open)
  print('Wrote ' + '\n'.join(dataset_info.summary(info, settings.output)))
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
