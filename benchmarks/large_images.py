"""Large images (issue 58): the converter with default options against the seeds' one-process
TensorFlow loop, format by format, measured in turn in the same run.

Usage: python -m benchmarks.large_images [--rounds 2] [--only jpeg-12mp,png-8k,webp-8k,wallpapers,panorama]

The sets are natural_photos' scenes (pink-noise colour fields, objects, sensor grain), generated
once under work/bench-data/large-images/ (about two minutes):

  jpeg-12mp   8 JPEGs of 4000x3000 at quality 92, what a camera gives
  png-8k      3 PNGs of 7680x4320 at Pillow's default compression
  webp-8k     6 WebPs of 7680x4320 at quality 85, which the converter stores as PNG
  wallpapers  the folder issue 58 timed, remade: 21 PNGs, 21 JPEGs and 16 WebPs from 1920x1080
              to 7680x4320 (about 500 megapixels; the issue's folder held 442)
  panorama    1 JPEG of 12000x8333 at quality 92, just under the default --max_pixels (10^8)

Each round runs the loop and the converter on each set, alternating (benchmarks.run.measure:
whole child processes, start-up and imports included, CPU and memory of every process). Reported:
the best wall time of each, the converter's over the loop's (the goal is at most 1: the
converter has every core), the converter's peak memory, and its output against the loop's.
Results: work/bench-results/large-images.json.
"""
import argparse
import io
import json
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from benchmarks import run
from beam_pipeline.synthetic import natural_photos

DATA = Path(__file__).resolve().parents[1] / 'work' / 'bench-data' / 'large-images'
# A desktop wallpaper's sizes, in turn: HD, QHD, 4K, 5K and 8K.
_WALLPAPER_SIZES = ((1920, 1080), (2560, 1440), (3840, 2160), (1920, 1080), (2560, 1440), (3840, 2160), (5120, 2880),
                    (7680, 4320))
_FORMATS = {'JPEG': {'quality': 92}, 'PNG': {}, 'WEBP': {'quality': 85}}


def _wallpapers(count: int, fmt: str) -> List[Tuple[Tuple[int, int], str, Dict[str, Any]]]:
  return [(_WALLPAPER_SIZES[index % len(_WALLPAPER_SIZES)], fmt, _FORMATS[fmt]) for index in range(count)]


# name: each image's ((width, height), format, encoder options)
SETS = {
    'jpeg-12mp': [((4000, 3000), 'JPEG', _FORMATS['JPEG'])] * 8,
    'png-8k': [((7680, 4320), 'PNG', _FORMATS['PNG'])] * 3,
    'webp-8k': [((7680, 4320), 'WEBP', _FORMATS['WEBP'])] * 6,
    'wallpapers': _wallpapers(21, 'PNG') + _wallpapers(21, 'JPEG') + _wallpapers(16, 'WEBP'),
    'panorama': [((12000, 8333), 'JPEG', _FORMATS['JPEG'])],
}


def ensure(name: str) -> Path:
  """The folder of set ``name`` (its images in one class folder), generated unless cached; the
  marker that says it is complete lies beside it, so that both sides list only images."""
  root, marker = DATA / name, DATA / f'{name}.complete.json'
  if marker.exists():
    return root
  shutil.rmtree(root, ignore_errors=True)
  (root / 'scenes').mkdir(parents=True)
  for index, ((width, height), fmt, options) in enumerate(SETS[name]):
    buffer = io.BytesIO()
    natural_photos.photo(1000 + index, width, height).save(buffer, fmt, **options)
    (root / 'scenes' / f'{index:02d}.{fmt.lower()}').write_bytes(buffer.getvalue())
  marker.write_text(json.dumps({'images': [[size, fmt] for size, fmt, _ in SETS[name]]}))
  return root


def bench(names: List[str], rounds: int) -> Dict[str, Any]:
  rows = {}
  for name in names:
    images = ensure(name)
    count = len(SETS[name])
    scratch = run.SCRATCH / 'large-images' / name
    scratch.mkdir(parents=True, exist_ok=True)
    runs: Dict[str, List[Dict[str, Any]]] = {'b': [], 'c': []}
    for round_ in range(rounds):
      for which in ('b', 'c'):
        runs[which].append(run.measured_round(which, images, count, scratch, False, f'{name} {round_ + 1}/{rounds}',
                                              show_cpu=True))
    best = {which: min(results, key=lambda r: (not r['ok'], r['wall_s'])) for which, results in runs.items()}
    rows[name] = {'images': count, 'megapixels': sum(width * height for (width, height), _, _ in SETS[name]) / 1e6,
                  'input_mb': round(sum(p.stat().st_size for p in (images / 'scenes').iterdir()) / 2**20, 1),
                  'best': best, 'runs': runs}
    if best['b']['ok'] and best['c']['ok']:
      rows[name]['converter_over_loop'] = round(best['c']['wall_s'] / best['b']['wall_s'], 2)
  return {'rounds': rounds, 'machine': run.machine(), 'sets': rows}


def print_report(report: Dict[str, Any]) -> None:
  print(f'\n{"set":<11}{"images":>7}{"MP":>6}{"input MB":>9}{"loop s":>8}{"converter s":>12}{"ratio":>7}'
        f'{"converter CPU s":>16}{"peak MB":>8}{"stored MB":>10}')
  for name, row in report['sets'].items():
    loop, converter = row['best']['b'], row['best']['c']
    ratio = row.get('converter_over_loop')
    print(f'{name:<11}{row["images"]:>7}{row["megapixels"]:>6.0f}{row["input_mb"]:>9.1f}{loop["wall_s"]:>8.2f}'
          f'{converter["wall_s"]:>12.2f}{(f"{ratio:.2f}x" if ratio else "failed"):>7}{converter["cpu_s"]:>16.1f}'
          f'{converter.get("peak_pss_mb", 0):>8.0f}{converter.get("output_mb", 0):>10.1f}')


def main(argv: Optional[List[str]] = None) -> int:
  parser = argparse.ArgumentParser(prog='python -m benchmarks.large_images', description=__doc__.splitlines()[0])
  parser.add_argument('--rounds', type=int, default=2, help='alternating rounds; the best of each counts')
  parser.add_argument('--only', default=','.join(SETS), help='comma-separated sets: ' + ', '.join(SETS))
  args = parser.parse_args(argv)
  names = [name.strip() for name in args.only.split(',') if name.strip()]
  if not names or set(names) - set(SETS) or args.rounds < 1:
    parser.error(f'--only takes a comma-separated subset of {", ".join(SETS)}; --rounds must be positive')
  report = bench(names, args.rounds)
  print_report(report)
  run.RESULTS.mkdir(parents=True, exist_ok=True)
  destination = run.RESULTS / 'large-images.json'
  destination.write_text(json.dumps(report, indent=2) + '\n')
  print(f'results: {destination.relative_to(run.REPO)}')
  return 0 if all(row['best']['c']['ok'] and row['best']['b']['ok'] for row in report['sets'].values()) else 1


if __name__ == '__main__':
  sys.exit(main())
