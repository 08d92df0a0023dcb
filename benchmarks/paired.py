"""Whole conversions of make bench's photo set by two commands in turn: what a change costs
the whole run, its every process counted.

Usage: python -m benchmarks.paired [--images 20000] [--pairs 8] [--other CHECKOUT]
                                   [--flags='...'] [--other-flags='...']

A is this checkout with --flags; B is --other (a worktree of an earlier commit, say; this
checkout if not given) with --other-flags. Each run is ``python -m beam_pipeline
--runner=DirectRunner`` on the cached set of --images photos (benchmarks.photo_set), started
in its checkout so that the checkout's package is the one imported, under benchmarks.measure,
which counts the CPU of every process of the run (the worker pool's too). After a pair to
warm up the page cache, the pairs run in ABBA order, so that drift in the machine's load
falls on both alike; the verdict is the median of the ratios A/B taken pair by pair, with
their range. Results: work/bench-results/paired-<images>.json.
"""
import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

from benchmarks import photo_set

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / 'work' / 'bench-results'
SCRATCH = REPO / 'work' / 'bench-out' / 'paired'
MEASURE = REPO / 'benchmarks' / 'measure.py'


def _run(checkout: Path, flags: List[str], images: Path, name: str) -> Dict[str, float]:
  """One conversion under benchmarks.measure: its CPU and wall seconds."""
  output, log, measured = SCRATCH / f'out-{name}', SCRATCH / f'{name}.log', SCRATCH / f'{name}.json'
  shutil.rmtree(output, ignore_errors=True)
  command = [sys.executable, str(MEASURE), str(measured), sys.executable, '-m', 'beam_pipeline',
             f'--input={images}', f'--output={output}', '--runner=DirectRunner', *flags]
  with open(log, 'wb') as out:
    subprocess.run(command, cwd=checkout, env={**os.environ, 'PYTHONPATH': str(checkout)}, stdout=out,
                   stderr=subprocess.STDOUT, check=True)
  result = json.loads(measured.read_text())
  if result['returncode'] != 0 or not (output / 'beam_pipeline.json').exists():
    sys.exit(f'{name}: the conversion failed (exit code {result["returncode"]}); see {log}')
  shutil.rmtree(output)  # measured: at 200,000 photos a pair's outputs hold 7.6 GB
  return {'cpu_s': result['cpu_s'], 'wall_s': result['wall_s']}


def _summary(values: List[float]) -> Dict[str, float]:
  return {'median': round(statistics.median(values), 3), 'min': round(min(values), 3), 'max': round(max(values), 3)}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--images', type=int, default=20000)
  parser.add_argument('--pairs', type=int, default=8)
  parser.add_argument('--other', type=Path, default=REPO, help='the checkout B runs (default: this one)')
  parser.add_argument('--flags', default='', help="A's converter flags, as one string")
  parser.add_argument('--other-flags', default='', help="B's converter flags, as one string")
  args = parser.parse_args()
  images, _ = photo_set.ensure(args.images)
  SCRATCH.mkdir(parents=True, exist_ok=True)
  sides = {'A': (REPO, shlex.split(args.flags)), 'B': (args.other.resolve(), shlex.split(args.other_flags))}
  for side, (checkout, flags) in sides.items():  # warm-up, not counted
    _run(checkout, flags, images, side)
  runs: Dict[str, List[Dict[str, float]]] = {'A': [], 'B': []}
  for pair in range(args.pairs):
    for side in ('A', 'B') if pair % 2 == 0 else ('B', 'A'):
      runs[side].append(_run(*sides[side], images, side))
    a, b = runs['A'][-1], runs['B'][-1]
    print(f'pair {pair + 1}: A {a["cpu_s"]:.2f} s CPU, {a["wall_s"]:.2f} s; B {b["cpu_s"]:.2f} s CPU, '
          f'{b["wall_s"]:.2f} s; CPU A/B {a["cpu_s"] / b["cpu_s"]:.3f}', flush=True)
  result = {'images': args.images, 'pairs': args.pairs, 'A': {'checkout': str(REPO), 'flags': args.flags},
            'B': {'checkout': str(sides['B'][0]), 'flags': args.other_flags}}
  for measure in ('cpu_s', 'wall_s'):
    result[measure] = {side: _summary([run[measure] for run in runs[side]]) for side in runs}
    result[measure]['ratio'] = _summary([a[measure] / b[measure] for a, b in zip(runs['A'], runs['B'])])
  RESULTS.mkdir(parents=True, exist_ok=True)
  (RESULTS / f'paired-{args.images}.json').write_text(json.dumps(result, indent=2) + '\n')
  cpu, wall = result['cpu_s'], result['wall_s']
  print(f'CPU: A {cpu["A"]["median"]:.2f} s, B {cpu["B"]["median"]:.2f} s (medians); paired A/B median '
        f'{cpu["ratio"]["median"]:.3f}, range {cpu["ratio"]["min"]:.3f}-{cpu["ratio"]["max"]:.3f}')
  print(f'wall: A {wall["A"]["median"]:.2f} s, B {wall["B"]["median"]:.2f} s; paired A/B median '
        f'{wall["ratio"]["median"]:.3f}, range {wall["ratio"]["min"]:.3f}-{wall["ratio"]["max"]:.3f}')


if __name__ == '__main__':
  main()
