"""Near copies found by this project and by its peers, side by side, on one generated set: the
share of each kind of copy joined with its original, and the pairs joining different pictures.

Usage: python -m benchmarks.near_copy_peers [--photos 500] [--copied 20] [--threshold 10]

The set, in one folder (work/near-peers/images), every file under a name that says nothing of
its source: --photos distinct photos (synthetic.near_copy_kinds.original); of the first ones,
--copied copies of each kind a user makes (near_copy_kinds' COPIES, NOT_FOUND and MORE, and a
gray copy), each of another photo; 60 two-colour gradients of hues 6 degrees apart (hard
negatives: pictures that differ only in hue); 30 one-colour images and a downscaled JPEG of
each. This project's groups come from its own path (preparation.prepare_images, then
near_copies.groups_on_one_machine at --threshold, as a run of this size groups them); the peers'
from benchmarks/peer_near_copies.py in their own environment (make peers: imagededup's PHash,
DHash and WHash at --threshold bits, cleanvision's near_duplicates with its defaults). A pair is
joined if the method puts both files in one group (this project, cleanvision) or within the
threshold of each other (imagededup). Results also go to work/bench-results/near-copy-peers.json.
"""
import argparse
import colorsys
import hashlib
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Set, Tuple

import numpy as np
from PIL import Image

from beam_pipeline.core.planning import near_copies
from beam_pipeline.synthetic import near_copy_kinds
from beam_pipeline.synthetic.image_files import encode
from benchmarks import near_copies as near_copies_bench

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / 'work' / 'bench-results'
PEERS_PYTHON = ROOT / '.venv-peers' / 'bin' / 'python'
GRAY = 'turned gray'
FLAT = 'one colour, downscaled'
_GRADIENTS, _FLATS = 60, 30


def make_set(folder: Path, photos: int, copied: int) -> Tuple[Dict[str, str], Dict[str, str]]:
  """Writes the set; returns each file's source (a picture's id) and each copy's kind."""
  folder.mkdir(parents=True, exist_ok=True)
  source, kind_of = {}, {}
  names = iter(f'{index:05d}' for index in np.random.default_rng(0).permutation(100_000))

  def write(data: bytes, picture: str, ext: str, kind: str = '') -> None:
    name = f'{next(names)}.{ext}'
    (folder / name).write_bytes(data)
    source[name] = picture
    if kind:
      kind_of[name] = kind

  originals = [near_copy_kinds.original(seed) for seed in range(photos)]
  for seed, data in enumerate(originals):
    write(data, f'photo {seed}', 'jpg')
  kinds = [*near_copy_kinds.KINDS, *near_copy_kinds.MORE, GRAY]
  for number, kind in enumerate(kind for kind in kinds for _ in range(copied)):
    seed = number % photos
    data = (near_copy_kinds.gray_copy(originals[seed]) if kind == GRAY
            else near_copy_kinds.copy(originals[seed], kind, seed))
    write(data, f'photo {seed}', 'png' if kind == 'PNG' else 'webp' if kind == 'WebP' else 'jpg', kind)
  for index in range(_GRADIENTS):
    hue = index / _GRADIENTS
    write(near_copy_kinds.hue_gradient((hue, hue + 1 / 3), across=index % 2 == 0), f'gradient {index}', 'jpg')
  rng = np.random.default_rng(1)
  for index in range(_FLATS):
    image = Image.new('RGB', tuple(int(side) for side in rng.integers(200, 900, 2)),
                      tuple(int(level) for level in np.array(colorsys.hsv_to_rgb(*rng.uniform(0, 1, 3))) * 255))
    write(encode(image, 'PNG'), f'flat {index}', 'png')
    write(encode(image.resize((image.width // 3, image.height // 3)), 'JPEG', quality=70), f'flat {index}', 'jpg',
          FLAT)
  return source, kind_of


def ours(folder: Path, names: List[str], threshold: int) -> Tuple[Set[Tuple[str, str]], float]:
  """The pairs this project's grouping joins, and its seconds (validation's hashing included)."""
  started = time.perf_counter()
  datas = [(folder / name).read_bytes() for name in names]
  files, of_sha = [], {}
  for name, data, result in zip(names, datas, near_copies_bench.prepared(datas)):
    sha = hashlib.sha256(data).hexdigest()
    of_sha.setdefault(sha, []).append(name)
    info = result.info  # ranked as planning ranks a record (content_groups.perceptual_hashes): by its stored bytes
    files.append((sha, info.phash, near_copies.priority(bool(info.damage), max(info.height, info.width),
                                                        len(result.stored)), info.colour))
  found = near_copies.groups_on_one_machine(files, threshold, cap=len(names))
  seconds = time.perf_counter() - started
  groups: Dict[str, List[str]] = {}
  for sha, representative in found.pairs:
    groups.setdefault(representative, []).extend(of_sha[sha])
  return {tuple(sorted(pair)) for members in groups.values() for pair in itertools.combinations(members, 2)}, seconds


def scored(pairs: Set[Tuple[str, str]], source: Dict[str, str], kind_of: Dict[str, str]) -> dict:
  """Each kind's share of copies joined with their original, and the pairs joining different pictures."""
  original = {picture: name for name, picture in source.items() if name not in kind_of}
  found = {kind: [] for kind in dict.fromkeys(kind_of.values())}
  for name, kind in kind_of.items():
    found[kind].append(tuple(sorted((name, original[source[name]]))) in pairs)
  wrong = [pair for pair in pairs if source[pair[0]] != source[pair[1]]]
  total = len(source) * (len(source) - 1) // 2
  return {'found': {kind: float(np.mean(values)) for kind, values in found.items()},
          'false_pairs': len(wrong), 'false_share': len(wrong) / total,
          'false_pictures': len({source[name] for pair in wrong for name in pair})}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--photos', type=int, default=500)
  parser.add_argument('--copied', type=int, default=20)
  parser.add_argument('--threshold', type=int, default=10)
  args = parser.parse_args()
  folder = ROOT / 'work' / 'near-peers' / 'images'
  for stale in folder.glob('*') if folder.exists() else ():
    stale.unlink()
  source, kind_of = make_set(folder, args.photos, args.copied)
  names = sorted(source)
  pairs, seconds = ours(folder, names, args.threshold)
  methods = {'this project': {'pairs': pairs, 'seconds': seconds}}
  run = subprocess.run([str(PEERS_PYTHON), str(ROOT / 'benchmarks' / 'peer_near_copies.py'), str(folder),
                        str(args.threshold)], check=False, capture_output=True, text=True)
  if run.returncode:
    sys.exit(f'{run.stderr}the peers\' run failed (exit {run.returncode})')
  for line in run.stderr.splitlines():  # the peers' own progress and logs stay off the console
    if ': not run (' in line:
      print(line, file=sys.stderr)
  peers = json.loads(run.stdout)
  methods.update({name: {'pairs': {tuple(pair) for pair in found['pairs']}, 'seconds': found['seconds']}
                  for name, found in peers.items()})
  results = {name: {**scored(found['pairs'], source, kind_of), 'seconds': found['seconds']}
             for name, found in methods.items()}
  RESULTS.mkdir(parents=True, exist_ok=True)
  (RESULTS / 'near-copy-peers.json').write_text(json.dumps({'images': len(names), **vars(args), 'results': results},
                                                           indent=1))
  kinds = list(dict.fromkeys(kind_of.values()))
  print(f'{len(names)} images: {args.photos} photos, {len(kind_of)} copies of {len(kinds)} kinds, {_GRADIENTS} '
        f'gradients, {_FLATS} one-colour images; threshold {args.threshold}\n')
  print('| kind | ' + ' | '.join(results) + ' |')
  print('| --- ' * (len(results) + 1) + '|')
  for kind in kinds:
    print(f'| {kind} | ' + ' | '.join(f"{result['found'][kind]:.0%}" for result in results.values()) + ' |')
  print('| all copies | ' + ' | '.join(
      f"{np.mean([result['found'][kind] for kind in kinds]):.1%}" for result in results.values()) + ' |')
  print('| pairs joining different pictures | ' + ' | '.join(
      f"{result['false_pairs']} ({result['false_share']:.3%}), {result['false_pictures']} pictures"
      for result in results.values()) + ' |')
  print('| seconds | ' + ' | '.join(f"{result['seconds']:.1f}" for result in results.values()) + ' |')


if __name__ == '__main__':
  main()
