"""Where the converter's time goes: start-up, then wall and CPU seconds per fused Beam stage.

One run of ``python -m beam_pipeline`` on the cached photo set, in this process, with
the FnApiRunner's bundle execution timed. Stages run one after another on the
in-process runner, so their wall times add up to the run; CPU above wall means
both cores were busy (TensorFlow decoding while the DoFn reads and plans).

Usage: python -m benchmarks.stages [--images 20000] [-- extra converter flags]
"""
import argparse
import os
import re
import resource
import shutil
import sys
import time
from typing import Dict, List, NoReturn, Optional

from beam_pipeline.local import workers
from benchmarks import baselines, photo_set
from benchmarks.run import SCRATCH


def _cpu() -> float:
  usage = resource.getrusage(resource.RUSAGE_SELF)
  return usage.ru_utime + usage.ru_stime


def _time_bundles(stages: Dict[str, List[float]], start: float) -> None:
  """Wraps the runner's bundle execution to add each bundle's wall and CPU to its stage."""
  from apache_beam.runners.portability.fn_api_runner import fn_runner  # pylint: disable=import-outside-toplevel
  execute = fn_runner.FnApiRunner._execute_bundle  # pylint: disable=protected-access

  def timed(runner, context, bundle_context, bundle_input):
    wall, cpu = time.perf_counter(), _cpu()
    try:
      return execute(runner, context, bundle_context, bundle_input)
    finally:
      totals = stages.setdefault(bundle_context.stage.name, [wall - start, 0.0, 0.0])
      totals[1] += time.perf_counter() - wall
      totals[2] += _cpu() - cpu

  fn_runner.FnApiRunner._execute_bundle = timed  # pylint: disable=protected-access


def _summary(stage_name: str) -> str:
  """The top-level transforms fused into a stage, in order: 'Distribute, Validate, GroupByContent'."""
  names = re.findall(r'ref_AppliedPTransform_([A-Za-z0-9]+)', stage_name) + re.findall(r'\(([A-Za-z0-9]+)/', stage_name)
  return ', '.join(dict.fromkeys(names))


def timed_run(argv: List[str]) -> int:
  """Runs the converter with ``argv`` in this process and prints where its time went, stage by
  stage; its exit code. Call it first thing in a fresh process: it starts the workers' server
  before Beam is imported, as python -m beam_pipeline does."""
  stages: Dict[str, List[float]] = {}
  start = time.perf_counter()  # the process's own start-up (interpreter, site) is not in the figures
  workers.start_forkserver()
  _time_bundles(stages, start)
  from beam_pipeline import cli  # pylint: disable=import-outside-toplevel
  code = cli.main(argv)
  ended = time.perf_counter() - start
  first = min((s[0] for s in stages.values()), default=ended)
  print(f'\n{"starts at":>9} {"wall s":>7} {"CPU s":>6}  stage')
  print(f'{0:9.2f} {first:7.2f} {"":>6}  start-up: imports, options, graph, translation')
  for name, (began, wall, cpu) in sorted(stages.items(), key=lambda item: item[1][0]):
    if wall >= 0.05:
      print(f'{began:9.2f} {wall:7.2f} {cpu:6.2f}  {_summary(name)}')
  print(f'{ended:9.2f} total, exit code {code}')
  return code


def main(argv: Optional[List[str]] = None) -> NoReturn:
  parser = argparse.ArgumentParser(prog='python -m benchmarks.stages', description=__doc__.split('\n\n')[0])
  parser.add_argument('--images', type=int, default=2000)
  parser.add_argument('flags', nargs='*', help='more converter flags, after --')
  args = parser.parse_args(argv)
  images, _ = photo_set.ensure(args.images)
  for path in baselines.list_files(str(images)):  # a warm page cache, as in benchmarks.run
    with open(path, 'rb') as f:
      f.read()
  output = SCRATCH / str(args.images) / 'stages'
  shutil.rmtree(output, ignore_errors=True)
  code = timed_run([f'--input={images}', f'--output={output}', '--runner=DirectRunner', *args.flags])
  shutil.rmtree(output, ignore_errors=True)
  sys.stdout.flush()
  os._exit(code)  # as python -m beam_pipeline does: no interpreter teardown


if __name__ == '__main__':
  main()
