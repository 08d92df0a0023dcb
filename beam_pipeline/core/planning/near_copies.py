"""Near copies: images whose perceptual hashes lie near one picture's (perceptual_hash.near:
the blocks halves within a Hamming distance d, the DCT halves within d + DCT_MARGIN), gathered
into groups without comparing every pair and without any key, list or element that grows with
the input.

A node is a distinct DCT half and colour signature (which colours lie where, which the hash, of
gray levels, does not see), with its best file's blocks half. A group is an anchor and the nodes
that take it as theirs: a node's anchor is the first node in rank order (the best image first:
priority) whose hash is near its own and whose colours are not apart from its own
(colours_apart: pictures that differ only in hue hash alike), itself if none comes before it.
Every member of a group is then near one picture, so a group is copies of that picture, never a
chain (a near b near c ...) that could join a whole collection of look-alikes; and the anchors are a function
of the set of nodes alone, whatever order, runner or worker count found them. The price: two
copies within d of each other but not of one anchor may land in two groups. A group of more
images than the splits can take whole without losing their fractions (group_cap) is a set of
look-alikes (frames of one fixed camera, products on one background): counted, and split
image by image.

Pigeonhole: a blocks half split into d+1 parts differs from one within d bits in at most d of
them, so the two agree exactly on at least one part; the DCT halves of those that agree confirm.
Sorted by a part's value and then by rank, a hash compares the hashes of its run (its part's
value) that rank before it (anchors). In a cluster of look-alikes the run's first is within d
of most, so each compares it first, a step at a time from the run's start, and stops: about
one comparison a hash, however dense the cluster. A sparse run compares every hash with every
one before it, an offset at a time; one too long for that is split again by the pigeonhole
over the bits outside the part. What no split thins and no
bounded number of steps settles (two clusters that agree on most bits, a loose cloud of hashes
all about d apart) is counted as cut short: cost and memory stay bounded by the hashes.

On Dataflow (pipeline/planning/near_copy_groups.py) hashes meet by band (a first-level part) value, a band's
small keys in packs of at most KEY_CAP (compared with the band's bits fixed, so each key's runs stay its own):
a key denser than KEY_CAP is split again into sub-bands, and a key still over it holds its KEY_CAP best-ranked
hashes and looks for the others' anchors among them only (key_anchors), which in a cluster of
look-alikes, whose keys stay dense, is where they are. Each hash takes the best anchor any of its
keys found.
"""
import functools
import itertools
import math
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

BITS = 64
ALL_BITS = (1 << BITS) - 1
# How many bits past the distance two near hashes' DCT halves may lie apart, their blocks halves
# lying within it: crops of 5-10%, corner watermarks and turns of a few degrees move the DCT's
# frequencies past the distance, their blocks a few bits. 2 finds more such copies than the DCT
# half alone and joins fewer distinct photos; 4 found more still but joined twice as many
# (benchmarks/README.md, Near copies).
DCT_MARGIN = 2
# A hash shared by more distinct files than this is near-uniform (an all-black frame): not grouped.
SAME_HASH_CAP = 1_000
# colour_signature's 8 bytes (opponent colours by quarter, a unit two levels): a signature whose
# every byte is within GRAY of 0 is of a gray picture, which a colour copy may have been made from
# (or into); two colour pictures whose signatures differ by more than COLOURS_APART in a byte
# are different pictures, however alike their hashes (benchmarks/README.md, Near copies: copies
# differ by at most 5, two-colour gradients whose hues lie 18 degrees apart by 11 or more).
GRAY = 4
COLOURS_APART = 8
# The most hashes one key holds for comparison: 1.6 MB as member rows (member_rows), twice that while chosen.
KEY_CAP = 50_000
# The most images a group holds whatever the input: what one combiner lists of a group's members.
GROUP_CAP = 1_000
# A group is kept in one split while it holds at most this share of the images the smallest split
# is to hold (group_cap), so that it moves a split's share by at most that much of it.
GROUP_SHARE = 0.01
SMALLEST_GROUP_CAP = 10  # however small the input, a group of this many is kept together
# With the distance left to the input's size (distance_for): the share of images that chance
# alone may put within it of an unrelated image.
MAX_CHANCE_SHARE = 0.001
# How anchors compares a run (_anchored): a run of at most _SHORT by offsets; a longer one is
# probed for _FIRST_STEPS steps from its start (a cluster of look-alikes is dense: most find
# their anchor there), a sparse one of at most _OFFSETS then by offsets where one member in
# _ASKING or more is asking; a dense run's stragglers go on for _STRAGGLER_STEPS steps, a run
# that cannot be split again for up to _OFFSETS, before what is left is split again or cut short.
_SHORT = 32
_FIRST_STEPS = 2
_OFFSETS = 1024
_ASKING = 4
_STRAGGLER_STEPS = 32
_BLOCK = 1 << 16  # comparisons _compared makes at once: 512 KB of uint64
_WIDEST = 256  # candidates one query compares at once
_BYTE_BITS = np.array([bin(value).count('1') for value in range(256)], dtype=np.uint8)
# priority's fields: whether damaged, then the longer side and the bytes, each counted down from
# its largest value so that a larger image ranks first.
_SIDE_BITS, _BYTES_BITS = 24, 38
_LARGEST_SIDE, _MOST_BYTES = (1 << _SIDE_BITS) - 1, (1 << _BYTES_BITS) - 1


def priority(damaged: bool, longer_side: int, num_bytes: int) -> int:
  """Where an image ranks as an anchor, the smallest first: undamaged before damaged, then the
  longer side, then the most bytes (the least compressed), so that a source ranks before its
  downscaled, cropped or re-compressed copies. One int of 63 bits, which a key holds as a
  uint64 beside the hash; a run's catalog keeps all three of every record, so an update ranks
  catalogued images as the run that wrote them did."""
  side = _LARGEST_SIDE - min(max(longer_side, 0), _LARGEST_SIDE)
  size = _MOST_BYTES - min(max(num_bytes, 0), _MOST_BYTES)
  return (int(bool(damaged)) << (_SIDE_BITS + _BYTES_BITS)) | (side << _BYTES_BITS) | size


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


def group_cap(num_images: int, smallest_fraction: float) -> int:
  """The most images a group may hold and be kept in one split, for an input of ``num_images``
  whose smallest split is ``smallest_fraction`` of it: GROUP_SHARE of that split's images, at
  least SMALLEST_GROUP_CAP and at most GROUP_CAP. A group lands whole in one split; a larger
  one would take a split's share away (every frame of a fixed camera in validation)."""
  return max(SMALLEST_GROUP_CAP, min(GROUP_CAP, int(GROUP_SHARE * num_images * smallest_fraction)))


def rank_key(phash: int, priority_of: int, colour: int = 0) -> Tuple[int, int, int]:
  """A node's place in rank order: by priority, then by the hash, then by the colour signature, so
  that no two tie."""
  return priority_of, phash & ALL_BITS, colour


def node_key(phash: str, colour: str) -> Tuple[str, int]:
  """What a node's files share: the hash's DCT half (16 hex digits) and the colour signature's
  value (colour_value: a missing signature is a gray picture's)."""
  return phash[:16], colour_value(colour)


def colour_value(colour: str) -> int:
  """A colour signature's 16 hex digits as one signed 64-bit int, which crosses a shuffle smaller
  than its text; a missing one ('') as a gray picture's, 0."""
  return int.from_bytes(bytes.fromhex(colour), 'little', signed=True) if colour else 0


def parse_colours(values: Sequence[int]) -> np.ndarray:
  """Colour signatures (colour_value) as an (n, 8) array of their signed bytes."""
  return np.array(values, dtype=np.int64).view(np.int8).reshape(len(values), 8).astype(np.int16)


def colours_apart(a: np.ndarray, b: np.ndarray, featureless: Union[bool, np.ndarray] = False) -> np.ndarray:
  """Whether each pair of colour signatures (parse_colours' rows, broadcast) is of two different pictures:
  both in colour, and apart by more than COLOURS_APART in some quarter's opponent colour. A gray
  picture is apart from none: a copy may have been turned gray. But two ``featureless`` images
  (one colour each: flat hashes, whose colour is all there is to them) are apart by their
  colours alone, a gray one too."""
  coloured = (np.abs(a).max(axis=-1) > GRAY) & (np.abs(b).max(axis=-1) > GRAY) | featureless
  return coloured & (np.abs(a - b).max(axis=-1) > COLOURS_APART)


def featureless(hashes: np.ndarray) -> np.ndarray:
  """Whether each hash (uint64) is a featureless image's (perceptual_hash.flat): its DC bit set,
  which a DCT hash never sets."""
  return (hashes >> np.uint64(BITS - 1)) == 1


def _featureless(phash: int) -> bool:
  """featureless of one hash as a signed 64-bit int (parse), whose DC bit is its sign."""
  return phash < 0


class Ranked(NamedTuple):
  """The nodes groups_on_one_machine compared, in rank order, and each one's anchor: what the
  near-copy index is built from (near_index.told_by)."""
  priorities: List[int]  # their best file's
  hashes: np.ndarray  # DCT halves, uint64
  colours: np.ndarray  # colour values (colour_value), int64
  blocks: np.ndarray  # blocks halves, uint64, their best file's
  anchor: np.ndarray  # each node's anchor, an index into these


class OnOneMachine(NamedTuple):
  """groups_on_one_machine's result: (sha256, representative) for every file of a group, the
  counts NearCopySummary keeps, and the nodes with their anchors."""
  pairs: List[Tuple[str, str]]
  counts: Dict[str, int]
  ranked: Optional[Ranked] = None


def groups_on_one_machine(files: Iterable[Tuple[str, str, int, str]], distance: int, cap: int = GROUP_CAP,
                          same_hash_cap: int = SAME_HASH_CAP) -> OnOneMachine:
  """The groups NearCopies finds, from every file's (sha256, perceptual hash, priority, colour) at once:
  for a runner that holds every element in one process's memory anyway (the DirectRunner),
  where NearCopies's shuffles would cost more than the comparison. Its memory grows with the
  hashes, never with the pairs of them that are close. Near-uniform hashes and sets of
  look-alikes are counted, not grouped. A group's representative is its best file: the smallest
  (priority, sha256) of its files. The files become nodes in numpy arrays (_Nodes), not a
  Python object each: at a million files that took longer than comparing their hashes.

  Args:
    files: every file's (sha256, perceptual hash, priority, colour signature); a file given twice keeps its smallest
      (hash, priority, colour).
    distance: the most bits a hash's blocks half may differ in from its group's anchor's (perceptual_hash.near).
    cap: the most images a group may hold; a group of more is a set of look-alikes.
    same_hash_cap: the most files a hash may be shared by; a hash shared by more is near-uniform.
  """
  files = _distinct_files(list(files))
  if not files:
    return OnOneMachine([], {})
  nodes = _Nodes.of(files, same_hash_cap)
  counts: Dict[str, int] = {}
  if nodes.uniform_images:
    _add(counts, uniform_hashes=nodes.uniform_hashes, uniform_images=nodes.uniform_images)
  found = anchors(nodes.hashes, distance, colours=parse_colours(nodes.colours), blocks=nodes.blocks)
  sizes = np.bincount(found.anchor, weights=nodes.sizes, minlength=len(nodes.sizes)).astype(np.int64)
  if found.cut_short:
    _add(counts, cut_short_hashes=found.cut_short)
  grouped = np.flatnonzero(sizes[found.anchor] > 1)
  pairs: List[Tuple[str, str]] = []
  # Groups in the order of their first member, each member's files in rank order.
  by_group = grouped[np.argsort(found.anchor[grouped], kind='stable')]
  group_anchors, starts = np.unique(found.anchor[by_group], return_index=True)
  members = np.split(by_group, starts[1:])
  for anchor, indexes in sorted(zip(group_anchors.tolist(), members), key=lambda group: group[1][0]):
    if sizes[anchor] > cap:
      _add(counts, look_alike_sets=1, look_alike_images=int(sizes[anchor]))
      continue
    _add(counts, groups=1, images_in_groups=int(sizes[anchor]))
    indexes = indexes.tolist()
    representative = min((nodes.priorities[index], nodes.best_sha(index)) for index in indexes)[1]
    pairs.extend((sha, representative) for index in indexes for sha in nodes.shas_of(index))
  return OnOneMachine(pairs, counts, Ranked(nodes.priorities, nodes.hashes, nodes.colours, nodes.blocks, found.anchor))


def _distinct_files(files: List[Tuple[str, str, int, str]]) -> List[Tuple[str, str, int, str]]:
  """``files`` with each sha256 once, given twice keeping its smallest (hash, priority, colour)."""
  if len({sha for sha, _, _, _ in files}) == len(files):
    return files
  of_file: Dict[str, Tuple[str, int, str]] = {}
  for sha, phash, rank, colour in files:
    of_file[sha] = min(of_file.get(sha, (phash, rank, colour)), (phash, rank, colour))
  return [(sha, *values) for sha, values in of_file.items()]


class _Nodes(NamedTuple):
  """groups_on_one_machine's nodes (a distinct DCT half and colour value, node_key) in rank order:
  their DCT halves, blocks halves (their best file's), colour values and sizes as arrays, their
  priorities (their best file's), and their files' sha256s node by node from ``starts``, each
  node's in (priority, sha256) order; and the near-uniform hashes left out."""
  hashes: np.ndarray
  blocks: np.ndarray
  colours: np.ndarray
  priorities: List[int]
  sizes: np.ndarray
  starts: np.ndarray
  shas: List[str]
  uniform_hashes: int
  uniform_images: int

  @classmethod
  def of(cls, files: List[Tuple[str, str, int, str]], same_hash_cap: int) -> '_Nodes':
    """The nodes of ``files`` (each sha256 once), those of more than ``same_hash_cap`` files left out."""
    dct = _hex_values([phash[:16] for _, phash, _, _ in files])
    blocks = _hex_values([blocks_half(phash) for _, phash, _, _ in files])
    colours = _colour_values([colour for _, _, _, colour in files])
    priorities = np.array([rank for _, _, rank, _ in files], dtype=np.int64)
    order = np.lexsort((priorities, colours, dct))  # node by node, each's files best first
    order = _ties_by_sha(order, (dct, colours, priorities), [sha for sha, _, _, _ in files])
    dct, colours = dct[order], colours[order]
    first = np.flatnonzero(np.concatenate(([True], (dct[1:] != dct[:-1]) | (colours[1:] != colours[:-1]))))
    sizes = np.diff(np.append(first, len(order)))
    uniform = sizes > same_hash_cap
    left_out = int(sizes[uniform].sum())
    first, sizes = first[~uniform], sizes[~uniform]
    best = order[first]
    ranked = np.lexsort((colours[first], dct[first], priorities[best]))  # rank_key's order
    first, sizes, best = first[ranked], sizes[ranked], best[ranked]
    return cls(dct[first], blocks[best], colours[first], priorities[best].tolist(), sizes, first,
               [files[index][0] for index in order.tolist()], int(uniform.sum()), left_out)

  def best_sha(self, node: int) -> str:
    return self.shas[self.starts[node]]

  def shas_of(self, node: int) -> List[str]:
    start = int(self.starts[node])
    return self.shas[start:start + int(self.sizes[node])]


def _ties_by_sha(order: np.ndarray, keys: Tuple[np.ndarray, ...], shas: List[str]) -> np.ndarray:
  """``order`` with each run of files equal in every one of ``keys`` put in sha256 order: files of one
  node and one priority, which are few, so they are sorted here rather than every sha256 in numpy."""
  tied = np.ones(len(order) - 1, bool) if len(order) else np.zeros(0, bool)
  for key in keys:
    ordered = key[order]
    tied &= ordered[1:] == ordered[:-1]
  if not tied.any():
    return order
  order = order.copy()
  starts = np.flatnonzero(tied & ~np.concatenate(([False], tied[:-1])))
  ends = np.flatnonzero(tied & ~np.concatenate((tied[1:], [False]))) + 2
  for start, end in zip(starts.tolist(), ends.tolist()):
    order[start:end] = sorted(order[start:end].tolist(), key=shas.__getitem__)
  return order


def _hex_values(texts: List[str]) -> np.ndarray:
  """Hex texts of 16 digits as uint64 (parse's bits), decoded at once where every one has 16
  digits (a catalog's from before blocks halves, or a test's, may have fewer)."""
  if set(map(len, texts)) == {16}:
    return np.frombuffer(bytes.fromhex(''.join(texts)), '>u8').astype(np.uint64)
  return np.array([parse(text) for text in texts], dtype=np.int64).view(np.uint64)


def _colour_values(colours: List[str]) -> np.ndarray:
  """colour_value of each colour signature, as int64, decoded at once where each is 16 digits or missing."""
  filled = [colour or '0' * 16 for colour in colours]
  if set(map(len, filled)) == {16}:
    return np.frombuffer(bytes.fromhex(''.join(filled)), '<i8').astype(np.int64)
  return np.array([colour_value(colour) for colour in colours], dtype=np.int64)


def _add(counts: Dict[str, int], **more: int) -> None:
  for name, value in more.items():
    counts[name] = counts.get(name, 0) + value


class Anchors(NamedTuple):
  """anchors' result: each hash's anchor (an index into the hashes, in rank order), and how many
  hashes' comparisons were cut short (their anchor may be a worse one than the best)."""
  anchor: np.ndarray
  cut_short: int


def anchors(hashes: np.ndarray, distance: int, asking: Optional[np.ndarray] = None,
            colours: Optional[np.ndarray] = None, blocks: Optional[np.ndarray] = None, fixed: int = 0) -> Anchors:
  """Each of ``hashes``'s anchor, the hashes given in rank order (uint64): the smallest index of
  a hash near it (its ``blocks`` within ``distance`` bits, the hashes within DCT_MARGIN more)
  whose colours are not apart from its own, its own if none.

  Args:
    hashes: the nodes' hashes (DCT halves), in rank order (uint64).
    distance: the most bits a node's blocks half may differ in from its anchor's.
    asking: whether each node's anchor is wanted; the others' may be worse than their best. None: every one's.
    colours: the nodes' colour signatures (parse_colours); None: colours are not compared.
    blocks: the nodes' blocks halves (uint64), which are searched; None: the hashes are, within ``distance``.
    fixed: bits on which only hashes that agree are compared (a band key's, whose members may come from several
      of its values: the pigeonhole splits the other bits).
  """
  best = np.arange(len(hashes), dtype=np.int64)
  cut = np.zeros(len(hashes), bool)
  asking = np.ones(len(hashes), bool) if asking is None else asking
  near = _Near(distance, colours, None if colours is None else featureless(hashes), None if blocks is None else hashes)
  _anchored(hashes if blocks is None else blocks, best, cut, near, np.arange(len(hashes), dtype=np.int64), asking,
            fixed, ALL_BITS & ~fixed)
  return Anchors(best, int((cut & asking).sum()))


class _Near(NamedTuple):
  """When two nodes are near: their searched hashes within ``distance`` bits, their
  ``confirming`` hashes (the DCT halves, by index; None: not compared) within DCT_MARGIN more,
  and their ``colours`` (by index; None: not compared) not apart; ``featureless`` says which are
  featureless images'."""
  distance: int
  colours: Optional[np.ndarray]
  featureless: Optional[np.ndarray] = None
  confirming: Optional[np.ndarray] = None

  @property
  def checked(self) -> bool:
    """Whether a pair whose searched hashes are near is asked whether it is apart."""
    return self.colours is not None or self.confirming is not None

  def apart(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Whether the nodes at ``left`` and at ``right`` (indices into the hashes) are apart after
    all; asked only of pairs whose searched hashes are near, the few, so that a comparison of
    hashes costs what it did without these checks."""
    apart = np.zeros(len(left), bool)
    if self.confirming is not None:
      apart = popcount(self.confirming[left] ^ self.confirming[right]) > self.distance + DCT_MARGIN
    if self.colours is not None:
      close = np.flatnonzero(~apart)  # colours asked only of the pairs the DCT halves left near
      left, right = left[close], right[close]
      apart[close] = colours_apart(self.colours[left], self.colours[right],
                                   self.featureless[left] & self.featureless[right])
    return apart


def _anchored(hashes: np.ndarray, best: np.ndarray, cut: np.ndarray, near: _Near, members: np.ndarray,
              asking: np.ndarray, fixed: int = 0, free: int = ALL_BITS, runs: Optional[np.ndarray] = None) -> None:
  """anchors' work on ``members``, for the ``asking`` ones among them: for each of the d+1 parts
  of the ``free`` bits, the members sorted by their value on the fixed bits and the part's,
  stably, so in rank order within a value.

  A run of at most _SHORT, or a sparse one of at most _OFFSETS, compares each member with every
  one before it (_offsets), where one member in _ASKING or more is asking. Otherwise each asking
  member compares the run from its start, a step at a time (_compared): _FIRST_STEPS first,
  which tells a dense run (most askers settled: a cluster of look-alikes) from a sparse one;
  then up to _OFFSETS steps in all in a run of at most _OFFSETS or one that cannot be split
  again, _STRAGGLER_STEPS more in a long dense run, none in a long sparse one. Those still
  comparing go on in their run split again by the pigeonhole over the bits outside the part.
  A run that did not halve when split (a cluster, by ``runs``) is not split again, and its
  askers still comparing after their steps are cut short.

  Args:
    hashes: every hash compared, in rank order (uint64).
    best: each hash's anchor so far, an index into ``hashes`` (its own at first), lowered as close hashes that
      rank before it are found (changed).
    cut: whether each hash's comparison was cut short (changed).
    near: when two nodes are near (the distance d, and their colours).
    members: the hashes compared here, as indices into ``hashes``; those that agree on the ``fixed`` bits come
      in rank order.
    asking: for each member, whether its anchor is wanted.
    fixed: the bits each member agrees on with the rest of its run one level up; 0 at the first level.
    free: the bits left to split into parts.
    runs: the length of each member's run one level up; None at the first level.
  """
  for piece in dealt(free, near.distance + 1):
    mask = fixed | piece
    by_value = _stable_order(hashes[members], mask)
    ordered, asks = members[by_value], asking[by_value]
    values = hashes[ordered] & np.uint64(mask)
    starts = np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1])))
    lengths = np.diff(np.concatenate((starts, [len(values)])))
    run = np.repeat(np.arange(len(starts)), lengths)
    start, length = starts[run], lengths[run]
    end = start + length
    thin = np.ones(len(ordered), bool) if runs is None else length * 2 <= runs[by_value]
    asked = np.flatnonzero(asks & (length > 1))
    askers = np.bincount(run[asked], minlength=len(starts))
    probed = asked[length[asked] > _SHORT]
    still, position = _compared(hashes[ordered[probed]], ordered[probed], best, hashes[ordered], ordered, near,
                                start[probed], end[probed], _FIRST_STEPS)
    # Dense: most of the run's askers found their anchor, or their own place, in the first steps.
    dense = (np.bincount(run[probed[still]], minlength=len(starts)) * 2
             <= np.bincount(run[probed], minlength=len(starts)))
    # Offsets compare every member of a run with every one before it: worth it where the run is
    # not dense and a good share of it is asking; a few askers compare step by step instead.
    by_offsets = ((lengths <= _SHORT) | ~dense & (lengths <= _OFFSETS)) & (askers * _ASKING >= lengths)
    _offsets(hashes, best, near, ordered, length, np.flatnonzero(by_offsets[run] & (length > 1)))
    going = np.concatenate((probed[still], asked[length[asked] <= _SHORT]))
    position = np.concatenate((position, start[asked[length[asked] <= _SHORT]]))
    on = ~by_offsets[run[going]]
    going, position = going[on], position[on]
    rest = free & ~piece
    splits = thin & (bin(rest).count('1') > near.distance)  # a run split again must thin; d+1 parts need d+1 bits
    steps = np.where((length[going] <= _OFFSETS) | ~splits[going], _OFFSETS,
                     np.where(dense[run[going]], _STRAGGLER_STEPS, 0))
    more, _ = _compared(hashes[ordered[going]], ordered[going], best, hashes[ordered], ordered, near,
                        position, end[going], steps)
    left = going[more]
    cut[ordered[left[~splits[left]]]] = True
    left = left[splits[left]]
    if left.size:
      inner = _runs(start[left], end[left])
      on = np.zeros(len(ordered), bool)
      on[left] = True
      _anchored(hashes, best, cut, near, ordered[inner], on[inner], mask, rest, length[inner])


def _stable_order(values: np.ndarray, mask: int) -> np.ndarray:
  """The order of ``values`` by their bits under ``mask``, ties kept in their order: the bits
  gathered into a small number, then sorted 16 bits at a time, least significant first (numpy
  sorts 16-bit keys stably by radix, in linear time, where a 64-bit key takes a merge sort)."""
  packed = np.zeros(len(values), np.uint64)
  for place, bit in enumerate(bit for bit in range(BITS) if mask >> bit & 1):
    packed |= ((values >> np.uint64(bit)) & np.uint64(1)) << np.uint64(place)
  order = np.arange(len(values))
  for shift in range(0, bin(mask).count('1'), 16):
    digits = ((packed[order] >> np.uint64(shift)) & np.uint64(0xFFFF)).astype(np.uint16)
    order = order[np.argsort(digits, kind='stable')]
  return order


def _offsets(hashes: np.ndarray, best: np.ndarray, near: _Near, ordered: np.ndarray, length: np.ndarray,
             positions: np.ndarray) -> None:
  """The members at ``positions`` of ``ordered`` (whole runs, ``length`` long), each compared
  with every one before it in its run, which ranks first: a close one lowers its best. An offset
  at a time over every run at once, in contiguous numpy calls; the runs no longer than the offset
  are dropped at each power of two. Neighbours from two runs are compared too, and a close pair
  of them lowers both ends' best (either may rank first): asking whether two hashes share a run
  would cost more than it saves.

  Args:
    hashes: every hash compared, in rank order (uint64).
    best: each hash's anchor so far, an index into ``hashes`` (changed).
    near: when two nodes are near.
    ordered: the members, as indices into ``hashes``, in runs of one value, each in rank order.
    length: the length of each member's run, by its place in ``ordered``.
    positions: the places in ``ordered`` of the members to compare: whole runs, in order.
  """
  members, lengths = ordered[positions], length[positions]
  values = hashes[members]
  offset, longest = 1, int(lengths.max(initial=0))
  hits: List[Tuple[np.ndarray, np.ndarray]] = []
  pending = 0
  while offset < longest:
    hit = np.flatnonzero(popcount(values[offset:] ^ values[:-offset]) <= near.distance)
    if hit.size:
      hits.append((members[hit + offset], members[hit]))
      pending += hit.size
    offset += 1
    if offset & (offset - 1) == 0:  # a power of two: keep only the runs longer than the offset
      keep = lengths > offset
      members, lengths, values = members[keep], lengths[keep], values[keep]
    if pending >= _BLOCK or offset >= longest:
      _lowered(best, near, hits)
      hits, pending = [], 0


def _lowered(best: np.ndarray, near: _Near, hits: List[Tuple[np.ndarray, np.ndarray]]) -> None:
  """_offsets' close pairs (later, earlier index arrays), asked at once whether they are apart
  (one numpy call per block of pairs, not per offset), lowering both ends' best (changed)."""
  if not hits:
    return
  later, earlier = np.concatenate([pair[0] for pair in hits]), np.concatenate([pair[1] for pair in hits])
  if near.checked:
    kept = ~near.apart(later, earlier)
    later, earlier = later[kept], earlier[kept]
  np.minimum.at(best, later, earlier)
  np.minimum.at(best, earlier, later)


def _compared(queries: np.ndarray, slots: np.ndarray, best: np.ndarray, candidates: np.ndarray, ranks: np.ndarray,
              near: _Near, start: np.ndarray, end: np.ndarray, steps: Union[int, np.ndarray]
              ) -> Tuple[np.ndarray, np.ndarray]:
  """Each query compared with the candidates from its start on, in order, until one is ``near``
  (its rank lowers the query's best, ``best[slot]``), one ranks at or after its
  best, or its run's end comes, for at most its ``steps`` comparisons. All queries at once, a
  block of candidates each at a time: one while many are comparing, wider as they thin out, so
  that a long tail of few costs few numpy calls. Returns the indices of the queries whose steps
  ran out first, in order, and where each would go on.

  Args:
    queries: the hashes comparing (uint64).
    slots: each query's own index into ``best``.
    best: each hash's anchor so far, as a rank (changed).
    candidates: the hashes compared with, runs side by side (uint64).
    ranks: each candidate's rank, its index into ``best``, rising within a run.
    near: when a query and a candidate are near.
    start: each query's first place in ``candidates``.
    end: the end of each query's run in ``candidates``.
    steps: the most comparisons a query makes: one number for all, or one each.
  """
  stop = np.minimum(end, start + steps)
  active = np.flatnonzero(start < stop)
  position = start[active]
  out, at = [np.flatnonzero((start < end) & (start >= stop))], [start[(start < end) & (start >= stop)]]
  while active.size:
    width = max(1, min(_WIDEST, _BLOCK // active.size))
    places = position[:, None] + np.arange(width)
    valid = places < stop[active, None]
    places = np.minimum(places, len(candidates) - 1)
    rank, slot = ranks[places], slots[active]
    better = rank < best[slot, None]
    close = valid & better & (popcount(queries[active, None] ^ candidates[places]) <= near.distance)
    if near.checked and close.any():
      where = np.nonzero(close)
      close[where] = ~near.apart(slot[where[0]], rank[where])
    hit = close.any(axis=1)
    best[slot[hit]] = rank[hit, np.argmax(close[hit], axis=1)]
    reached = (valid & ~better).any(axis=1)  # its own place, or a hash after its best
    covered = position + width >= stop[active]
    spent = ~hit & ~reached & covered & (stop[active] < end[active])
    out.append(active[spent])
    at.append(stop[active[spent]])
    on = ~hit & ~reached & ~covered
    active, position = active[on], position[on] + width
  out, at = np.concatenate(out), np.concatenate(at)
  order = np.argsort(out)
  return out[order], at[order]


def _runs(start: np.ndarray, end: np.ndarray) -> np.ndarray:
  """The positions of the distinct runs [start, end), in order."""
  start, first = np.unique(start, return_index=True)
  lengths = end[first] - start
  return np.repeat(start - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths) + np.arange(lengths.sum())


def key_anchors(members: Iterable[np.ndarray], distance: int, free: int = ALL_BITS,
                key_cap: int = KEY_CAP) -> Iterator[object]:
  """One key's anchors, from its ``members``: ((phash, colour), (priority, anchor's phash,
  anchor's colour)) for each member whose anchor in the key is another node, and ((anchor's phash,
  anchor's colour), None) once for each such anchor; then, where any, ('over_cap_hashes', count)
  of members not held that found no held anchor and ('cut_short_hashes', count) of members whose
  comparison was cut short. A member's anchor is the first held member near it: its blocks half
  within ``distance``, its DCT half within DCT_MARGIN more, its colours not apart
  (colours_apart).

  The ``key_cap`` best-ranked members are held and compared among themselves; every other
  member, a block at a time, only with them: if it finds one, that is its best in the key
  anyway, and in a cluster of look-alikes it does. Memory stays within twice the cap and a block.

  Args:
    members: the key's nodes as arrays of member rows (member_rows), a batch's each; may be iterated twice.
    distance: the most bits a member's blocks half may differ in from its anchor's.
    free: the bits on which the key's hashes may still differ (free_bits).
    key_cap: how many of the best-ranked members are held.
  """
  held = _best_ranked(members, key_cap)
  if len(held) < key_cap and len(held) <= _FEW:
    few = [tuple(row) for row in held.tolist()]
    anchoring = set()
    for member in few:
      anchor = next(other for other in few if _near_pair(member, other, distance))
      if anchor is not member:
        anchoring.add((anchor[0], anchor[2]))
        yield (member[0], member[2]), (anchor[1], anchor[0], anchor[2])
    yield from ((anchor, None) for anchor in sorted(anchoring))
    return
  hashes, colours, blocks = _searched(held)
  fixed = ALL_BITS & ~free
  found = anchors(hashes, distance, colours=colours, blocks=blocks, fixed=fixed)
  anchoring = np.zeros(len(held), bool)
  yield from _told(held, held, found.anchor, np.arange(len(held)), anchoring)
  over_cap, cut_short = 0, found.cut_short
  if len(held) == key_cap:
    for block in _later_blocks(members, held[-1]):
      more_hashes, more_colours, more_blocks = _searched(block)
      found = anchors(np.concatenate([hashes, more_hashes]), distance,
                      np.arange(len(held) + len(block)) >= len(held),
                      np.concatenate([colours, more_colours]), np.concatenate([blocks, more_blocks]), fixed)
      anchor = found.anchor[len(held):]
      over_cap += int((anchor >= len(held)).sum())
      cut_short += found.cut_short
      yield from _told(block, held, np.where(anchor < len(held), anchor, -1), np.full(len(block), -1), anchoring)
  yield from (((int(held[index, 0]), int(held[index, 2])), None) for index in np.flatnonzero(anchoring).tolist())
  if over_cap:
    yield 'over_cap_hashes', over_cap
  if cut_short:
    yield 'cut_short_hashes', cut_short


_KEY_BLOCK = 4096  # the members past a key's cap compared with the held ones at once
_FEW = 16  # a key of at most this many compares in plain Python: numpy's calls would cost more
# A key member's row (member_rows): its DCT half, priority, colour signature and blocks half.
_PHASH, _PRIORITY, _COLOUR, _BLOCKS_HALF = range(4)


def member_rows(members: Iterable[Tuple[int, int, int, int]]) -> np.ndarray:
  """Key members, each (phash, priority, colour, blocks) as signed 64-bit ints (parse,
  colour_value, parse_blocks), as the rows of one (n, 4) int64 array: how a key's members
  cross a shuffle (as its bytes, a batch's at a time) and key_anchors takes them, since a tuple
  per member costs Beam's coder and Python more than the comparison."""
  return np.array(list(members), dtype=np.int64).reshape(-1, 4)


def keyed_rows(rows: np.ndarray, masks: Sequence[int], prefix: Tuple[int, ...] = ()
               ) -> Iterator[Tuple[Tuple[int, ...], np.ndarray]]:
  """Member rows under each key their blocks halves give, ((*prefix, mask's index, value), rows):
  the first-level keys with the bands as ``masks`` (band_keys), the second-level ones with a dense
  key's sub-bands and the key as ``prefix`` (sub_band_keys)."""
  blocks = np.ascontiguousarray(rows[:, _BLOCKS_HALF]).view(np.uint64)
  for index, mask in enumerate(masks):
    # The mask's bits shifted down: a small int (a mask spans a band and at most the band it skips).
    values = (blocks & np.uint64(mask)) >> np.uint64(max((mask & -mask).bit_length() - 1, 0))
    order = np.argsort(values, kind='stable')
    ordered = values[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    for start, end in zip(starts.tolist(), [*starts[1:].tolist(), len(order)]):
      yield (*prefix, index, int(ordered[start])), rows[order[start:end]]


def _rank_order(rows: np.ndarray) -> np.ndarray:
  """The rows' indices in rank order (rank_key: priority, the DCT half as unsigned, colour)."""
  return np.lexsort((rows[:, _COLOUR], rows[:, _PHASH].view(np.uint64), rows[:, _PRIORITY]))


def _best_ranked(members: Iterable[np.ndarray], count: int) -> np.ndarray:
  """The ``count`` best-ranked of the member rows, in rank order, holding at most twice that and a batch."""
  best, pending, size = np.empty((0, 4), np.int64), [], 0
  for rows in members:
    pending.append(rows)
    size += len(rows)
    if size > 2 * count:
      best = np.concatenate([best, *pending])
      best, pending, size = best[_rank_order(best)[:count]], [], count
  best = np.concatenate([best, *pending])
  return best[_rank_order(best)[:count]]


def _later_blocks(members: Iterable[np.ndarray], last: np.ndarray) -> Iterator[np.ndarray]:
  """The member rows that rank after ``last``, in blocks of about _KEY_BLOCK, each in rank order."""
  priority, phash, colour = int(last[_PRIORITY]), np.uint64(int(last[_PHASH]) & ALL_BITS), int(last[_COLOUR])
  pending, size = [], 0
  for rows in itertools.chain(members, [None]):
    if rows is not None:
      hashes = rows[:, _PHASH].view(np.uint64)
      later = ((rows[:, _PRIORITY] > priority) | (rows[:, _PRIORITY] == priority) & (
          (hashes > phash) | (hashes == phash) & (rows[:, _COLOUR] > colour)))
      pending.append(rows[later])
      size += int(later.sum())
    if size >= _KEY_BLOCK or rows is None and size:
      block = np.concatenate(pending)
      yield block[_rank_order(block)]
      pending, size = [], 0


def _searched(rows: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
  """What anchors compares of member rows: their DCT halves (uint64), colours (parse_colours) and blocks halves."""
  return (np.ascontiguousarray(rows[:, _PHASH]).view(np.uint64), parse_colours(rows[:, _COLOUR]),
          np.ascontiguousarray(rows[:, _BLOCKS_HALF]).view(np.uint64))


def _near_pair(member: Tuple[int, int, int, int], other: Tuple[int, int, int, int], distance: int) -> bool:
  """Whether two key members are near, as anchors' _Near tells, in plain Python for a key of at most _FEW."""
  return (within(distance_between(member[3], other[3]), distance_between(member[0], other[0]), distance)
          and not colours_apart(*parse_colours([member[2], other[2]]),
                                _featureless(member[0]) and _featureless(other[0])))


def within(blocks_bits: int, dct_bits: int, distance: int) -> bool:
  """Whether two hashes whose blocks halves differ in ``blocks_bits`` and DCT halves in ``dct_bits``
  are near at ``distance``: the blocks within it, the DCT within DCT_MARGIN more (anchors asks the
  same of arrays, the blocks by the search and the DCT in _Near.apart)."""
  return blocks_bits <= distance and dct_bits <= distance + DCT_MARGIN


def _told(members: np.ndarray, held: np.ndarray, anchor: np.ndarray, own: np.ndarray, anchoring: np.ndarray
          ) -> Iterator[Tuple[Tuple[int, int], Tuple[int, int, int]]]:
  """((phash, colour), (priority, anchor's phash, anchor's colour)) of each member whose anchor
  is another node; marks each such anchor in ``anchoring``.

  Args:
    members: the rows (member_rows) of the members told of.
    held: the key's held members' rows, which ``anchor`` and ``own`` index.
    anchor: each member's anchor, an index into ``held``; -1: none.
    own: each member's own index into ``held``; -1 for one not held.
    anchoring: for each held member, whether it anchors another (changed).
  """
  told = np.flatnonzero((anchor >= 0) & (anchor != own))
  anchoring[anchor[told]] = True
  for member, (phash, anchor_priority, colour, _) in zip(members[told].tolist(), held[anchor[told]].tolist()):
    yield (member[_PHASH], member[_COLOUR]), (anchor_priority, phash, colour)


def parse(phash: str) -> int:
  """A perceptual hash's DCT half (its first 16 hex digits) as a signed 64-bit int (two's
  complement), which Beam's integer coder takes as a key."""
  value = int(phash[:16], 16)
  return value - (1 << BITS) if value >> (BITS - 1) else value


def parse_blocks(phash: str) -> int:
  """A perceptual hash's blocks half (blocks_half) as parse gives its DCT half."""
  return parse(blocks_half(phash))


def blocks_half(phash: str) -> str:
  """A perceptual hash's last 16 hex digits; a hash of 16 digits (a catalog's from before blocks,
  a test's) is its own blocks half, so that it is searched as it was."""
  return phash[16:] or phash


@functools.lru_cache(maxsize=None)
def parts(free: int, pieces: int) -> Tuple[int, ...]:
  """The set bits of ``free`` split into ``pieces`` masks of consecutive set bits, as even as
  can be (the first ones a bit wider): the keys' bands. Pigeonhole: hashes that differ in fewer
  than ``pieces`` of these bits agree exactly on at least one mask."""
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
  """The set bits of ``free`` dealt in turn into ``pieces`` masks: anchors' parts. Any
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


def band_keys(phash: int, distance: int) -> List[Tuple[int, int]]:
  """A hash's first-level keys, (band index, band value): keyed_rows' for its blocks half alone."""
  return [key for key, _ in keyed_rows(_blocks_row(phash), bands(distance))]


def sub_band_keys(phash: int, distance: int, key: Tuple[int, int]) -> List[Tuple[int, int, int, int]]:
  """A hash's second-level keys under a dense first-level ``key``: keyed_rows' for its blocks half alone."""
  return [sub for sub, _ in keyed_rows(_blocks_row(phash), sub_bands(distance, key[0]), key)]


def _blocks_row(phash: int) -> np.ndarray:
  """One member row holding only a blocks half, given signed (parse) or not."""
  row = np.zeros((1, 4), np.int64)
  row[0, _BLOCKS_HALF] = np.array([phash & ALL_BITS], np.uint64).view(np.int64)[0]
  return row


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
