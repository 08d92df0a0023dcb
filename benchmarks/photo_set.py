"""A PetImages-like photo set (synthetic.pet_photos), generated once per size and cached under
work/bench-data/<n>/: throughput depends on what the files are like, so the benchmarks convert
files mixed as the Microsoft PetImages set mixes them.
"""
import json
import multiprocessing
import os
import shutil
import time
from pathlib import Path
from typing import Any, Dict, Tuple

from beam_pipeline.synthetic import pet_photos

ROOT = Path(__file__).resolve().parents[1] / 'work' / 'bench-data'
FORMAT_VERSION = 1  # bump when the generator changes, so cached sets are rebuilt
MARKER = 'complete.json'  # written last, next to (not inside) the image folder


def _write(job: Tuple[str, int, int]) -> Tuple[str, int]:
  images, seed, index = job
  name, kind, data = pet_photos.file_of(seed, index)
  with open(os.path.join(images, name), 'wb') as f:
    f.write(data)
  return kind, len(data)


def ensure(n: int, seed: int = 0, root: Path = ROOT) -> Tuple[Path, Dict[str, Any]]:
  """The image folder of an n-file set and its stats, generating it unless a complete copy is cached."""
  base, images = root / str(n), root / str(n) / 'PetImages'
  marker = base / MARKER
  if marker.exists():
    stats = json.loads(marker.read_text())
    if stats.get('format_version') == FORMAT_VERSION and stats.get('seed') == seed:
      return images, dict(stats, cached=True)
  shutil.rmtree(base, ignore_errors=True)
  for folder in pet_photos.CLASSES:
    (images / folder).mkdir(parents=True)
  start = time.perf_counter()
  kinds: Dict[str, int] = {}
  total = jpeg_bytes = jpegs = 0
  with multiprocessing.Pool(os.cpu_count()) as pool:
    for kind, size in pool.imap_unordered(_write, ((str(images), seed, i) for i in range(n)), chunksize=64):
      kinds[kind] = kinds.get(kind, 0) + 1
      total += size
      if kind in ('jpeg', 'progressive', 'grayscale'):
        jpegs, jpeg_bytes = jpegs + 1, jpeg_bytes + size
  stats = {'format_version': FORMAT_VERSION, 'seed': seed, 'num_files': n, 'kinds': dict(sorted(kinds.items())),
           'total_bytes': total, 'mean_jpeg_bytes': round(jpeg_bytes / max(jpegs, 1)),
           'generation_seconds': round(time.perf_counter() - start, 1)}
  marker.write_text(json.dumps(stats, indent=2) + '\n')
  return images, dict(stats, cached=False)


if __name__ == '__main__':
  import sys
  folder, info = ensure(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
  print(folder, json.dumps(info))
