"""The near copies each peer finds in one folder of images: run by benchmarks/near_copy_peers.py
in the peers' own environment (.venv-peers: imagededup, cleanvision), whose pins are not the
project's, and never imported by the project.

Usage: .venv-peers/bin/python benchmarks/peer_near_copies.py FOLDER THRESHOLD

Prints one JSON object: for each method, the pairs of file names it joins (imagededup's hashes:
every pair within THRESHOLD bits; cleanvision: every pair of one of its near-duplicate sets) and
the seconds it took, hashing included. A method that cannot run here (imagededup imports
torchvision, whose compiled operators must match the torch installed: the Makefile's
PEERS_PACKAGES pins a pair that does) is named on stderr and left out.
"""
import contextlib
import json
import sys
import time
from itertools import combinations
from pathlib import Path
from typing import Dict, List, Tuple

IMAGEDEDUP_METHODS = ('PHash', 'DHash', 'WHash')


def imagededup_pairs(folder: str, method: str, threshold: int) -> Tuple[List[Tuple[str, str]], float]:
  from imagededup import methods  # pylint: disable=import-outside-toplevel
  started = time.perf_counter()
  hasher = getattr(methods, method)(verbose=False)
  found = hasher.find_duplicates(image_dir=folder, max_distance_threshold=threshold)
  pairs = sorted({tuple(sorted((name, other))) for name, others in found.items() for other in others})
  return pairs, time.perf_counter() - started


def cleanvision_pairs(folder: str) -> Tuple[List[Tuple[str, str]], float]:
  from cleanvision import Imagelab  # pylint: disable=import-outside-toplevel
  started = time.perf_counter()
  lab = Imagelab(data_path=folder)
  lab.find_issues({'near_duplicates': {}}, verbose=False)
  pairs = sorted({tuple(sorted((Path(a).name, Path(b).name)))
                  for found in lab.info['near_duplicates']['sets'] for a, b in combinations(found, 2)})
  return pairs, time.perf_counter() - started


def main() -> None:
  folder, threshold = sys.argv[1], int(sys.argv[2])
  with contextlib.redirect_stdout(sys.stderr):  # the peers print their progress there
    results = _found(folder, threshold)
  json.dump(results, sys.stdout)


def _found(folder: str, threshold: int) -> Dict[str, dict]:
  results: Dict[str, dict] = {}
  for method in IMAGEDEDUP_METHODS:
    try:
      pairs, seconds = imagededup_pairs(folder, method, threshold)
    except (ImportError, RuntimeError) as error:  # its torchvision does not load with this torch
      print(f'imagededup {method}: not run ({type(error).__name__}: {error})', file=sys.stderr)
      continue
    results[f'imagededup {method}'] = {'pairs': pairs, 'seconds': seconds}
  pairs, seconds = cleanvision_pairs(folder)
  results['cleanvision near_duplicates'] = {'pairs': pairs, 'seconds': seconds}
  return results


if __name__ == '__main__':
  main()
