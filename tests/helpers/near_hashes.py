"""Made-up files and perceptual hashes for the near-copy grouping's tests, and the groups they
should form, found by comparing every pair."""
import hashlib
import random
from typing import Dict, Iterable, List, Optional, Tuple

import numpy as np

from beam_pipeline.core.planning import near_copies


def sha(name) -> str:
  """A file's content hash, made from its name."""
  return hashlib.sha256(str(name).encode()).hexdigest()


def flip(value: int, bits) -> int:
  """A 64-bit hash with ``bits`` flipped: a near copy of it, as far as the bits are few."""
  for bit in bits:
    value ^= 1 << bit
  return value


def files_of(values: Iterable[int], prefix: str = '') -> List[Tuple[str, str, int]]:
  """(sha256, hash, priority) of one file per hash, named ``prefix`` and its index; the
  priorities are the same, so that rank order is the hashes' order."""
  return [(sha(f'{prefix}{index}'), f'{value:016x}', 0) for index, value in enumerate(values)]


def cluster(count: int, spread: int, flipped: float, rng: random.Random) -> List[int]:
  """Up to ``count`` distinct hashes of a set of look-alikes: one hash with each of ``spread`` of
  its bits flipped with probability ``flipped`` (the frames of one camera, a few pixels apart)."""
  base, bits = rng.getrandbits(64), rng.sample(range(64), spread)
  return sorted({flip(base, [bit for bit in bits if rng.random() < flipped]) for _ in range(count)})


def brute_anchors(hashes: np.ndarray, distance: int) -> np.ndarray:
  """Each hash's anchor (the hashes in rank order): the first one within ``distance`` of it."""
  anchor = np.empty(len(hashes), np.int64)
  for start in range(0, len(hashes), 1000):
    close = near_copies.popcount(hashes[start:start + 1000, None] ^ hashes[None, :]) <= distance
    anchor[start:start + 1000] = np.argmax(close, axis=1)
  return anchor


def brute_force(files: Iterable[Tuple[str, str, int]], distance: int, same_hash_cap: Optional[int] = None,
                cap: Optional[int] = None) -> Dict[str, str]:
  """{sha256: representative} of every group of two files or more, by the definition: a file's
  smallest hash, a hash's files (left out if more than ``same_hash_cap``), each hash's anchor
  the first in rank order within ``distance`` of it, found by comparing every pair; a group of
  more than ``cap`` files is left out, and a group's representative is its best file."""
  of_file: Dict[str, Tuple[str, int]] = {}
  for content, phash, priority in files:
    of_file[content] = min(of_file.get(content, (phash, priority)), (phash, priority))
  of_hash: Dict[str, List[Tuple[int, str]]] = {}
  for content, (phash, priority) in of_file.items():
    of_hash.setdefault(phash, []).append((priority, content))
  nodes = sorted((min(shared)[0], int(phash, 16), sorted(shared)) for phash, shared in of_hash.items()
                 if same_hash_cap is None or len(shared) <= same_hash_cap)
  anchor = brute_anchors(np.array([value for _, value, _ in nodes], dtype=np.uint64), distance)
  groups: Dict[int, List[Tuple[int, str]]] = {}
  for index, (_, _, shared) in enumerate(nodes):
    groups.setdefault(int(anchor[index]), []).extend(shared)
  return {content: min(group)[1] for group in groups.values() if 1 < len(group) <= (cap or len(group))
          for _, content in group}
