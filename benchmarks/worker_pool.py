"""What a local worker spends an image on, thread by thread, without Beam: the photo set's
images handed to the worker pool (local/workers.py) as a run hands them, a checkout at a time.

Usage: python -m benchmarks.worker_pool [--images 20000] [--rounds 2] [--other CHECKOUT]

Each round starts a process in this checkout and, with --other, one in that checkout (a
worktree of an earlier commit, say), in turn. The process starts the pool as the converter does
(its forkserver first), validates the first two tasks to warm it, then every task of --images
photos, 85 a task (what pooled_steps.divided makes of a listing batch of these photos), and
reads from /proc, before and after, each worker thread's user and system CPU and each worker's
minor page faults. What it prints is per image: TensorFlow's compute thread (the decode), the
worker's Python thread (everything around it) and the faults, which showed that malloc gave
each batch's arrays back to the system (benchmarks/README.md, What the whole conversion costs).
Results: work/bench-results/worker-pool-<images>.json.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / 'work' / 'bench-results'
TASK = 85


def _threads(pids: List[int]) -> Dict[str, List[int]]:
  """(user, system) clock ticks by thread name, summed over the workers' threads."""
  found: Dict[str, List[int]] = {}
  for pid in pids:
    for thread in os.listdir(f'/proc/{pid}/task'):
      text = Path(f'/proc/{pid}/task/{thread}/stat').read_text()
      name, fields = text[text.index('(') + 1:text.rindex(')')], text[text.rindex(')') + 2:].split()
      ticks = found.setdefault(name, [0, 0])
      ticks[0] += int(fields[11])
      ticks[1] += int(fields[12])
  return found


def _faults(pids: List[int]) -> int:
  return sum(int(Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[7]) for pid in pids)


def child(images: int, folder: str) -> Dict[str, object]:
  """Validates ``images`` photos of ``folder`` in this checkout's worker pool; what its workers spent."""
  sys.path.insert(0, os.getcwd())
  from beam_pipeline.cli import options  # pylint: disable=import-outside-toplevel
  from beam_pipeline.core import steps  # pylint: disable=import-outside-toplevel
  from beam_pipeline.local import workers  # pylint: disable=import-outside-toplevel
  try:
    from beam_pipeline.core.messages import InputItem  # pylint: disable=import-outside-toplevel
  except ImportError:  # a checkout from before the core's folders (7d2b64c, issue 58's baseline)
    from beam_pipeline.core.records import InputItem  # pylint: disable=import-outside-toplevel,no-name-in-module
  workers.start_forkserver()
  settings = options.parse([f'--input={folder}', '--output=/tmp/unused', '--runner=DirectRunner']).settings
  files = sorted(str(path) for path in Path(folder).rglob('*') if path.is_file())[:images]
  tasks = [[InputItem(uri) for uri in files[start:start + TASK]] for start in range(0, len(files), TASK)]
  pool = workers.start()
  list(pool.map(steps.validate_batch, tasks[:2], [settings] * 2))
  pids = [process.pid for process in pool._processes.values()]  # pylint: disable=protected-access
  threads, faults, started = _threads(pids), _faults(pids), time.monotonic()
  list(pool.map(steps.validate_batch, tasks[2:], [settings] * (len(tasks) - 2)))
  wall, after, faults = time.monotonic() - started, _threads(pids), _faults(pids) - faults
  workers.shutdown()
  count, tick = sum(map(len, tasks[2:])), os.sysconf('SC_CLK_TCK')
  per_image = {name: [round((ticks[i] - threads.get(name, [0, 0])[i]) / tick / count * 1e6, 1) for i in (0, 1)]
               for name, ticks in after.items()}
  return {'images': count, 'wall_s': round(wall, 2), 'threads_us': {k: v for k, v in per_image.items() if sum(v)},
          'minor_faults': round(faults / count, 1)}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--images', type=int, default=20000)
  parser.add_argument('--rounds', type=int, default=2)
  parser.add_argument('--other', type=Path, help='a second checkout, measured in turn with this one')
  parser.add_argument('--child', nargs=2, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    print(json.dumps(child(int(args.child[0]), args.child[1])))
    return
  from benchmarks import photo_set  # pylint: disable=import-outside-toplevel
  folder, _ = photo_set.ensure(args.images)
  checkouts = [REPO] + ([args.other.resolve()] if args.other else [])
  rows = []
  for round_index in range(args.rounds):
    for checkout in checkouts:
      out = subprocess.run([sys.executable, str(Path(__file__).resolve()), '--child', str(args.images), str(folder)],
                           cwd=checkout, env={**os.environ, 'PYTHONPATH': str(checkout)}, capture_output=True,
                           text=True, check=True)
      row = {'checkout': str(checkout), 'round': round_index + 1, **json.loads(out.stdout.splitlines()[-1])}
      rows.append(row)
      threads = ', '.join(f'{name} {user} user + {system} system' for name, (user, system) in row['threads_us'].items())
      print(f'[{round_index + 1}] {checkout}: {row["images"]:,} images in {row["wall_s"]} s; µs an image: {threads}; '
            f'{row["minor_faults"]} minor page faults an image', flush=True)
  RESULTS.mkdir(parents=True, exist_ok=True)
  destination = RESULTS / f'worker-pool-{args.images}.json'
  destination.write_text(json.dumps({'rows': rows}, indent=2))
  print(f'results: {destination}')


if __name__ == '__main__':
  main()
