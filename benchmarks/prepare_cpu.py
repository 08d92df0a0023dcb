"""CPU per image of preparation.prepare_images in this checkout against another one (a worktree of
an earlier commit, say): what a change to validation costs.

Usage: python -m benchmarks.prepare_cpu OTHER_CHECKOUT [--images 1000] [--rounds 6] [--photos DIR]

The same photos (natural_photos, 1024x768 JPEGs of quality 90, made once under
work/bench-data/prepare-cpu/; or the first of DIR's files, for example make bench's
PetImages-like photos, about 400 pixels a side) are prepared in chunks of 64, as validation's chunks hold,
by a child process per checkout and round, the two checkouts taking turns (ABBA order) so
that drift in the machine's load falls on both alike. Each child counts the CPU of the
preparation alone, after a first chunk to warm up: getrusage(RUSAGE_SELF), every thread's
(TensorFlow decodes on a pool of its own), user plus system.
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PHOTOS = REPO / 'work' / 'bench-data' / 'prepare-cpu'
_CHUNK = 64


def _photos(count: int) -> list:
  from beam_pipeline.synthetic import natural_photos  # pylint: disable=import-outside-toplevel
  from beam_pipeline.synthetic.image_files import encode  # pylint: disable=import-outside-toplevel
  PHOTOS.mkdir(parents=True, exist_ok=True)
  paths = [PHOTOS / f'{i:05d}.jpg' for i in range(count)]
  for i, path in enumerate(paths):
    if not path.exists():
      path.write_bytes(encode(natural_photos.photo(i, 1024, 768), 'JPEG', quality=90))
  return paths


def child(count: int, directory: Path) -> None:
  """Prints the CPU seconds this process spends preparing the photos, and where the package came from."""
  import beam_pipeline  # pylint: disable=import-outside-toplevel
  from beam_pipeline.core.images import preparation  # pylint: disable=import-outside-toplevel
  datas = [path.read_bytes() for path in sorted(path for path in directory.rglob('*') if path.is_file())[:count]]
  preparation.prepare_images(datas[:_CHUNK], 10**8)
  before = resource.getrusage(resource.RUSAGE_SELF)
  for start in range(0, len(datas), _CHUNK):
    preparation.prepare_images(datas[start:start + _CHUNK], 10**8)
  after = resource.getrusage(resource.RUSAGE_SELF)
  seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
  print(Path(beam_pipeline.__file__).parent.parent, seconds)


def _run(checkout: Path, count: int, directory: Path) -> float:
  """The child's CPU seconds; run as a script (its folder first on sys.path, not a checkout's) from
  the checkout, so that the checkout's package is the one imported."""
  environment = {**os.environ, 'PYTHONPATH': str(checkout), 'TF_CPP_MIN_LOG_LEVEL': '3'}
  out = subprocess.run([sys.executable, __file__, '--child', str(count), str(directory)], cwd=checkout, env=environment,
                       check=True, capture_output=True, text=True)
  imported_from, seconds = out.stdout.split()[-2:]
  assert Path(imported_from) == checkout, (imported_from, checkout)
  return float(seconds)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('other', type=Path)
  parser.add_argument('--images', type=int, default=1000)
  parser.add_argument('--rounds', type=int, default=6)
  parser.add_argument('--photos', type=Path,
                      help="a folder of photos to prepare instead of natural_photos' 1024x768 ones")
  args = parser.parse_args()
  directory = args.photos.resolve() if args.photos else PHOTOS
  if not args.photos:
    _photos(args.images)
  checkouts = {'this': REPO, 'other': args.other.resolve()}
  cpu = {name: [] for name in checkouts}
  for round_ in range(args.rounds):
    for name in (('other', 'this') if round_ % 2 == 0 else ('this', 'other')):
      cpu[name].append(_run(checkouts[name], args.images, directory) / args.images * 1000)
    print(f'round {round_ + 1}: this {cpu["this"][-1]:.3f} ms/image, other {cpu["other"][-1]:.3f} ms/image', flush=True)
  ratios = [this / other for this, other in zip(cpu['this'], cpu['other'])]
  print(f'CPU per image: this {statistics.median(cpu["this"]):.3f} ms (min {min(cpu["this"]):.3f}), other '
        f'{statistics.median(cpu["other"]):.3f} ms (min {min(cpu["other"]):.3f}); paired ratio this/other: median '
        f'{statistics.median(ratios):.3f}, range {min(ratios):.3f}-{max(ratios):.3f}')


if __name__ == '__main__':
  if sys.argv[1:2] == ['--child']:
    child(int(sys.argv[2]), Path(sys.argv[3]))
  else:
    main()
