"""How far the perceptual hashes of near copies lie from their originals', against those of
distinct photos: the measurement behind perceptual_hash.NEAR_DISTANCE. A pair's distance here is
the smallest at which it is near (perceptual_hash.near): its blocks halves' Hamming distance, or
its DCT halves' less near_copies.DCT_MARGIN where that is larger.

Usage: python -m benchmarks.near_copies [--photos 2000] [--copied 1000] [--seed 0]

--photos distinct photos (synthetic.near_copy_kinds.original), each stored as a camera would
store it (a JPEG of quality 85-95, 480-1280 pixels on its longer side), and of the first
--copied of them one copy of each kind in near_copy_kinds.COPIES, made from the original's
bytes as a user would make it. Every file goes through preparation.prepare_images, the path a
conversion takes. Printed: each kind's distances to its original; the distances between
distinct photos (all pairs); and for each threshold, the share of each kind's copies found and
the false positives, photos within it of another photo they were not made from. The distance
chosen is the smallest at which every kind in COPIES is found at least 98% of the time; it
must keep false positives at or under 0.1% of photos. NOT_FOUND's kinds are measured
alongside, to say what is missed.
Results also go to work/bench-results/near-copies.json.
"""
import argparse
import json
import time
from pathlib import Path
from typing import List

import numpy as np

from beam_pipeline.synthetic import near_copy_kinds
from beam_pipeline.core.images import perceptual_hash, preparation
from beam_pipeline.core.planning import near_copies
from beam_pipeline.core.images.image_info import PreparedImage
from beam_pipeline.core.rejections import Rejected

RESULTS = Path(__file__).resolve().parents[1] / 'work' / 'bench-results'
THRESHOLDS = range(4, 17)
# Of each kind's copies. 98%, not 99: a copy of a picture whose sides weigh nearly alike may face
# the other way (perceptual_hash.facing), which no distance finds: about 2% of crops of 1-3% since
# facing weighs the grid's centre, so that no distance meets it (benchmarks/README.md, Near copies).
FOUND_AT_LEAST = 0.98
FALSE_AT_MOST = 0.001  # of photos
_MAX_PIXELS = 10**8
_CHUNK = 64  # images per prepare_images call, about as validation's chunks hold


def prepared(datas: List[bytes]) -> List[PreparedImage]:
  """Each file as the conversion's own path prepares it (its hashes, statistics and stored bytes),
  a validation chunk at a time; every file must be an image."""
  found = []
  for start in range(0, len(datas), _CHUNK):
    for result in preparation.prepare_images(datas[start:start + _CHUNK], _MAX_PIXELS):
      assert not isinstance(result, Rejected), result
      found.append(result)
  return found


def hashes(datas: List[bytes]) -> np.ndarray:
  """The perceptual hash of each file, through the conversion's own path, as (n, 2) unsigned 64-bit
  integers: its DCT half, then its blocks half."""
  return np.array([(int(result.info.phash[:16], 16), int(result.info.phash[16:], 16)) for result in prepared(datas)],
                  np.uint64)


def _distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """The smallest distance at which each pair of hashes is near (perceptual_hash.near): their blocks
  halves' distance, or their DCT halves' less near_copies.DCT_MARGIN where that is larger."""
  dct = np.bitwise_count(a[..., 0] ^ b[..., 0]).astype(np.int64)
  blocks = np.bitwise_count(a[..., 1] ^ b[..., 1]).astype(np.int64)
  return np.maximum(blocks, dct - near_copies.DCT_MARGIN)


def measure(photos: int, copied: int, seed: int) -> dict:
  started = time.perf_counter()
  originals = [near_copy_kinds.original(seed * 1_000_000 + i) for i in range(photos)]
  kinds = list(near_copy_kinds.KINDS)
  copies = {kind: [near_copy_kinds.copy(originals[i], kind, seed * 1_000_000 + i) for i in range(copied)]
            for kind in kinds}
  made = time.perf_counter() - started
  started = time.perf_counter()
  photo_hashes = hashes(originals)
  copy_distances = {kind: _distances(hashes(copies[kind]), photo_hashes[:copied]) for kind in kinds}
  hashed = time.perf_counter() - started
  pairs = _distances(photo_hashes[:, None], photo_hashes[None, :])
  np.fill_diagonal(pairs, 64)
  nearest_other = pairs.min(axis=1)
  distinct = pairs[np.triu_indices(photos, 1)]
  per_threshold = [{
      'threshold': t,
      'found': {kind: float(np.mean(copy_distances[kind] <= t)) for kind in kinds},
      'false_pairs': float(np.mean(distinct <= t)),
      'false_photos': float(np.mean(nearest_other <= t)),
  } for t in THRESHOLDS]
  chosen = next((row['threshold'] for row in per_threshold
                 if all(row['found'][kind] >= FOUND_AT_LEAST for kind in near_copy_kinds.COPIES)), None)
  return {
      'photos': photos, 'copied': copied, 'seed': seed, 'made_s': round(made, 1), 'hashed_s': round(hashed, 1),
      'copies': {kind: {'max': int(d.max()), 'p99': float(np.percentile(d, 99)), 'p95': float(np.percentile(d, 95)),
                        'median': float(np.median(d))} for kind, d in copy_distances.items()},
      'distinct': {'pairs': int(distinct.size), 'min': int(distinct.min()),
                   **{f'p{q:g}': float(np.percentile(distinct, q)) for q in (0.001, 0.01, 0.1, 1, 5, 50)}},
      'per_threshold': per_threshold,
      'chosen': chosen,
      'chosen_false_photos': next((row['false_photos'] for row in per_threshold if row['threshold'] == chosen), None),
  }


def report(result: dict) -> str:
  kinds = list(result['copies'])
  lines = [f"{result['photos']} distinct photos, {result['copied']} copies of each kind "
           f"(made in {result['made_s']} s, hashed in {result['hashed_s']} s)", '',
           '| copy | median | p95 | p99 | max |', '| --- | --- | --- | --- | --- |']
  lines += [f"| {kind}{'' if kind in near_copy_kinds.COPIES else ' (not found)'} | {d['median']:g} | {d['p95']:g} "
            f"| {d['p99']:g} | {d['max']} |" for kind, d in result['copies'].items()]
  distinct = result['distinct']
  lines += ['', f"Distinct pairs ({distinct['pairs']:,}): min {distinct['min']}, " + ', '.join(
      f'{key} {value:g}' for key, value in distinct.items() if key.startswith('p') and key != 'pairs'), '',
            '| threshold | ' + ' | '.join(kinds) + ' | false pairs | false photos |',
            '| --- ' * (len(kinds) + 3) + '|']
  for row in result['per_threshold']:
    lines.append(f"| {row['threshold']} | " + ' | '.join(f"{row['found'][kind]:.1%}" for kind in kinds) +
                 f" | {row['false_pairs']:.4%} | {row['false_photos']:.2%} |")
  chosen = result['chosen']
  within = result['chosen_false_photos'] is not None and result['chosen_false_photos'] <= FALSE_AT_MOST
  verdict = ('none finds every kind' if chosen is None else
             f"{chosen}: false positives {result['chosen_false_photos']:.2%} of photos "
             f"({'within' if within else 'OVER'} the {FALSE_AT_MOST:.1%} allowed)")
  lines += ['', f'Smallest distance finding every kind {FOUND_AT_LEAST:.0%}: {verdict}; '
            f'perceptual_hash.NEAR_DISTANCE is {perceptual_hash.NEAR_DISTANCE}']
  return '\n'.join(lines)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--photos', type=int, default=2000)
  parser.add_argument('--copied', type=int, default=1000)
  parser.add_argument('--seed', type=int, default=0)
  args = parser.parse_args()
  result = measure(args.photos, min(args.copied, args.photos), args.seed)
  RESULTS.mkdir(parents=True, exist_ok=True)
  (RESULTS / 'near-copies.json').write_text(json.dumps(result, indent=1))
  print(report(result))


if __name__ == '__main__':
  main()
