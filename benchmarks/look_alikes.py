"""A collection of look-alikes, end to end (issue 59): the frames of fixed cameras, each frame its
camera's scene with a few pixels of noise, converted with the default options and split 80/20,
against the same run with --near_copies=off.

Usage: python -m benchmarks.look_alikes [--images 20000] [--cameras 2]

Each camera's scene is a radial gradient (a smooth, featureless picture, whose perceptual hash's
bits are set by the few noisy pixels: most frames lie within a few bits of each other, so a list
of close pairs would hold about N^2/4 of them) in a class folder of its own. The set is cached
under work/bench-data/look-alikes-<n>/. Each run is the converter's command under
benchmarks.measure (wall and CPU time, the largest process's peak RSS and the peak of the summed
PSS); reported beside them: how many images the run called look-alikes, its groups, and the
validation share. Results go to work/bench-results/look-alikes.json.
"""
import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any, Dict

from benchmarks import run
from beam_pipeline.synthetic import look_alike_frames

DATA = Path(__file__).resolve().parents[1] / 'work' / 'bench-data'
MARKER = 'complete.json'


def ensure(images: int, cameras: int) -> Path:
  """The folder of the set, generated unless a complete copy is cached."""
  base = DATA / f'look-alikes-{images}-{cameras}'
  if (base / MARKER).exists():
    return base / 'frames'
  shutil.rmtree(base, ignore_errors=True)
  look_alike_frames.write_frames(base / 'frames', images, cameras)
  (base / MARKER).write_text(json.dumps({'images': images, 'cameras': cameras}) + '\n')
  return base / 'frames'


def convert(frames: Path, images: int, near_copies: str) -> Dict[str, Any]:
  """The converter's run over the frames, split 80/20, with ``--near_copies=near_copies``, measured."""
  scratch = run.SCRATCH / f'look-alikes-{images}-{near_copies}'
  output = scratch / 'out'
  shutil.rmtree(output, ignore_errors=True)
  scratch.mkdir(parents=True, exist_ok=True)
  argv = [sys.executable, '-m', 'beam_pipeline', f'--input={frames}', f'--output={output}', '--runner=DirectRunner',
          '--skip_transform', '--splits=train=0.8,validation=0.2', f'--near_copies={near_copies}']
  result = run.run_child(argv, scratch / 'run')
  info = json.loads((output / 'beam_pipeline.json').read_text())
  near = info.get('near_duplicates') or {}
  result.update(near_copies=near_copies, num_examples=info['num_examples'], num_errors=info['num_errors'],
                validation_share=round(info['splits']['validation']['num_examples'] / info['num_examples'], 4),
                groups=near.get('num_groups'), images_in_groups=near.get('num_images'),
                largest_group=near.get('largest_group'), left_out=near.get('left_out'))
  shutil.rmtree(output, ignore_errors=True)
  return result


def main() -> int:
  parser = argparse.ArgumentParser(prog='python -m benchmarks.look_alikes', description=__doc__.splitlines()[0])
  parser.add_argument('--images', type=int, default=20_000)
  parser.add_argument('--cameras', type=int, default=2)
  args = parser.parse_args()
  frames = ensure(args.images, args.cameras)
  rows = []
  for near_copies in ('off', 'group'):
    row = convert(frames, args.images, near_copies)
    rows.append(row)
    print(f'--near_copies={near_copies:<5} {row["wall_s"]:6.1f} s wall, {row["cpu_s"]:6.1f} s CPU, largest process '
          f'{row["max_process_rss_mb"]:5.0f} MB, summed PSS {row["peak_pss_mb"]:5.0f} MB; {row["num_examples"]:,} '
          f'written, validation {row["validation_share"]:.3f}; groups {row["groups"]}, left out {row["left_out"]}',
          flush=True)
  off, grouped = rows
  ratios = {name: round(grouped[name] / off[name], 3) for name in ('wall_s', 'cpu_s', 'max_process_rss_mb')}
  print(f'grouped / off: wall {ratios["wall_s"]}, CPU {ratios["cpu_s"]}, '
        f'largest process {ratios["max_process_rss_mb"]}')
  run.RESULTS.mkdir(parents=True, exist_ok=True)
  (run.RESULTS / 'look-alikes.json').write_text(json.dumps({'rows': rows, 'ratios': ratios}, indent=2) + '\n')
  return 0 if all(row['num_examples'] + row['num_errors'] == args.images for row in rows) else 1


if __name__ == '__main__':
  sys.exit(main())
