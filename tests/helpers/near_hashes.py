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


def files_of(values: Iterable[int], prefix: str = '') -> List[Tuple[str, str, int, str]]:
  """(sha256, hash, priority, colour signature) of one file per hash, named ``prefix`` and its
  index, without a signature; the priorities are the same, so that rank order is the hashes' order."""
  return [(sha(f'{prefix}{index}'), f'{value:016x}', 0, '') for index, value in enumerate(values)]


def cluster(count: int, spread: int, flipped: float, rng: random.Random) -> List[int]:
  """Up to ``count`` distinct hashes of a set of look-alikes: one hash with each of ``spread`` of
  its bits flipped with probability ``flipped`` (the frames of one camera, a few pixels apart)."""
  base, bits = rng.getrandbits(64), rng.sample(range(64), spread)
  return sorted({flip(base, [bit for bit in bits if rng.random() < flipped]) for _ in range(count)})


def brute_anchors(hashes: np.ndarray, distance: int, colours: Optional[np.ndarray] = None) -> np.ndarray:
  """Each hash's anchor (the hashes in rank order): the first one within ``distance`` of it whose
  colours (parse_colours' rows) are not apart from its own (two featureless hashes' by colour
  alone)."""
  anchor = np.empty(len(hashes), np.int64)
  for start in range(0, len(hashes), 1000):
    close = near_copies.popcount(hashes[start:start + 1000, None] ^ hashes[None, :]) <= distance
    if colours is not None:
      flat = near_copies.featureless(hashes[start:start + 1000, None]) & near_copies.featureless(hashes[None, :])
      close &= ~near_copies.colours_apart(colours[start:start + 1000, None], colours[None, :], flat)
    anchor[start:start + 1000] = np.argmax(close, axis=1)
  return anchor


def brute_force(files: Iterable[Tuple[str, str, int, str]], distance: int, same_hash_cap: Optional[int] = None,
                cap: Optional[int] = None) -> Dict[str, str]:
  """{sha256: representative} of every group of two files or more, by the definition: a file's
  smallest (hash, priority, colour), a node's files (left out if more than ``same_hash_cap``),
  each node's anchor the first in rank order whose hash is within ``distance`` of its own and
  whose colours are not apart, found by comparing every pair; a group of more than ``cap`` files is
  left out, and a group's representative is its best file."""
  of_file: Dict[str, Tuple[str, int, str]] = {}
  for content, phash, priority, colour in files:
    of_file[content] = min(of_file.get(content, (phash, priority, colour)), (phash, priority, colour))
  of_node: Dict[Tuple[str, int], List[Tuple[int, str]]] = {}
  for content, (phash, priority, colour) in of_file.items():
    of_node.setdefault((phash, near_copies.colour_value(colour)), []).append((priority, content))
  nodes = sorted((min(shared)[0], int(phash, 16), colour, sorted(shared))
                 for (phash, colour), shared in of_node.items()
                 if same_hash_cap is None or len(shared) <= same_hash_cap)
  anchor = brute_anchors(np.array([value for _, value, _, _ in nodes], dtype=np.uint64), distance,
                         near_copies.parse_colours([colour for _, _, colour, _ in nodes]))
  groups: Dict[int, List[Tuple[int, str]]] = {}
  for index, (_, _, _, shared) in enumerate(nodes):
    groups.setdefault(int(anchor[index]), []).extend(shared)
  return {content: min(group)[1] for group in groups.values() if 1 < len(group) <= (cap or len(group))
          for _, content in group}
