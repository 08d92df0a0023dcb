"""Near copies: images whose 64-bit perceptual hashes lie within a Hamming distance d of each
other, gathered into groups without comparing every pair and without any key, list or element
that grows with the input.

Pigeonhole: a hash split into d+1 bands differs from one within d bits in at most d of them, so
the two agree exactly on at least one band. Keyed by (band, band value), every close pair meets
in some key. A band of 64/(d+1) bits holds about N/2^bits hashes, which grows with N: a key
denser than KEY_CAP is split again the same way, over the bits outside its band (two hashes
within d that share the band share one of d+1 sub-bands). Within a key, pairs are found by
the same pigeonhole in memory (close_pairs), and a key still over the cap holds KEY_CAP hashes
and compares the rest against them only: what is not held is counted, as pairs among them may
be missed ("cap and report").

The keys hold bare hashes (8 bytes where a node with its sha256 takes 80: each hash is in d+1
keys, (d+1)^2 past the split). A key reports each local component (hashes joined by close pairs
within it) as a star: every member linked to the smallest. The links meet the nodes, whose
labels are their smallest sha256, and a bounded number of label rounds (relabel) joins the
stars: every node takes the smallest label of itself and its neighbours, so a group's label is
its smallest sha256. What is still unsettled after the rounds, and components too large to be
near copies (a chain through near-uniform frames), are counted, not grouped.
"""
import collections
import functools
import itertools
import math
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

BITS = 64
ALL_BITS = (1 << BITS) - 1
# A hash shared by more distinct files than this is near-uniform (an all-black frame): not grouped.
SAME_HASH_CAP = 1_000
# The most hashes one key holds for comparison: 400 KB as uint64, about 4 MB as Python ints.
KEY_CAP = 50_000
# The most distinct hashes in one group: a larger component is a chain, not copies of one picture.
GROUP_CAP = 1_000
# Label rounds over the keys' stars: a star settles in two, and the last round counts what is
# still unsettled, so six settle any component whose stars chain at most two deep.
ROUNDS = 6
# A label marking a component already known to be over GROUP_CAP; it sorts before every sha256.
CAPPED = '!'
# With the distance left to the input's size (distance_for): the share of images that chance
# alone may put within it of an unrelated image.
MAX_CHANCE_SHARE = 0.001
# Up to this many hashes a key is compared all pairs with all in one numpy call; above, split (close_pairs).
_ALL_PAIRS = 512
_FEW = 16  # a key of at most this many is compared in plain Python: numpy's calls cost more
# The longest run of one part's value compared one offset at a time over the whole set: past it, a
# second pigeonhole over the other bits (d+1 more sorts of the set) costs less than the offsets.
_LONG_RUN = 2048
_BLOCK = 1 << 22  # XORs computed at once: 32 MB of uint64
_BYTE_BITS = np.array([bin(value).count('1') for value in range(256)], dtype=np.uint8)


class Node(NamedTuple):
  """One distinct perceptual hash: the smallest sha256 of its files, and how many there are."""
  phash: int
  sha256: str
  count: int


class Member(NamedTuple):
  """A hash's place in one key's local component: the component's smallest hash, and whether
  the component is over GROUP_CAP (then it links nothing, only marks its members)."""
  phash: int
  centre: int
  capped: bool


class State(NamedTuple):
  """A node between label rounds: its label and the hashes it is linked to by stars."""
  label: str
  neighbours: Tuple[int, ...]
  sha256: str
  count: int


def chance_share(num_images: int, distance: int) -> float:
  """About what share of ``num_images`` unrelated images chance puts within ``distance`` of one
  another, if their hashes were random: each meets num_images - 1 others, each within the
  distance with probability sum(C(64, k), k <= d) / 2^64."""
  within = sum(math.comb(BITS, k) for k in range(distance + 1)) / 2**BITS
  return min(1.0, max(0, num_images - 1) * within)


def distance_for(num_images: int, largest: int) -> int:
  """The distance for an input of ``num_images``: ``largest`` (the one measured to find the
  copies), made smaller two bits at a time (hashes differ in even numbers of bits) while chance
  would group more than MAX_CHANCE_SHARE of the images; never below 2. Comparing more pairs
  makes random closeness likelier: 10 holds to about 100,000 images, 8 to a few million."""
  distance = largest
  while distance > 2 and chance_share(num_images, distance) > MAX_CHANCE_SHARE:
    distance -= 2
  return distance


def groups_on_one_machine(files: Iterable[Tuple[str, str]], distance: int, same_hash_cap: int = SAME_HASH_CAP,
                          group_cap: int = GROUP_CAP) -> Tuple[List[Tuple[str, str]], Dict[str, int]]:
  """The groups NearCopies finds, from every file's (sha256, perceptual hash) at once: for a
  runner that holds every element in one process's memory anyway (the DirectRunner), where
  NearCopies's twenty-odd shuffles would cost more than the comparison. The same caps hold: a
  hash shared by more than ``same_hash_cap`` files is near-uniform, a component of more than
  ``group_cap`` hashes a chain. Returns (sha256, representative: the group's smallest sha256)
  for every file of a group of two or more, and the counts NearCopySummary keeps."""
  hash_of: Dict[str, str] = {}
  for sha, phash in files:
    hash_of[sha] = min(phash, hash_of.get(sha, phash))
  files_of: Dict[str, List[str]] = collections.defaultdict(list)
  for sha, phash in hash_of.items():
    files_of[phash].append(sha)
  counts: Dict[str, int] = collections.Counter()
  nodes = []
  for phash, shas in sorted(files_of.items()):
    if len(shas) > same_hash_cap:
      counts['uniform_hashes'] += 1
      counts['uniform_images'] += len(shas)
    else:
      nodes.append((parse(phash), sorted(shas)))
  found = list(close_pairs(as_uint64([phash for phash, _ in nodes]), distance)) if nodes else []
  i = np.concatenate([pair[0] for pair in found]) if found else np.zeros(0, np.int64)
  j = np.concatenate([pair[1] for pair in found]) if found else np.zeros(0, np.int64)
  root = components(len(nodes), i, j)
  # Only a hash in a component of two or more, or of two files or more, can be in a group: most
  # images are neither, and are not looked at one by one.
  in_group = (np.bincount(root, minlength=len(nodes)) > 1)[root] | np.array([len(shas) > 1 for _, shas in nodes], bool)
  members: Dict[int, List[int]] = collections.defaultdict(list)
  for index in np.nonzero(in_group)[0].tolist():
    members[int(root[index])].append(index)
  pairs = []
  for indexes in members.values():
    if len(indexes) > group_cap:
      counts['capped_groups'] += 1
      continue
    shas = sorted(sha for index in indexes for sha in nodes[index][1])
    if len(shas) < 2:
      continue
    counts['groups'] += 1
    counts['images_in_groups'] += len(shas)
    pairs.extend((sha, shas[0]) for sha in shas)
  return pairs, dict(counts)


def parse(phash: str) -> int:
  """A 16-hex-digit perceptual hash as a signed 64-bit int (two's complement), which Beam's
  integer coder takes as a key."""
  value = int(phash, 16)
  return value - (1 << BITS) if value >> (BITS - 1) else value


def as_uint64(phashes: Sequence[int]) -> np.ndarray:
  return np.array(phashes, dtype=np.int64).view(np.uint64)


def node_or_uniform(phash: str, count: int, shas: Optional[Sequence[str]], cap: int = SAME_HASH_CAP
                    ) -> Optional[Node]:
  """The node of a hash shared by ``count`` distinct files (``shas``, the smallest first, while
  count <= cap), or None for a near-uniform one."""
  return Node(parse(phash), shas[0], count) if count <= cap and shas else None


@functools.lru_cache(maxsize=None)
def parts(free: int, pieces: int) -> Tuple[int, ...]:
  """The set bits of ``free`` split into ``pieces`` masks of consecutive set bits, as even as
  can be (the first ones a bit wider). Pigeonhole: hashes that differ in fewer than ``pieces``
  of these bits agree exactly on at least one mask."""
  positions = [bit for bit in range(BITS) if free >> bit & 1]
  width, wider = divmod(len(positions), pieces)
  masks, start = [], 0
  for piece in range(pieces):
    end = start + width + (piece < wider)
    masks.append(sum(1 << bit for bit in positions[start:end]))
    start = end
  return tuple(masks)


@functools.lru_cache(maxsize=None)
def dealt(free: int, pieces: int) -> Tuple[int, ...]:
  """The set bits of ``free`` dealt in turn into ``pieces`` masks: close_pairs's parts. Any
  split into d+1 masks keeps the pigeonhole; dealing spreads a DCT hash's neighbouring bits,
  neighbouring frequencies that photos set alike, over the masks, so each mask's values split
  a set more evenly than consecutive bits' (parts): on the bench's photos, the longest runs of
  one value a quarter shorter."""
  positions = [bit for bit in range(BITS) if free >> bit & 1]
  return tuple(sum(1 << bit for bit in positions[piece::pieces]) for piece in range(pieces))


def bands(distance: int) -> Tuple[int, ...]:
  """The d+1 band masks of the first level."""
  return parts(ALL_BITS, distance + 1)


def sub_bands(distance: int, band: int) -> Tuple[int, ...]:
  """The d+1 masks of the second level under band ``band``: the bits outside it."""
  return parts(ALL_BITS & ~bands(distance)[band], distance + 1)


def _value(phash: int, mask: int) -> int:
  """The bits of ``mask`` in a hash, shifted down: a small int (a mask spans a band and at most
  the band it skips), as a key's part."""
  return (phash & mask) >> ((mask & -mask).bit_length() - 1) if mask else 0


def band_keys(phash: int, distance: int) -> List[Tuple[int, int]]:
  """A hash's first-level keys: (band index, band value)."""
  return [(index, _value(phash, mask)) for index, mask in enumerate(bands(distance))]


def sub_band_keys(phash: int, distance: int, key: Tuple[int, int]) -> List[Tuple[int, int, int, int]]:
  """A hash's second-level keys under a dense first-level ``key``."""
  band, value = key
  return [(band, value, index, _value(phash, mask)) for index, mask in enumerate(sub_bands(distance, band))]


def free_bits(key: Tuple[int, ...], distance: int) -> int:
  """The bits on which a key's hashes may still differ."""
  fixed = bands(distance)[key[0]]
  if len(key) == 4:
    fixed |= sub_bands(distance, key[0])[key[2]]
  return ALL_BITS & ~fixed


def popcount(values: np.ndarray) -> np.ndarray:
  """Set bits per uint64: numpy's own where it has one (2.0), else a byte table."""
  if hasattr(np, 'bitwise_count'):
    return np.bitwise_count(values)
  return table_popcount(values)


def table_popcount(values: np.ndarray) -> np.ndarray:
  flat = np.ascontiguousarray(values, dtype=np.uint64)
  return _BYTE_BITS[flat.view(np.uint8)].reshape(*flat.shape, 8).sum(axis=-1)


def distance_between(a: int, b: int) -> int:
  return ((a ^ b) & ALL_BITS).bit_count()


def _close_to(rows: np.ndarray, columns: np.ndarray, distance: int) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
  """(row, column) positions of the pairs within ``distance``, in blocks of bounded memory."""
  step = max(1, _BLOCK // max(1, len(columns)))
  for start in range(0, len(rows), step):
    near = popcount(rows[start:start + step, None] ^ columns[None, :]) <= distance
    i, j = np.nonzero(near)
    yield i + start, j


def close_pairs(hashes: np.ndarray, distance: int, free: int = ALL_BITS) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
  """Index pairs (i < j) of the hashes within ``distance`` of each other, some more than once.

  A large set is split by the same pigeonhole as the keys, over the ``free`` bits dealt into
  parts: for each part, sorted by its value, every hash is compared with the next ones up to
  the longest run of one value, one offset at a time over the whole set, so the cost is the
  set's size times the longest run, in a few numpy calls per offset; past _LONG_RUN the runs
  are split again (_runs_compared). Pairs across two runs are compared too, and kept if close:
  asking whether two hashes share the value would cost a pass over the set more than it saves.
  A dense cluster that no part thins is compared all pairs with all instead, its size squared,
  bounded by KEY_CAP in a key."""
  pieces = dealt(free, distance + 1)
  if len(hashes) <= _ALL_PAIRS or not all(pieces):
    yield from _all_pairs(hashes, distance)
    return
  for piece in pieces:
    order, ordered, longest = _sorted_by(hashes, piece)
    if longest > len(hashes) // 2:
      yield from _all_pairs(hashes, distance)
      return
    yield from _runs_compared(hashes, distance, piece, free & ~piece, (order, ordered, longest))


def _sorted_by(hashes: np.ndarray, mask: int) -> Tuple[np.ndarray, np.ndarray, int]:
  """The hashes' order by their bits under ``mask``, the hashes in that order, and the longest
  run of one value."""
  values = hashes & np.uint64(mask)
  order = np.argsort(values, kind='stable')
  values = values[order]
  starts = np.flatnonzero(values[1:] != values[:-1]) + 1
  return order, hashes[order], int(np.diff(np.concatenate(([0], starts, [len(values)]))).max())


def _runs_compared(hashes: np.ndarray, distance: int, fixed: int, free: int,
                   sorted_by: Optional[Tuple[np.ndarray, np.ndarray, int]] = None
                   ) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
  """close_pairs's pairs among hashes that agree on the bits under ``fixed``: the hashes sorted
  by those bits (``sorted_by``, if given: _sorted_by's), each compared with the next ones up
  to the longest run. Past _LONG_RUN (N/128 of N random hashes for a part of 7 bits) the runs
  are split again, by the pigeonhole over the ``free`` bits: the whole set sorted by the fixed
  bits and each sub-part's together, so that millions of hashes cost a few sorts each rather
  than their number squared over a hundred."""
  order, ordered, longest = sorted_by or _sorted_by(hashes, fixed)
  pieces = dealt(free, distance + 1)
  if longest > _LONG_RUN and all(pieces):
    for piece in pieces:
      yield from _runs_compared(hashes, distance, fixed | piece, free & ~piece)
    return
  for offset in range(1, longest):
    near = np.flatnonzero(popcount(ordered[offset:] ^ ordered[:-offset]) <= distance)
    first, second = order[near], order[near + offset]
    yield np.minimum(first, second), np.maximum(first, second)


def _all_pairs(hashes: np.ndarray, distance: int) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
  for i, j in _close_to(hashes, hashes, distance):
    upper = i < j
    yield i[upper], j[upper]


def components(size: int, i: np.ndarray, j: np.ndarray) -> np.ndarray:
  """Each of ``size`` items' component root, the smallest index in it, from index pairs:
  smallest labels pushed along the pairs, then pointer jumping, until nothing changes."""
  root = np.arange(size)
  while True:
    before = root.copy()
    lower = np.minimum(root[i], root[j])
    np.minimum.at(root, i, lower)
    np.minimum.at(root, j, lower)
    root = root[root]
    if np.array_equal(root, before):
      return root


def compare_key(phashes: Iterable[int], distance: int, free: int = ALL_BITS, key_cap: int = KEY_CAP,
                group_cap: int = GROUP_CAP) -> Iterator[object]:
  """One key's stars: a Member for every hash in a local component of two or more, then, if
  the key held more than ``key_cap`` hashes, how many it did not hold (an int).

  The first ``key_cap`` hashes are held and compared among themselves; each later one is
  compared against the held ones only, linked to the first it is close to, and never held, so
  memory stays bounded. A component over ``group_cap`` hashes is marked capped and links none
  (a chain of near-uniform frames); held hashes that stay alone emit nothing."""
  iterator = iter(phashes)
  held = sorted(itertools.islice(iterator, key_cap))
  if len(held) < key_cap and len(held) <= _FEW:
    few = [(a, b) for a in range(len(held)) for b in range(a + 1, len(held))
           if distance_between(held[a], held[b]) <= distance]
    if few:
      i, j = np.array(few).T
      yield from _stars(held, components(len(held), i, j), np.zeros(len(held), dtype=np.int64), group_cap)
    return
  hashes = as_uint64(held)
  pairs = list(close_pairs(hashes, distance, free))
  i = np.concatenate([p[0] for p in pairs] + [np.zeros(0, dtype=int)])
  j = np.concatenate([p[1] for p in pairs] + [np.zeros(0, dtype=int)])
  attached = np.zeros(len(held), dtype=np.int64)
  over_cap, later = 0, []
  for phash in iterator:
    over_cap += 1
    later.append(phash)
    if len(later) >= max(1, _BLOCK // max(1, len(held))):
      yield from _attach(later, hashes, held, distance, attached, group_cap)
      later = []
  yield from _attach(later, hashes, held, distance, attached, group_cap)
  yield from _stars(held, components(len(held), i, j), attached, group_cap)
  if over_cap:
    yield over_cap


def _attach(later: List[int], hashes: np.ndarray, held: List[int], distance: int, attached: np.ndarray,
            group_cap: int) -> Iterator[Member]:
  """Hashes past the key's cap, each linked to the first held one it is close to (``attached``
  counts them); one attached to a hash that already has ``group_cap`` is capped."""
  if not later or not held:
    return
  near = popcount(as_uint64(later)[:, None] ^ hashes[None, :]) <= distance
  for row in np.flatnonzero(near.any(axis=1)):
    anchor = int(np.argmax(near[row]))
    attached[anchor] += 1
    yield Member(later[row], held[anchor], bool(attached[anchor] > group_cap))


def _stars(held: List[int], root: np.ndarray, attached: np.ndarray, group_cap: int) -> Iterator[Member]:
  """The held hashes' local components as stars around each one's smallest hash."""
  size = np.bincount(root, minlength=len(held)) + np.bincount(root, weights=attached, minlength=len(held)).astype(int)
  for index, top in enumerate(root):
    if size[top] > 1:
      yield Member(held[index], held[top], bool(size[top] > group_cap))


# What a member tells the first label round: a label offered (a capped component's mark) or
# None, and a neighbour or None.
Told = Tuple[Optional[str], Optional[int]]


def links(member: Member) -> List[Tuple[int, Told]]:
  """What a member tells the first label round, keyed by hash: a capped member its mark; any
  other, unless it is the centre, a link each way between it and the centre."""
  if member.capped:
    return [(member.phash, (capped_label(member.centre), None))]
  if member.centre == member.phash:
    return []
  return [(member.phash, (None, member.centre)), (member.centre, (None, member.phash))]


def capped_label(centre: int) -> str:
  """The mark of a capped component, after its centre: it sorts before every sha256."""
  return f'{CAPPED}{centre & ALL_BITS:016x}'


def first_state(node: Sequence, told: Iterable[Told]) -> Optional[State]:
  """A linked node's state, from its node (phash, smallest sha256, files) and all its keys'
  links: the smallest label offered or its own, every neighbour; None if nothing linked it."""
  label, neighbours, linked = node[1], set(), False
  for offered, neighbour in told:
    linked = True
    if offered is not None:
      label = min(label, offered)
    if neighbour is not None:
      neighbours.add(neighbour)
  return State(label, tuple(sorted(neighbours)), node[1], node[2]) if linked else None


def offers(phash: int, state: State) -> Iterator[Tuple[int, object]]:
  """A round's messages of one node: its state (a plain tuple) to itself, its label to each neighbour."""
  yield phash, tuple(state)
  for neighbour in state.neighbours:
    yield neighbour, state.label


def relabel(messages: Iterable[object]) -> Tuple[State, int]:
  """One node's round: the smallest of its label and its neighbours', and how many of its
  links still had a smaller label at the other end (each link that differs counts once, at
  its larger end: none left after the last round means every component settled)."""
  state, offered = None, []
  for message in messages:
    if isinstance(message, str):
      offered.append(message)
    else:
      state = State(*message)
  smaller = [label for label in offered if label < state.label]
  return (state._replace(label=min(smaller)) if smaller else state), len(smaller)


def is_capped(label: str) -> bool:
  return label.startswith(CAPPED)
