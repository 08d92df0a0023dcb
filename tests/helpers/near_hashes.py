"""Made-up files and perceptual hashes for the near-copy grouping's tests."""
import collections
import hashlib

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


def brute_force(pairs, distance, same_hash_cap=None):
  """{sha256: representative} of every group of two files or more, by comparing every pair of
  distinct hashes; a hash shared by more than ``same_hash_cap`` files is left out."""
  contents = {}
  for content, phash in pairs:
    contents[content] = min(contents.get(content, phash), phash)
  files = collections.Counter(contents.values())
  names = sorted(name for name, phash in contents.items() if same_hash_cap is None or files[phash] <= same_hash_cap)
  parent = list(range(len(names)))

  def root(i):
    while parent[i] != i:
      i = parent[i]
    return i

  hashes = np.array([int(contents[name], 16) for name in names], dtype=np.uint64)
  close = near_copies.popcount(hashes[:, None] ^ hashes[None, :]) <= distance
  for a, b in zip(*np.nonzero(np.triu(close, 1))):
    parent[max(root(a), root(b))] = min(root(a), root(b))
  groups = collections.defaultdict(list)
  for i, name in enumerate(names):
    groups[root(i)].append(name)
  return {name: min(group) for group in groups.values() if len(group) > 1 for name in group}
