"""The near-copy index an --incremental output keeps (issue 57), so that an update meets its new
perceptual hashes with the dataset's by querying them, where grouping every catalogued hash
again cost most of an update at scale.

It keeps what the last run's grouping found (near_copies: a node's anchor is the first node in
rank order near it), in two kinds of files, both binary numpy rows read without parsing:

* node files (NodeSlot), one per node slot (a share of the nodes by a hash of their key): every
  distinct file of every node, sorted by node and then best first, and each node's anchor;
* band files, (d+1) x count of them: every node that is grouped (not near-uniform) once per band
  of its blocks half (near_copies.bands), under that band's value, with its blocks half and
  anchor (BAND_ROWS), sorted by (band value, rank). A band value's rows are spread over several
  files (Bands' sub-files) where the values are fewer than the files.

Why it is exact: two near nodes agree on a band's value (the pigeonhole), so every node near a
changed node is among the rows of one of its band values. A kept node's anchor changes only
where its anchor left the dataset (the node is an orphan and is queried again in each band) or
where a new node near it ranks before its anchor (found where that new node is queried); every
other kept node keeps the anchor it had. So an update compares only its changed nodes with the
rows of their band values, and writes again only the files its changes reach. Where a band
value's rows and queries make too many pairs to compare one by one, they are compared as the
grouping of every node compares a band key (near_copies.anchors), bounded whatever the data;
and an index whose files would outgrow MOST_ROWS is not kept.

Ranks and node keys are bytes whose order is rank order (ranks: priority, DCT half, colour,
each big-endian with signed fields' sign bits flipped), so numpy sorts and searches them as
strings; a node's key is its rank's last 16 bytes.
"""
from typing import Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from beam_pipeline.core.planning import near_copies, near_copy_nodes

RANK, NODE, FILE_KEY = np.dtype('S24'), np.dtype('S16'), np.dtype('S64')
RANK_BYTES, NODE_BYTES, FILE_BYTES = 24, 16, 64
# A node of a band file: its key (band value, 8 bytes big-endian, then its rank), its blocks
# half and its anchor's rank (its own where it has none).
BAND_ROWS = np.dtype([('key', 'S32'), ('blocks', '<u8'), ('anchor', 'S24')])
# A node changed in the bands: its rank and blocks half, and whether it may anchor others (one that
# left: only such a node leaves orphans).
CHANGED = np.dtype([('rank', 'S24'), ('blocks', '<u8'), ('anchors', '?')])
# What a query found: a node (its rank and blocks half), an anchor that may be its, and whether
# its band rows hold another anchor where that anchor is itself (an orphan's, not a new node's).
FOUND = np.dtype([('rank', 'S24'), ('blocks', '<u8'), ('anchor', 'S24'), ('stale', '?')])
_SIGN = np.uint64(1 << 63)
_MIX = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing's multiplier, as near_copy_nodes'
_MIX_COLOUR = np.uint64(0xC2B2AE3D27D4EB4F)
_LOW = np.uint64(0xFFFFFFFF)
_HEADER = 16  # a node file's counts: its files and its nodes, 8 bytes each
# The most entries a file of a kept index holds (16 MB of band rows): where a file would hold
# more (a collection of look-alikes puts most nodes under a few band values; a near-uniform hash
# of millions of files), the index is not kept, and updates group every node as the first did.
MOST_ROWS = 250_000
# How many pairs queries compare at once (queried): 4M of uint64, 32 MB; past _MOST_PAIRS for one
# band value, its nodes are compared as the grouping of every node compares them (_anchored_run).
_PAIRS = 1 << 22
_MOST_PAIRS = 1 << 25


def _columns(data: np.ndarray, width: int) -> np.ndarray:
  """Fixed-width byte strings as an (n, width) uint8 array (a copy)."""
  return np.frombuffer(np.ascontiguousarray(data).tobytes(), np.uint8).reshape(-1, width)


def _words(data: np.ndarray, width: int, first: int, count: int) -> np.ndarray:
  """Big-endian 8-byte words of fixed-width byte strings, as uint64 (n, count).

  Args:
    data: the strings.
    width: their width in bytes.
    first: the byte the first word starts at.
    count: how many words.
  """
  return np.ascontiguousarray(_columns(data, width)[:, first:first + 8 * count]).view('>u8').astype(np.uint64)


def sorted_rows(rows: np.ndarray) -> np.ndarray:
  """BAND_ROWS sorted by their keys: by an argsort of the keys alone, several times faster than
  numpy's sort of the records by a field."""
  return rows[np.argsort(rows['key'])]


def _strings(words: Sequence[np.ndarray], dtype: np.dtype) -> np.ndarray:
  """Columns of uint64 words as one big-endian byte string each."""
  out = np.empty((len(words[0]), len(words)), '>u8')
  for index, column in enumerate(words):
    out[:, index] = column
  return out.view(np.uint8).reshape(len(out), -1).copy().view(dtype).ravel() if len(out) else np.empty(0, dtype)


def _concat(parts: Sequence[np.ndarray], dtype: np.dtype) -> np.ndarray:
  """Byte strings joined: a row of one fixed-width string per row of each part."""
  if not len(parts[0]):
    return np.empty(0, dtype)
  return np.concatenate([_columns(part, part.dtype.itemsize) for part in parts], axis=1).copy().view(dtype).ravel()


def ranks(priority: np.ndarray, dct: np.ndarray, colour: np.ndarray) -> np.ndarray:
  """Nodes' ranks (near_copies.rank_key: priority, DCT half unsigned, colour) as RANK strings,
  from int64 arrays (the DCT half signed, as near_copies.parse gives it)."""
  return _strings([priority.astype(np.int64).view(np.uint64) ^ _SIGN, dct.astype(np.int64).view(np.uint64),
                   colour.astype(np.int64).view(np.uint64) ^ _SIGN], RANK)


def rank_fields(found: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
  """RANK strings' (priority, DCT half, colour), int64 arrays, the DCT half signed."""
  words = _words(found, RANK_BYTES, 0, 3)
  return ((words[:, 0] ^ _SIGN).view(np.int64), words[:, 1].view(np.int64), (words[:, 2] ^ _SIGN).view(np.int64))


def nodes_of(found: np.ndarray) -> np.ndarray:
  """The node keys (NODE) of RANK strings: their last 16 bytes."""
  return np.ascontiguousarray(_columns(found, RANK_BYTES)[:, 8:]).view(NODE).ravel()


def file_keys(dct: np.ndarray, colour: np.ndarray, priority: np.ndarray, sha: np.ndarray, blocks: np.ndarray
              ) -> np.ndarray:
  """Files as FILE_KEY strings (node key, priority, sha256, blocks half), whose order puts a
  node's files together, best first (near_copy_nodes.nodes_of's order).

  Args:
    dct: the DCT halves of their hashes (signed int64, near_copies.parse).
    colour: their colour signatures (near_copies.colour_value).
    priority: their priorities (near_copies.priority).
    sha: their sha256s' 32 bytes.
    blocks: the blocks halves of their hashes.
  """
  node = _strings([dct.astype(np.int64).view(np.uint64), colour.astype(np.int64).view(np.uint64) ^ _SIGN], NODE)
  rank = _strings([priority.astype(np.int64).view(np.uint64) ^ _SIGN], np.dtype('S8'))
  return _concat([node, rank, sha.astype('S32'), _strings([blocks.astype(np.int64).view(np.uint64)],
                                                          np.dtype('S8'))], FILE_KEY)


def file_keys_of(table: np.ndarray) -> np.ndarray:
  """A table of near_copy_nodes.FILES as FILE_KEY strings."""
  return file_keys(table['phash'], table['colour'], table['priority'], table['sha'], table['blocks'])


def file_nodes(files: np.ndarray) -> np.ndarray:
  """The node keys of FILE_KEY strings: their first 16 bytes."""
  return np.ascontiguousarray(_columns(files, FILE_BYTES)[:, :16]).view(NODE).ravel()


def node_hashes(nodes: np.ndarray) -> np.ndarray:
  """A 64-bit hash of each node key, which places it in a node slot and a band's sub-file."""
  words = _words(nodes, NODE_BYTES, 0, 2)
  return (words[:, 0] ^ words[:, 1] * _MIX_COLOUR) * _MIX


def node_slots(nodes: np.ndarray, count: int) -> np.ndarray:
  """The node slot (of ``count``) of each node key."""
  return ((node_hashes(nodes) >> np.uint64(32)) * np.uint64(count) >> np.uint64(32)).astype(np.int64)


class Nodes(NamedTuple):
  """A node file's nodes, derived from its files: key, rank, blocks half and sha256 of the best
  file, and how many files share the node."""
  node: np.ndarray
  rank: np.ndarray
  blocks: np.ndarray
  sha: np.ndarray
  count: np.ndarray


def nodes(files: np.ndarray) -> Nodes:
  """The nodes of sorted FILE_KEY strings: each node's best file is its first."""
  columns = _columns(files, FILE_BYTES)
  if not len(columns):
    return Nodes(np.empty(0, NODE), np.empty(0, RANK), np.empty(0, np.uint64), np.empty(0, 'S32'),
                 np.empty(0, np.int64))
  node = np.ascontiguousarray(columns[:, :16])
  starts = np.flatnonzero(np.concatenate(([True], (node[1:] != node[:-1]).any(axis=1))))
  best = columns[starts]
  counts = np.diff(np.append(starts, len(columns)))
  rank = np.ascontiguousarray(np.concatenate([best[:, 16:24], best[:, :16]], axis=1)).view(RANK).ravel()
  return Nodes(np.ascontiguousarray(best[:, :16]).view(NODE).ravel(), rank,
               np.ascontiguousarray(best[:, 56:64]).view('>u8').astype(np.uint64).ravel(),
               np.ascontiguousarray(best[:, 24:56]).view('S32').ravel(), counts.astype(np.int64))


class NodeSlot(NamedTuple):
  """One node file: its files (FILE_KEY, sorted), and for each of its nodes (in that order) its
  anchor's rank and whether it may anchor others (set when a node took it as its anchor, cleared
  only when the index is built again: a node that anchors none lists a group of itself alone,
  which holds too few images to count)."""
  files: np.ndarray
  anchors: np.ndarray
  anchoring: np.ndarray

  @classmethod
  def empty(cls) -> 'NodeSlot':
    return cls(np.empty(0, FILE_KEY), np.empty(0, RANK), np.empty(0, bool))

  def encoded(self) -> bytes:
    """The node file's bytes: how many files and nodes, then the files, anchors and flags."""
    counts = np.array([len(self.files), len(self.anchors)], '<u8')
    return b''.join([counts.tobytes(), self.files.tobytes(), self.anchors.tobytes(),
                     self.anchoring.astype(np.uint8).tobytes()])

  @classmethod
  def decoded(cls, data: bytes) -> 'NodeSlot':
    """A node file's bytes back (encoded); ValueError if they are not one."""
    if len(data) < _HEADER:
      raise ValueError('a node file of the near-copy index is cut short')
    num_files, num_nodes = (int(value) for value in np.frombuffer(data[:_HEADER], '<u8'))
    end = _HEADER + num_files * FILE_BYTES + num_nodes * (RANK_BYTES + 1)
    if len(data) != end:
      raise ValueError(f'a node file of the near-copy index holds {len(data):,} bytes, not {end:,}')
    files = np.frombuffer(data, FILE_KEY, num_files, _HEADER)
    anchors = np.frombuffer(data, RANK, num_nodes, _HEADER + num_files * FILE_BYTES)
    anchoring = np.frombuffer(data, np.uint8, num_nodes, end - num_nodes).astype(bool)
    return cls(files, anchors, anchoring)


class SlotChange(NamedTuple):
  """changed_slot's result: the slot with its files changed (the nodes that stayed keep their
  anchors, the others their own), and the nodes that left the bands and those that joined them
  (CHANGED rows): a node whose best file changed does both."""
  slot: NodeSlot
  removed: np.ndarray
  added: np.ndarray


def _in_bands(found: Nodes, anchoring: np.ndarray, same_hash_cap: int) -> np.ndarray:
  """CHANGED rows of the nodes that are grouped (shared by at most ``same_hash_cap`` files), with their flags."""
  kept = found.count <= same_hash_cap
  rows = np.empty(int(kept.sum()), CHANGED)
  rows['rank'], rows['blocks'], rows['anchors'] = found.rank[kept], found.blocks[kept], anchoring[kept]
  return rows


def _changed_rows(rows: np.ndarray) -> np.ndarray:
  """CHANGED rows as strings that compare whole (rank, then blocks half)."""
  return _concat([rows['rank'], _strings([rows['blocks']], np.dtype('S8'))], np.dtype('S32'))


def changed_slot(earlier: NodeSlot, dropped: np.ndarray, added: np.ndarray,
                 same_hash_cap: int = near_copies.SAME_HASH_CAP) -> SlotChange:
  """A node slot after some of its files went and others came, and which nodes left and joined the bands.

  Args:
    earlier: the slot before.
    dropped: the files that went (FILE_KEY strings).
    added: the files that came (FILE_KEY strings); a file is in one of the two at most.
    same_hash_cap: the most files a grouped node may have.
  """
  files = earlier.files
  if len(dropped):
    files = np.delete(files, _positions(files, dropped))
  if len(added):
    added = np.unique(added)
    added = added[~_contains(files, added)]
    files = np.insert(files, np.searchsorted(files, added), added)
  before, after = nodes(earlier.files), nodes(files)
  touched = np.unique(np.concatenate([file_nodes(dropped), file_nodes(added)]))
  was, now = _contains(touched, before.node), _contains(touched, after.node)
  # The nodes no file reached keep their anchors, in order; a touched one that stayed keeps its own
  # unless it is not grouped (a near-uniform node anchors itself).
  anchors, anchoring = after.rank.copy(), np.zeros(len(after.rank), bool)
  anchors[~now], anchoring[~now] = earlier.anchors[~was], earlier.anchoring[~was]
  touched_now = np.flatnonzero(now)
  at = _positions(before.node, after.node[touched_now], every=True)
  stayed = (at >= 0) & (after.count[touched_now] <= same_hash_cap)
  anchors[touched_now[stayed]] = earlier.anchors[at[stayed]]
  anchoring[touched_now[stayed]] = earlier.anchoring[at[stayed]]
  old = _in_bands(Nodes(*(field[was] for field in before)), earlier.anchoring[was], same_hash_cap)
  new = _in_bands(Nodes(*(field[now] for field in after)), np.zeros(int(now.sum()), bool), same_hash_cap)
  old_keys, new_keys = _changed_rows(old), _changed_rows(new)
  return SlotChange(NodeSlot(files, anchors, anchoring), old[~np.isin(old_keys, new_keys)],
                    new[~np.isin(new_keys, old_keys)])


def _contains(ordered: np.ndarray, values: np.ndarray) -> np.ndarray:
  """Whether each of ``values`` is in ``ordered`` (sorted): a binary search each, where np.isin
  would sort both, a cost per row of a file that a change of a few rows should not pay."""
  return _positions(ordered, values, every=True) >= 0


def _positions(ordered: np.ndarray, values: np.ndarray, every: bool = False) -> np.ndarray:
  """The positions of ``values`` in ``ordered`` (sorted): of those found, or (``every``) of each, -1 if not found."""
  if not len(ordered):
    return np.full(len(values), -1, np.int64) if every else np.empty(0, np.int64)
  at = np.minimum(np.searchsorted(ordered, values), len(ordered) - 1)
  found = ordered[at] == values
  return np.where(found, at, -1) if every else at[found]


class Bands(NamedTuple):
  """How an index of the grouping at ``distance`` lays its band files out: ``count`` a band (as
  many as node files). A band of fewer values than files spreads each value's rows over
  sub-files by node, so that no file holds more than its share however few the values."""
  distance: int
  count: int

  def values(self, blocks: np.ndarray, band: int) -> np.ndarray:
    """Each blocks half's value in band ``band`` (near_copies.keyed_rows' values)."""
    mask = near_copies.bands(self.distance)[band]
    return (blocks.astype(np.uint64) & np.uint64(mask)) >> np.uint64((mask & -mask).bit_length() - 1)

  def _first_files(self, changed: np.ndarray, band: int) -> Tuple[np.ndarray, int]:
    """(the first file of each node's band value, how many files each value's rows are spread over)."""
    buckets = min(1 << bin(near_copies.bands(self.distance)[band]).count('1'), self.count)
    subs = self.count // buckets
    return (self.values(changed['blocks'], band) & np.uint64(buckets - 1)).astype(np.int64) * subs, subs

  def files(self, changed: np.ndarray, band: int) -> np.ndarray:
    """The file of the band that holds each node's row (CHANGED or FOUND rows)."""
    first, subs = self._first_files(changed, band)
    return first + (((node_hashes(nodes_of(changed['rank'])) & _LOW) * np.uint64(subs)) >> np.uint64(32)).astype(
        np.int64)

  def by_file(self, changed: np.ndarray, band: int) -> Iterator[Tuple[int, np.ndarray]]:
    """(file, rows) of nodes' rows (CHANGED or FOUND) by the file of the band that holds each."""
    return near_copy_nodes.partitioned(changed, self.files(changed, band))

  def by_query_file(self, changed: np.ndarray, band: int) -> Iterator[Tuple[int, np.ndarray]]:
    """(file, CHANGED rows) of nodes sent to every file of the band that holds rows of their band values."""
    first, subs = self._first_files(changed, band)
    for sub in range(subs):
      yield from near_copy_nodes.partitioned(changed, first + sub)

  def file_slot(self, band: int, file: int) -> int:
    """A band file's slot among all the band files (the run record's, and the steps' keys): band x count + file."""
    return band * self.count + file

  def band_file(self, slot: int) -> Tuple[int, int]:
    """The (band, file) of a band file's slot (file_slot)."""
    return divmod(slot, self.count)

  def by_band_file(self, changed: np.ndarray, query: bool = False) -> Iterator[Tuple[int, np.ndarray]]:
    """(band file slot, rows) of nodes' rows in every band: by the file that holds each (by_file), or,
    to ``query`` them, sent to every file that holds rows of their band values (by_query_file)."""
    for band in range(self.distance + 1):
      for file, rows in (self.by_query_file if query else self.by_file)(changed, band):
        yield self.file_slot(band, file), rows

  def rows(self, changed: np.ndarray, band: int, anchors: Optional[np.ndarray] = None) -> np.ndarray:
    """BAND_ROWS of nodes (CHANGED rows) in band ``band``, sorted; their anchors ``anchors`` (RANK), or their own."""
    rows = np.empty(len(changed), BAND_ROWS)
    rows['key'] = _concat([_strings([self.values(changed['blocks'], band)], np.dtype('S8')), changed['rank']],
                          np.dtype('S32'))
    rows['blocks'] = changed['blocks']
    rows['anchor'] = changed['rank'] if anchors is None else anchors
    return sorted_rows(rows)

  def slot_rows(self, slot: 'NodeSlot', same_hash_cap: int = near_copies.SAME_HASH_CAP
                ) -> Iterator[Tuple[int, int, np.ndarray]]:
    """(band, file, BAND_ROWS) of a node slot's grouped nodes, with their anchors: what it adds to each band file."""
    found = nodes(slot.files)
    grouped = found.count <= same_hash_cap
    changed = _in_bands(found, slot.anchoring, same_hash_cap)
    anchors = slot.anchors[grouped]
    for band in range(self.distance + 1):
      for file, rows in near_copy_nodes.partitioned(np.arange(len(changed)), self.files(changed, band)):
        yield band, file, self.rows(changed[rows], band, anchors[rows])

  def with_anchors(self, rows: np.ndarray, finals: np.ndarray, band: int) -> np.ndarray:
    """A band file's rows with the anchors ``finals`` (FOUND rows, one per node) of the nodes it holds."""
    if not len(finals) or not len(rows):
      return rows
    keyed = self.rows(finals, band, finals['anchor'])
    at = _positions(rows['key'], keyed['key'], every=True)
    rows = rows.copy()
    rows['anchor'][at[at >= 0]] = keyed['anchor'][at >= 0]
    return rows

  def rows_now(self, rows: np.ndarray, gone: np.ndarray, joined: np.ndarray, slot: int) -> np.ndarray:
    """A band file's rows after some nodes left the bands and others joined them.

    Args:
      rows: the file's earlier rows.
      gone: the nodes that left (CHANGED rows sent to it: of the band values it holds), of which it drops its own.
      joined: the nodes that joined, likewise, of which it adds its own.
      slot: the file, as band x count + file.
    """
    band, file = self.band_file(slot)

    def own(changed):
      return self.rows(changed[self.files(changed, band) == file], band)

    return rows_after(rows, own(gone), own(joined))


def row_ranks(rows: np.ndarray) -> np.ndarray:
  """The ranks of BAND_ROWS' nodes."""
  return np.ascontiguousarray(_columns(rows['key'], 32)[:, 8:]).view(RANK).ravel()


def rows_after(rows: np.ndarray, gone: np.ndarray, joined: np.ndarray) -> np.ndarray:
  """A band file's rows (sorted) without those of ``gone`` and with ``joined`` (BAND_ROWS of its own, sorted)."""
  if len(gone):
    rows = np.delete(rows, _positions(rows['key'], gone['key']))
  if len(joined):
    rows = np.insert(rows, np.searchsorted(rows['key'], joined['key']), joined)
  return rows


class _Searched(NamedTuple):
  """What queries compare of nodes: DCT halves, blocks halves, colours, whether featureless."""
  dct: np.ndarray
  blocks: np.ndarray
  colours: np.ndarray
  featureless: np.ndarray

  @classmethod
  def of(cls, found: np.ndarray, blocks: np.ndarray) -> '_Searched':
    """What is compared of nodes of ranks ``found`` (RANK) and blocks halves ``blocks``."""
    _, dct, colour = rank_fields(found)
    dct = dct.view(np.uint64)
    return cls(dct, blocks.astype(np.uint64), near_copies.parse_colours(colour), near_copies.featureless(dct))


class Queried(NamedTuple):
  """queried's result: FOUND rows (a node and an anchor that may be its) and the orphans
  (CHANGED rows: kept nodes whose anchor left the dataset, each to be queried in all its bands)."""
  found: np.ndarray
  orphans: np.ndarray


def queried(rows: np.ndarray, queries: np.ndarray, gone: np.ndarray, band: int, distance: int,
            forward: bool = True) -> Queried:
  """What one band file's rows tell of the nodes ``queries`` (CHANGED rows of the band values it
  holds, its own and its sub-files'): for each, the first row in rank order near it that ranks
  before it; with ``forward``, for each kept row near a query that ranks before the row's anchor,
  the first such query; and the kept rows whose anchor is among ``gone``, the orphans. Its work
  grows with the queries and the rows of their band values, never with the rest of the file.

  Args:
    rows: the file's BAND_ROWS as they are now (rows_after), sorted.
    queries: the nodes compared with the rows of their band values, each once.
    gone: the ranks of the nodes that left the bands and may have anchored others (CHANGED's 'anchors').
    band: the file's band.
    distance: the most bits a node's blocks half may differ in from its anchor's.
    forward: whether the queries are new nodes, which may take kept nodes from their anchors (not orphans).
  """
  layout = Bands(distance, 1)
  fresh = np.zeros(len(rows), bool)  # the queries' own rows, which have no anchor yet
  fresh[_positions(rows['key'], layout.rows(queries, band)['key'])] = True
  orphans = np.empty(0, CHANGED)
  if len(gone):
    lost = np.flatnonzero(_contains(np.sort(gone), rows['anchor']) & ~fresh)
    orphans = np.zeros(len(lost), CHANGED)
    orphans['rank'], orphans['blocks'] = row_ranks(rows[lost]), rows['blocks'][lost]
  if not len(queries) or not len(rows):
    return Queried(np.zeros(0, FOUND), orphans)
  query_values = layout.values(queries['blocks'], band)
  order = np.lexsort((queries['rank'], query_values))
  queries, query_values = queries[order], query_values[order]
  asked = _Searched.of(queries['rank'], queries['blocks'])
  found: List[np.ndarray] = []
  starts = np.flatnonzero(np.concatenate(([True], query_values[1:] != query_values[:-1])))
  for first, last in zip(starts.tolist(), [*starts[1:].tolist(), len(queries)]):
    value = _strings([query_values[first:first + 1]], np.dtype('S8'))[0]
    low = int(np.searchsorted(rows['key'], value.ljust(8, b'\0')))
    high = int(np.searchsorted(rows['key'], value.ljust(8, b'\0') + b'\xff' * RANK_BYTES, 'right'))
    if low == high:
      continue
    if (last - first) * (high - low) > _MOST_PAIRS:  # a value of look-alikes, or a change as large as the dataset
      found.append(_anchored_run(queries[first:last], rows[low:high], fresh[low:high], band, distance, forward))
      continue
    step = max(1, _PAIRS // (high - low))
    for start in range(first, last, step):
      end = min(last, start + step)
      found.extend(_compared(queries[start:end], _Searched(*(field[start:end] for field in asked)),
                             rows[low:high], fresh[low:high], distance, forward))
  return Queried(np.concatenate(found) if found else np.zeros(0, FOUND), orphans)


def _compared(queries: np.ndarray, asked: _Searched, rows: np.ndarray, fresh: np.ndarray, distance: int,
              forward: bool) -> Iterator[np.ndarray]:
  """queried's FOUND rows for queries of one band value against that value's rows. Only the
  blocks halves are compared pair by pair; the few pairs within the distance are checked further,
  their rows' ranks read then.

  Args:
    queries: the queries (CHANGED rows), in rank order.
    asked: what is compared of them.
    rows: the value's BAND_ROWS, in rank order.
    fresh: which rows are the queries' own, which have no anchor yet.
    distance: the grouping's distance.
    forward: whether queries may take kept rows from their anchors.
  """
  left, right = np.nonzero(near_copies.popcount(asked.blocks[:, None] ^ rows['blocks'][None, :]) <= distance)
  pair_ranks = row_ranks(rows[right])
  searched = _Searched.of(pair_ranks, rows['blocks'][right])
  keep = near_copies.popcount(asked.dct[left] ^ searched.dct) <= distance + near_copies.DCT_MARGIN
  keep[keep] = ~near_copies.colours_apart(asked.colours[left[keep]], searched.colours[keep],
                                          asked.featureless[left[keep]] & searched.featureless[keep])
  left, right, pair_ranks = left[keep], right[keep], pair_ranks[keep]  # by query, then by row: in rank order
  before = pair_ranks < queries['rank'][left]
  yield _firsts(left[before], queries['rank'], queries['blocks'], pair_ranks[before])
  if forward:
    taken = ~fresh[right] & (queries['rank'][left] < rows['anchor'][right])
    order = np.lexsort((left[taken], right[taken]))
    kept, by = right[taken][order], left[taken][order]
    kept_ranks = np.empty(len(rows), RANK)
    kept_ranks[right[taken]] = pair_ranks[taken]
    yield _firsts(kept, kept_ranks, rows['blocks'], queries['rank'][by])


def _anchored_run(queries: np.ndarray, rows: np.ndarray, fresh: np.ndarray, band: int, distance: int,
                  forward: bool) -> np.ndarray:
  """queried's FOUND rows for queries of one band value against that value's rows, too many
  pairs to compare one by one: near_copies.anchors over the value's nodes, as the grouping of
  every node compares a band key's (bounded whatever the cluster, and cut short as it is).

  Args:
    queries: the queries (CHANGED rows).
    rows: the value's BAND_ROWS.
    fresh: which rows are the queries' own, which have no anchor yet.
    band: the file's band.
    distance: the grouping's distance.
    forward: whether queries may take kept rows from their anchors.
  """
  kept = np.flatnonzero(~fresh)
  ranks_ = np.concatenate([row_ranks(rows[kept]), queries['rank']])
  order = np.argsort(ranks_)
  ranks_ = ranks_[order]
  blocks = np.concatenate([rows['blocks'][kept], queries['blocks']])[order]
  asked = np.concatenate([np.zeros(len(kept), bool), np.ones(len(queries), bool)])[order]
  stored = np.concatenate([rows['anchor'][kept], queries['rank']])[order]
  _, dct, colour = rank_fields(ranks_)
  anchor = near_copies.anchors(dct.view(np.uint64), distance, colours=near_copies.parse_colours(colour),
                               blocks=blocks, fixed=near_copies.bands(distance)[band]).anchor
  other = anchor != np.arange(len(anchor))
  taken = asked & other
  if forward:  # a kept node whose first near node here is a query that ranks before its anchor
    taken |= ~asked & other & asked[anchor] & (ranks_[anchor] < stored)
  out = np.zeros(int(taken.sum()), FOUND)
  out['rank'], out['blocks'], out['anchor'] = ranks_[taken], blocks[taken], ranks_[anchor[taken]]
  return out


def _firsts(of: np.ndarray, node_ranks: np.ndarray, node_blocks: np.ndarray, anchors: np.ndarray) -> np.ndarray:
  """FOUND rows, one for each run of equal ``of`` (indexes of nodes): the node and the run's first of ``anchors``.

  Args:
    of: the nodes' indexes, each node's together.
    node_ranks: the ranks the indexes index.
    node_blocks: the blocks halves they index.
    anchors: an anchor for each of ``of``, the first of a node's its best.
  """
  first = np.flatnonzero(np.concatenate(([True], of[1:] != of[:-1]))) if len(of) else np.empty(0, np.int64)
  out = np.zeros(len(first), FOUND)
  out['rank'], out['blocks'], out['anchor'] = node_ranks[of[first]], node_blocks[of[first]], anchors[first]
  return out


def told_anchors(table: np.ndarray, best: Mapping[Tuple[int, int], Tuple[int, int, int, int]]) -> np.ndarray:
  """FOUND rows of the nodes (near_copy_nodes.NODES rows) whose keys told of an anchor
  (near_copy_nodes.best_told's), to build the index from a grouping of every node."""
  index = [row for row, key in enumerate(zip(table['phash'].tolist(), table['colour'].tolist())) if key in best]
  told = [best[(int(table['phash'][row]), int(table['colour'][row]))] for row in index]
  out = np.zeros(len(index), FOUND)
  found = table[index]
  out['rank'] = ranks(found['priority'], found['phash'], found['colour'])
  out['blocks'] = found['blocks'].view(np.uint64)
  out['anchor'] = ranks(np.array([anchor[0] for anchor in told], np.int64),
                        np.array([anchor[3] for anchor in told], np.int64),
                        np.array([anchor[2] for anchor in told], np.int64))
  return out


def told_by(ranked: near_copies.Ranked) -> np.ndarray:
  """FOUND rows of the nodes grouped on one machine (near_copies.groups_on_one_machine) whose
  anchor is another: what told_anchors gives of a grouping by keys, to build the index from."""
  other = np.flatnonzero(ranked.anchor != np.arange(len(ranked.anchor)))
  rank = ranks(np.array(ranked.priorities, np.int64), ranked.hashes.view(np.int64), ranked.colours)
  out = np.zeros(len(other), FOUND)
  out['rank'], out['blocks'], out['anchor'] = rank[other], ranked.blocks[other], rank[ranked.anchor[other]]
  return out


def own(changed: np.ndarray, stale: bool = False) -> np.ndarray:
  """FOUND rows that give each node itself as its anchor (a node near none that ranks before it
  anchors itself); ``stale`` where its band rows hold another (an orphan's)."""
  out = np.zeros(len(changed), FOUND)
  out['rank'], out['blocks'], out['anchor'], out['stale'] = changed['rank'], changed['blocks'], changed['rank'], stale
  return out


def best(found: np.ndarray) -> np.ndarray:
  """FOUND rows, one per node: its anchor of the first rank (a stale row first where two give it)."""
  if not len(found):
    return found
  ordered = found[np.lexsort((~found['stale'], found['anchor'], found['rank']))]
  first = np.concatenate(([True], ordered['rank'][1:] != ordered['rank'][:-1]))
  return ordered[first]


def patches(finals: np.ndarray) -> np.ndarray:
  """The final anchors (FOUND rows) that band files must be told of: a new node's rows were
  written with itself as anchor, and every other node's with the anchor it had."""
  return finals[(finals['anchor'] != finals['rank']) | finals['stale']]


def slot_with_anchors(slot: NodeSlot, finals: np.ndarray, anchoring: np.ndarray) -> NodeSlot:
  """A node slot with the anchors ``finals`` (FOUND rows) of its nodes, and the nodes ``anchoring``
  (NODE keys) marked as taken by others."""
  found = nodes(slot.files)
  anchors, flags = slot.anchors.copy(), slot.anchoring.copy()
  at = _positions(found.node, nodes_of(finals['rank']), every=True)
  hit = at >= 0
  hit[hit] = found.rank[at[hit]] == finals['rank'][hit]  # a node whose best file changed since is another
  anchors[at[hit]] = finals['anchor'][hit]
  flags[_positions(found.node, anchoring)] = True
  return NodeSlot(slot.files, anchors, flags)


def members(slot: NodeSlot, same_hash_cap: int = near_copies.SAME_HASH_CAP) -> Iterator[near_copy_nodes.Member]:
  """Each node of a slot that is in a group (near_copy_nodes.best_anchors'): under its anchor
  if that is another node, under its own key if it has several files or may anchor others."""
  found = nodes(slot.files)
  own_anchor = slot.anchors == found.rank
  wanted = (found.count <= same_hash_cap) & (~own_anchor | (found.count > 1) | slot.anchoring)
  index = np.flatnonzero(wanted)
  if not len(index):
    return
  priority, dct, colour = rank_fields(found.rank[index])
  _, anchor_dct, anchor_colour = rank_fields(slot.anchors[index])
  for values in zip(priority.tolist(), found.sha[index].tolist(), dct.tolist(), found.count[index].tolist(),
                    colour.tolist(), anchor_dct.tolist(), anchor_colour.tolist()):
    node_priority, sha, phash, files, node_colour, anchor_phash, anchor_node_colour = values
    yield (anchor_phash, anchor_node_colour), (node_priority, sha.ljust(32, b'\0').hex(), phash, files, node_colour)


def several(slot: NodeSlot, same_hash_cap: int = near_copies.SAME_HASH_CAP
            ) -> Iterator[Tuple[Tuple[int, int], Tuple[str, ...]]]:
  """((DCT half, colour), its files' sha256s, the best first) of each grouped node of several files."""
  found = nodes(slot.files)
  columns = _columns(slot.files, FILE_BYTES)
  node = np.ascontiguousarray(columns[:, :16]).view(NODE).ravel() if len(columns) else np.empty(0, NODE)
  starts = np.searchsorted(node, found.node)
  _, dct, colour = rank_fields(found.rank)
  for index in np.flatnonzero((found.count > 1) & (found.count <= same_hash_cap)).tolist():
    start, count = int(starts[index]), int(found.count[index])
    shas = tuple(bytes(row).hex() for row in columns[start:start + count, 24:56])
    yield (int(dct[index]), int(colour[index])), shas


def uniform(slot: NodeSlot, same_hash_cap: int = near_copies.SAME_HASH_CAP) -> Tuple[int, int]:
  """How many near-uniform hashes (nodes of more than ``same_hash_cap`` files) a slot holds, and their files."""
  counts = nodes(slot.files).count
  over = counts > same_hash_cap
  return int(over.sum()), int(counts[over].sum())


def built_slot(files: np.ndarray, finals: np.ndarray, taken: np.ndarray) -> NodeSlot:
  """A node slot built from its files (FILE_KEY strings, one per file), the anchors a grouping of
  every node found for its nodes (FOUND rows; a node not among them anchors itself) and the keys of
  its nodes that anchor others (NODE)."""
  files = np.unique(files)
  found = nodes(files)
  return slot_with_anchors(NodeSlot(files, found.rank.copy(), np.zeros(len(found.rank), bool)), finals, taken)


def by_node_slot(found: np.ndarray, count: int, field: Optional[str] = 'rank') -> Iterator[Tuple[int, np.ndarray]]:
  """(node slot, rows) of rows whose ``field`` is a node's rank, or of node keys (``field`` None)."""
  return near_copy_nodes.partitioned(found, node_slots(found if field is None else nodes_of(found[field]), count))


class Built(NamedTuple):
  """built's result: the node slots (by slot) and band files (by band, then file), each as rows."""
  slots: List[NodeSlot]
  bands: List[List[np.ndarray]]


def built(files: np.ndarray, finals: np.ndarray, taken: np.ndarray, distance: int, count: int,
          same_hash_cap: int = near_copies.SAME_HASH_CAP) -> Built:
  """The whole index of a dataset in memory (built_slot, Bands.slot_rows), for tests.

  Args:
    files: every file's FILE_KEY string.
    finals: the anchors a grouping of every node found (FOUND rows), for nodes that have one other than themselves.
    taken: the keys of the nodes that anchor others (NODE).
    distance: the distance of the grouping.
    count: how many node files, and files per band.
    same_hash_cap: the most files a grouped node may have.
  """
  files = np.unique(files)
  slots = node_slots(file_nodes(files), count)
  final_slots, taken_slots = node_slots(nodes_of(finals['rank']), count), node_slots(taken, count)
  out_slots, parts = [], [[[] for _ in range(count)] for _ in range(distance + 1)]
  for slot in range(count):
    built_ = built_slot(files[slots == slot], finals[final_slots == slot], taken[taken_slots == slot])
    out_slots.append(built_)
    for band, file, rows in Bands(distance, count).slot_rows(built_, same_hash_cap):
      parts[band][file].append(rows)
  return Built(out_slots, [[sorted_rows(np.concatenate(rows)) if rows else np.empty(0, BAND_ROWS)
                            for rows in files_] for files_ in parts])
