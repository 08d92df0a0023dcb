"""The near-copy index: an update that queries only its changed nodes in the band files ends with
the anchors that grouping every node again (near_copies.anchors) finds, change after change."""
import random
from typing import Dict, List, Tuple

import numpy as np
import pytest

from beam_pipeline.core.planning import near_copies, near_copy_nodes, near_index



def _picture(rng: random.Random) -> Tuple[int, int]:
  """A picture's (DCT half, blocks half): random bits, or a featureless image's (DC bit set)."""
  dct = rng.getrandbits(64)
  if rng.random() < 0.05:
    dct |= 1 << 63
  else:
    dct &= ~(1 << 63)
  return dct, rng.getrandbits(64)


def _copy(rng: random.Random, picture: Tuple[int, int], bits: int) -> Tuple[int, int]:
  """A near copy of a picture: ``bits`` of each half flipped (the DC bit kept)."""
  dct, blocks = picture
  for bit in rng.sample(range(63), bits):
    dct ^= 1 << bit
  for bit in rng.sample(range(64), bits):
    blocks ^= 1 << bit
  return dct, blocks


_COLOURS = ['', '0' * 16, '3c283c283c283c28', 'e0c0e0c0e0c0e0c0', '2020202020202020']


class _Collection:
  """Files as the grouping takes them: (sha256, phash, priority, colour), pictures with near
  copies at several distances, copies sharing a node (same hashes and colour), clusters of
  look-alikes."""

  def __init__(self, seed: int):
    self.rng = random.Random(seed)
    self.pictures: List[Tuple[Tuple[int, int], str]] = []
    self.files: Dict[str, Tuple[str, int, str]] = {}

  def add(self, count: int) -> List[str]:
    rng, added = self.rng, []
    for _ in range(count):
      roll = rng.random()
      if self.pictures and roll < 0.5:
        picture, colour = rng.choice(self.pictures)
        if roll < 0.1:
          hashes = picture  # another file of the same node
        else:
          hashes = _copy(rng, picture, rng.choice([1, 2, 3, 4, 5, 7, 9]))
          colour = rng.choice([colour, colour, rng.choice(_COLOURS)])
      else:
        hashes, colour = _picture(rng), rng.choice(_COLOURS)
        self.pictures.append((hashes, colour))
      sha = f'{rng.getrandbits(256):064x}'
      if rng.random() < 0.02:
        sha = sha[:62] + '00'  # numpy's bytes drop a trailing zero byte
      self.files[sha] = (f'{hashes[0]:016x}{hashes[1]:016x}', rng.choice([5, 10, 10, 20, 30]) * 1000 +
                         rng.randrange(3), colour)
      added.append(sha)
    return added

  def cluster(self, count: int) -> None:
    """``count`` look-alikes of one new picture, each a bit or two from it (frames of a fixed camera)."""
    picture = _picture(self.rng)
    for _ in range(count):
      hashes = _copy(self.rng, picture, self.rng.choice([1, 2]))
      self.files[f'{self.rng.getrandbits(256):064x}'] = (f'{hashes[0]:016x}{hashes[1]:016x}',
                                                          self.rng.randrange(10**6), '')

  def drop(self, count: int) -> np.ndarray:
    """The FILE_KEY strings of ``count`` files dropped."""
    dropped = self.rng.sample(sorted(self.files), min(count, len(self.files)))
    keys = self.keys(dropped)
    for sha in dropped:
      del self.files[sha]
    return keys

  def table(self, shas=None) -> np.ndarray:
    shas = sorted(self.files) if shas is None else shas
    return near_copy_nodes.file_table([(sha, *self.files[sha]) for sha in shas])

  def keys(self, shas=None) -> np.ndarray:
    return near_index.file_keys_of(self.table(shas))


def _grouped(table: np.ndarray, same_hash_cap: int, distance: int) -> Tuple[Dict[bytes, bytes], set]:
  """Every node's anchor as grouping them all finds it, by rank: (anchors of those that have
  another, the ranks of those that anchor others)."""
  found = near_copy_nodes.nodes_of(table, same_hash_cap).nodes
  ranks = near_index.ranks(found['priority'], found['phash'], found['colour'])
  order = np.argsort(ranks)
  found, ranks = found[order], ranks[order]
  result = near_copies.anchors(found['phash'].view(np.uint64), distance,
                               colours=near_copies.parse_colours(found['colour']),
                               blocks=found['blocks'].view(np.uint64))
  assert result.cut_short == 0
  rank_bytes = [bytes(rank).ljust(24, b'\0') for rank in ranks.tolist()]
  anchors = {rank_bytes[i]: rank_bytes[a] for i, a in enumerate(result.anchor.tolist()) if a != i}
  return anchors, set(anchors.values())


def _finals(anchors: Dict[bytes, bytes]) -> np.ndarray:
  """FOUND rows of anchors by rank."""
  out = np.zeros(len(anchors), near_index.FOUND)
  out['rank'], out['anchor'] = list(anchors), list(anchors.values())
  return out


def _index_anchors(index: near_index.Built) -> Dict[bytes, bytes]:
  found = {}
  for slot in index.slots:
    nodes = near_index.nodes(slot.files)
    for rank, anchor in zip(nodes.rank.tolist(), slot.anchors.tolist()):
      rank, anchor = rank.ljust(24, b'\0'), anchor.ljust(24, b'\0')
      if rank != anchor:
        found[rank] = anchor
  return found


def _band_anchors(index: near_index.Built) -> Dict[bytes, set]:
  """Each node's anchors as its band rows hold them: one per node, the same in every band."""
  found: Dict[bytes, set] = {}
  for files in index.bands:
    for rows in files:
      for rank, anchor in zip(near_index.row_ranks(rows).tolist(), rows['anchor'].tolist()):
        found.setdefault(rank.ljust(24, b'\0'), set()).add(anchor.ljust(24, b'\0'))
  return found


def _updated(index: near_index.Built, dropped: np.ndarray, added: np.ndarray, distance: int, count: int,
             same_hash_cap: int) -> near_index.Built:
  """The index after files ``dropped`` went and ``added`` came, as an update's steps find it, each
  step given only what crosses its shuffle to it."""
  def by_slot(keys):
    slots = near_index.node_slots(near_index.file_nodes(keys), count)
    return {slot: keys[slots == slot] for slot in range(count)}

  bands = near_index.Bands(distance, count)

  def sent(changed):
    out: Dict[Tuple[int, int], List[np.ndarray]] = {}
    for band in range(distance + 1):
      for file, rows in bands.by_query_file(changed, band):
        out.setdefault((band, file), []).append(rows)
    return {key: np.concatenate(value) for key, value in out.items()}

  dropped_by, added_by = by_slot(dropped), by_slot(added)
  changes = [near_index.changed_slot(index.slots[slot], dropped_by[slot], added_by[slot], same_hash_cap)
             for slot in range(count)]
  removed = np.concatenate([change.removed for change in changes])
  joined = np.concatenate([change.added for change in changes])
  gone_at, joined_at = sent(removed), sent(joined)
  found, orphans = [near_index.own(joined)], []
  now = {}
  for band in range(distance + 1):
    for file in range(count):
      gone, new = gone_at.get((band, file), removed[:0]), joined_at.get((band, file), joined[:0])
      now[band, file] = bands.rows_now(index.bands[band][file], gone, new, bands.file_slot(band, file))
      result = near_index.queried(now[band, file], new, gone['rank'][gone['anchors']], band, distance)
      found.append(result.found)
      orphans.append(result.orphans)
  orphans = np.unique(np.concatenate(orphans))
  found.append(near_index.own(orphans, stale=True))
  for (band, file), asked in sent(orphans).items():
    found.append(near_index.queried(now[band, file], np.unique(asked), removed['rank'][:0], band, distance,
                                    forward=False).found)
  finals = near_index.best(np.concatenate(found))
  taken = near_index.nodes_of(finals['anchor'][finals['anchor'] != finals['rank']])
  taken_slots = near_index.node_slots(taken, count)
  final_slots = near_index.node_slots(near_index.nodes_of(finals['rank']), count)
  slots = [near_index.slot_with_anchors(change.slot, finals[final_slots == slot], taken[taken_slots == slot])
           for slot, change in enumerate(changes)]
  patches = near_index.patches(finals)  # the band files were written with the new nodes anchoring themselves
  bands_after = [[bands.with_anchors(now[band, file], patches, band) for file in range(count)]
                 for band in range(distance + 1)]
  return near_index.Built(slots, bands_after)


@pytest.mark.parametrize('seed,distance,count,look_alikes,most_pairs', [
    (1, 8, 1, 0, None), (2, 8, 4, 0, None), (3, 8, 16, 300, None), (4, 14, 64, 0, None), (5, 8, 4, 300, 0)])
def test_an_update_through_the_index_finds_the_anchors_of_grouping_everything_again(seed, distance, count,
                                                                                   look_alikes, most_pairs,
                                                                                   monkeypatch):
  """Expected: after each of several updates (files added: new pictures, near copies, more files
  of a node; files dropped: anchors among them), every node's anchor in the node files and in
  every band row is what near_copies.anchors finds over the whole collection; the flags of the
  nodes that anchor others include every one that does. At distance 14 a band has 16 values, so
  each value's rows are spread over four files of the 64. A cluster of look-alikes loses its best
  images, whose members then take others. With no pair compared one by one (most_pairs 0), each
  band value's nodes are compared as the grouping of every node compares them, with the same
  anchors."""
  if most_pairs is not None:
    monkeypatch.setattr(near_index, '_MOST_PAIRS', most_pairs)
  cap = 3
  collection = _Collection(seed)
  collection.add(600)
  collection.cluster(look_alikes)
  anchors, anchoring = _grouped(collection.table(), cap, distance)
  index = near_index.built(collection.keys(), _finals(anchors), near_index.nodes_of(np.array(sorted(anchoring), 'S24')),
                           distance, count, cap)
  assert _index_anchors(index) == anchors
  for round_ in range(5):
    dropped = collection.drop([5, 40, 0, 150, 20][round_])
    added = collection.keys(collection.add([60, 30, 100, 0, 200][round_]))
    index = _updated(index, dropped, added, distance, count, cap)
    anchors, anchoring = _grouped(collection.table(), cap, distance)
    assert _index_anchors(index) == anchors
    for rank, found in _band_anchors(index).items():
      assert found == {anchors.get(rank, rank)}
    flagged = {bytes(rank).ljust(24, b'\0') for slot in index.slots
               for rank, flag in zip(near_index.nodes(slot.files).rank.tolist(), slot.anchoring.tolist()) if flag}
    assert anchoring <= flagged
    assert len(anchors) > 20


def test_a_node_file_round_trips_and_a_damaged_one_is_refused():
  collection = _Collection(7)
  collection.add(200)
  index = near_index.built(collection.keys(), _finals({}), np.empty(0, 'S16'), 8, 2)
  for slot in index.slots:
    back = near_index.NodeSlot.decoded(slot.encoded())
    assert back.files.tolist() == slot.files.tolist() and back.anchors.tolist() == slot.anchors.tolist()
    with pytest.raises(ValueError):
      near_index.NodeSlot.decoded(slot.encoded()[:-1])


@pytest.mark.parametrize('seed', [3, 4])
def test_a_grouping_on_one_machine_tells_the_anchors_that_the_index_is_built_from(seed):
  """near_copies.groups_on_one_machine's nodes and anchors, as FOUND rows (near_index.told_by):
  each node anchored to another, and no other, as grouping the file table's nodes by rank finds
  them (near copies, files sharing a node, featureless hashes, a cluster of look-alikes), their
  blocks halves their best file's; so an update on one machine builds the index Dataflow's
  grouping builds."""
  collection = _Collection(seed)
  collection.add(600)
  collection.cluster(12)
  table = collection.table()
  files = [(sha, *collection.files[sha]) for sha in sorted(collection.files)]
  found = near_copies.groups_on_one_machine(reversed(files), 8, same_hash_cap=4)
  told = near_index.told_by(found.ranked)
  anchors, _ = _grouped(table, 4, 8)
  assert len(anchors) > 20
  assert {bytes(rank).ljust(24, b'\0'): bytes(anchor).ljust(24, b'\0')
          for rank, anchor in zip(told['rank'].tolist(), told['anchor'].tolist())} == anchors
  nodes = near_copy_nodes.nodes_of(table, 4).nodes
  blocks = dict(zip(near_index.ranks(nodes['priority'], nodes['phash'], nodes['colour']).tolist(),
                    nodes['blocks'].view(np.uint64).tolist()))
  assert told['blocks'].tolist() == [blocks[rank] for rank in told['rank'].tolist()]
