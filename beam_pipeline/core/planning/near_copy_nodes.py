"""Near-copy grouping's files and nodes a slot at a time, as arrays: what NearCopies
(pipeline/planning/near_copy_groups.py) shuffles by node slot instead of by node, since Beam's
cost per element is several times a node's own work.

A node slot is a share of the (DCT half, colour signature) space (node_slot): the files of one
node all land in one slot, where nodes_of makes its nodes, and where best_anchors meets each
node with what the band keys told of it. A slot holds
about 1/slots of the nodes; slots_for chooses as many as keep that bounded.

A file is (source_sha256, perceptual hash, priority, colour signature), as
content_groups.perceptual_hashes lists it; here a row of FILES: its DCT half (near_copies.parse),
priority, colour (near_copies.colour_value), blocks half (near_copies.parse_blocks) and the
sha256's 32 bytes. A node is a row of NODES: the same fields of its best file (the smallest
(priority, sha256, blocks half)) and how many distinct files share it.
"""
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional, Set, Tuple

import numpy as np

from beam_pipeline.core.planning import near_copies

FILES = np.dtype([('phash', '<i8'), ('priority', '<i8'), ('colour', '<i8'), ('blocks', '<i8'), ('sha', 'S32')])
NODES = np.dtype([('phash', '<i8'), ('priority', '<i8'), ('colour', '<i8'), ('blocks', '<i8'), ('sha', 'S32'),
                  ('count', '<i8')])
# At least this many node slots, and as many more (a power of two) as keep a slot within
# NODES_PER_SLOT nodes of the input's images: 72 bytes each, about 14 MB a slot at most. Fewer
# slots make fewer elements: each (band key, slot) pair is one (benchmarks/README.md, Near copies
# at scale).
SLOTS = 16
NODES_PER_SLOT = 200_000
_MIX = 0x9E3779B97F4A7C15  # Fibonacci hashing's multiplier: spreads a hash's correlated bits over the slot's


def slots_for(num_images: int) -> int:
  """How many node slots an input of ``num_images`` images gets: SLOTS, doubled while a slot would
  hold more than NODES_PER_SLOT of them."""
  slots = SLOTS
  while slots * NODES_PER_SLOT < num_images:
    slots *= 2
  return slots


def node_slot(phash: int, colour: int, slots: int) -> int:
  """The slot of the node of DCT half ``phash`` and colour signature ``colour`` (signed 64-bit
  ints, near_copies.parse and colour_value), of ``slots`` (a power of two)."""
  mixed = ((phash ^ colour) & near_copies.ALL_BITS) * _MIX & near_copies.ALL_BITS
  return mixed >> (near_copies.BITS - slots.bit_length() + 1)


def node_slots(phashes: np.ndarray, colours: np.ndarray, slots: int) -> np.ndarray:
  """node_slot of each of ``phashes`` and ``colours`` (int64 arrays)."""
  mixed = (phashes ^ colours).view(np.uint64) * np.uint64(_MIX)  # wraps modulo 2^64, as node_slot's mask does
  return (mixed >> np.uint64(near_copies.BITS - slots.bit_length() + 1)).astype(np.int64)


def file_table(files: Iterable[Tuple[str, str, int, str]]) -> np.ndarray:
  """Files (source_sha256, phash, priority, colour) as rows of FILES."""
  rows = [(near_copies.parse(phash), priority, near_copies.colour_value(colour), near_copies.parse_blocks(phash),
           bytes.fromhex(sha)) for sha, phash, priority, colour in files]
  return np.array(rows, dtype=FILES)


def by_slot(table: np.ndarray, slots: int) -> Iterator[Tuple[int, np.ndarray]]:
  """(node slot, its rows) of a table of FILES or NODES, in slot order."""
  return partitioned(table, node_slots(table['phash'], table['colour'], slots))


def by_file_slot(table: np.ndarray, slots: int) -> Iterator[Tuple[int, np.ndarray]]:
  """(file slot, its rows) of a table of FILES, in slot order: a share of the sha256s by their
  first 32 bits, where every copy of a file meets (smallest_per_file)."""
  heads = np.ascontiguousarray(table['sha']).view(np.uint8).reshape(-1, 32)[:, :4].astype(np.int64)
  return partitioned(table, ((heads[:, 0] << 24 | heads[:, 1] << 16 | heads[:, 2] << 8 | heads[:, 3]) * slots) >> 32)


def partitioned(rows: np.ndarray, keys: np.ndarray) -> Iterator[Tuple[int, np.ndarray]]:
  """(key, its rows, in their order) of rows whose keys (a slot, a file) are ``keys``, in key order."""
  order = np.argsort(keys, kind='stable')
  ordered = keys[order]
  starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1]))) if len(ordered) else []
  for start, end in zip(list(starts), [*list(starts)[1:], len(order)]):
    yield int(ordered[start]), rows[order[start:end]]


def smallest_per_file(table: np.ndarray) -> np.ndarray:
  """The FILES rows of a table, one per sha256: its smallest (phash, priority, colour) as the
  texts compare (the hash's hex digits, then the priority, then the colour signature's), as a
  file validated twice may hash differently on two machines."""
  colour_digits = table['colour'].byteswap().view(np.uint64)  # a signature's bytes in its text's order
  order = np.lexsort((colour_digits, table['priority'], table['blocks'].view(np.uint64),
                      table['phash'].view(np.uint64), table['sha']))
  ordered = table[order]
  first = np.concatenate(([True], ordered['sha'][1:] != ordered['sha'][:-1])) if len(ordered) else []
  return ordered[first]


class Nodes(NamedTuple):
  """nodes_of's result: the nodes (NODES), and for each of several files ((phash, colour), its
  files' sha256s, the best first); and how many near-uniform hashes and images were left out."""
  nodes: np.ndarray
  several: List[Tuple[Tuple[int, int], Tuple[str, ...]]]
  uniform_hashes: int
  uniform_images: int


def nodes_of(table: np.ndarray, same_hash_cap: int = near_copies.SAME_HASH_CAP) -> Nodes:
  """The nodes of a table of FILES, each sha256 once: one for each (DCT half, colour) the files
  share (near_copies.node_key), its best file's fields and how many files share it; none for one
  shared by more than ``same_hash_cap`` files, a near-uniform hash (an all-black frame)."""
  order = np.lexsort((table['blocks'], table['sha'], table['priority'], table['colour'], table['phash']))
  ordered = table[order]
  if not len(ordered):
    return Nodes(np.empty(0, NODES), [], 0, 0)
  changes = (ordered['phash'][1:] != ordered['phash'][:-1]) | (ordered['colour'][1:] != ordered['colour'][:-1])
  starts = np.flatnonzero(np.concatenate(([True], changes)))
  counts = np.diff(np.append(starts, len(ordered)))
  kept = counts <= same_hash_cap
  nodes = np.empty(int(kept.sum()), NODES)
  best = ordered[starts[kept]]
  for field in FILES.names:
    nodes[field] = best[field]
  nodes['count'] = counts[kept]
  several = [((int(ordered['phash'][start]), int(ordered['colour'][start])),
              tuple(_hex(sha) for sha in ordered['sha'][start:start + count].tolist()))
             for start, count in zip(starts[kept & (counts > 1)].tolist(), counts[kept & (counts > 1)].tolist())]
  return Nodes(nodes, several, int((~kept).sum()), int(counts[~kept].sum()))


def member_rows(nodes: np.ndarray) -> np.ndarray:
  """The nodes' member rows (near_copies.member_rows), which the band keys hold."""
  return np.stack([nodes['phash'], nodes['priority'], nodes['colour'], nodes['blocks']], axis=1)


# What a key told of a node (near_copies.key_anchors): ((phash, colour), (priority, anchor's phash,
# anchor's colour)), or ((phash, colour), None) where the node anchors another in that key.
Told = Tuple[Tuple[int, int], Optional[Tuple[int, int, int]]]
# A member of a group, under its anchor's (phash, colour): (priority, sha256, phash, files, colour),
# which sorts the group's best file first.
Member = Tuple[Tuple[int, int], Tuple[int, str, int, int, int]]


class BestTold(NamedTuple):
  """best_told's result: the best anchor the keys told of each node that has one, as (priority,
  DCT half unsigned, colour, DCT half signed), under the node's (DCT half, colour); and the nodes
  told as anchoring others."""
  best: Dict[Tuple[int, int], Tuple[int, int, int, int]]
  anchoring: Set[Tuple[int, int]]


def best_told(told: Iterable[Told]) -> BestTold:
  """The best anchor (in rank order) the keys found for each node, and the nodes that anchor others."""
  best: Dict[Tuple[int, int], Tuple[int, int, int, int]] = {}
  anchoring = set()
  for key, anchor in told:
    if anchor is None:
      anchoring.add(key)
      continue
    found = (*near_copies.rank_key(anchor[1], anchor[0], anchor[2]), anchor[1])
    if key not in best or found < best[key]:
      best[key] = found
  return BestTold(best, anchoring)


def best_anchors(nodes: np.ndarray, told: Iterable[Told]) -> Iterator[Member]:
  """Each node of a slot that is in a group, under the best anchor (in rank order) its keys
  found, or under its own (phash, colour) if it anchors another or has several files; none for
  a node of one file that neither has an anchor nor is one (most images)."""
  best, anchoring = best_told(told)
  wanted = set(best) | anchoring
  for phash, priority, colour, sha, count in zip(nodes['phash'].tolist(), nodes['priority'].tolist(),
                                                 nodes['colour'].tolist(), nodes['sha'].tolist(),
                                                 nodes['count'].tolist()):
    key = (phash, colour)
    if count == 1 and key not in wanted:
      continue
    found = best.get(key)
    yield (found[3], found[2]) if found is not None else key, (priority, _hex(sha), phash, count, colour)


def _hex(sha: bytes) -> str:
  """A sha256's 64 hex digits from a FILES or NODES row, whose bytes numpy gives without trailing NULs."""
  return sha.ljust(32, b'\0').hex()
