"""A million-image local run, end to end, against the same run at 20,000 images.

Usage: python -m benchmarks.large_run [--images 1000000] [--baseline 20000]

The photos are small (64x48 JPEGs of a few KB, 100 class folders, one file in a
hundred damaged), so a million of them fit on a laptop's disk and are generated in
minutes; what grows with their number is the per-image bookkeeping this run is
about: listing, planning, reports and memory. Both sets are cached under
work/bench-data/small-<n>/. Each run is the converter's command with default
options but for --skip_transform (the tf.Transform graph is a fixed cost), under
benchmarks.measure: wall and CPU time, the peak of all processes' summed PSS.
Reported: images/s at both sizes and their ratio, memory per image (the peak's
growth from the small run to the large one, per image added), and that every file
was written or rejected. Results go to work/bench-results/large-run.json.
"""
import argparse
import io
import json
import multiprocessing
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Dict, Tuple

import numpy as np
from PIL import Image

from benchmarks import run

DATA = Path(__file__).resolve().parents[1] / 'work' / 'bench-data'
CLASSES = 100
DAMAGED_EVERY = 100
SIZE = (64, 48)
MARKER = 'complete.json'
FORMAT_VERSION = 2


def small_photo(index: int) -> Tuple[str, bytes]:
  """(relative path, bytes) of file ``index``: a smooth colour field with grain, or every
  DAMAGED_EVERY-th file a truncated copy of one."""
  rng = np.random.default_rng(index)
  field = Image.fromarray(rng.integers(0, 256, (3, 4, 3), dtype=np.uint8)).resize(SIZE, Image.BILINEAR)
  pixels = np.asarray(field, np.float32) + rng.standard_normal((SIZE[1], SIZE[0], 1), np.float32) * 6
  buffer = io.BytesIO()
  Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(buffer, 'JPEG', quality=int(rng.integers(70, 95)))
  data = buffer.getvalue()
  if index % DAMAGED_EVERY == DAMAGED_EVERY - 1:
    data = data[:len(data) // 2]
  return f'class_{index // DAMAGED_EVERY % CLASSES:03d}/{index:07d}.jpg', data  # damaged files in every class


def _write(job: Tuple[str, int]) -> int:
  root, index = job
  name, data = small_photo(index)
  with open(os.path.join(root, name), 'wb') as f:
    f.write(data)
  return len(data)


def ensure(n: int) -> Path:
  """The folder of the n-photo set, generated unless a complete copy is cached."""
  base, images = DATA / f'small-{n}', DATA / f'small-{n}' / 'photos'
  marker = base / MARKER
  if marker.exists() and json.loads(marker.read_text()).get('format_version') == FORMAT_VERSION:
    return images
  shutil.rmtree(base, ignore_errors=True)
  for label in range(CLASSES):
    (images / f'class_{label:03d}').mkdir(parents=True)
  start = time.perf_counter()
  with multiprocessing.Pool(os.cpu_count()) as pool:
    total = sum(pool.imap_unordered(_write, ((str(images), i) for i in range(n)), chunksize=512))
  marker.write_text(json.dumps({'format_version': FORMAT_VERSION, 'num_files': n, 'total_bytes': total,
                                'generation_seconds': round(time.perf_counter() - start, 1)}) + '\n')
  return images


def convert(n: int) -> Dict[str, Any]:
  """The converter's run over the n-photo set, measured."""
  images = ensure(n)
  scratch = run.SCRATCH / f'large-{n}'
  output = scratch / 'out'
  shutil.rmtree(output, ignore_errors=True)
  scratch.mkdir(parents=True, exist_ok=True)
  argv = [sys.executable, '-m', 'beam_pipeline', f'--input={images}', f'--output={output}',
          '--runner=DirectRunner', '--skip_transform']
  result = run.run_child(argv, scratch / 'run')
  info = json.loads((output / 'beam_pipeline.json').read_text())
  result.update(images=n, images_per_s=round(n / result['wall_s'], 1),
                cpu_ms_per_image=round(1000 * result['cpu_s'] / n, 3), num_examples=info['num_examples'],
                num_errors=info['num_errors'], accounted_for_all=info['num_examples'] + info['num_errors'] == n)
  shutil.rmtree(output, ignore_errors=True)
  return result


def main() -> int:
  parser = argparse.ArgumentParser(prog='python -m benchmarks.large_run', description=__doc__.splitlines()[0])
  parser.add_argument('--images', type=int, default=1_000_000)
  parser.add_argument('--baseline', type=int, default=20_000)
  args = parser.parse_args()
  rows = {}
  for n in (args.baseline, args.images):
    print(f'{n} photos ...', end=' ', flush=True)
    rows[n] = convert(n)
    row = rows[n]
    print(f'{row["wall_s"]:.1f} s, {row["images_per_s"]:.0f} images/s, {row["cpu_ms_per_image"]:.3f} ms CPU '
          f'per image, peak {row["peak_pss_mb"]:.0f} MB summed PSS, {row["num_examples"]} written + '
          f'{row["num_errors"]} rejected', flush=True)
  small, large = rows[args.baseline], rows[args.images]
  summary = {'rows': list(rows.values()),
             'images_per_s_ratio': round(large['images_per_s'] / small['images_per_s'], 3),
             'kb_per_added_image': round((large['peak_pss_mb'] - small['peak_pss_mb']) * 1024
                                         / (args.images - args.baseline), 3),
             'kb_per_image': round(large['peak_pss_mb'] * 1024 / args.images, 3)}
  print(f'images/s at {args.images} / at {args.baseline}: {summary["images_per_s_ratio"]:.2f}x; memory '
        f'{summary["kb_per_added_image"]:.2f} KB per added image ({summary["kb_per_image"]:.2f} KB per image '
        f'of the peak)')
  run.RESULTS.mkdir(parents=True, exist_ok=True)
  (run.RESULTS / 'large-run.json').write_text(json.dumps(summary, indent=2) + '\n')
  return 0 if all(row['accounted_for_all'] for row in rows.values()) else 1


if __name__ == '__main__':
  sys.exit(main())
