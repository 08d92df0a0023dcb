"""Near-copy files and nodes a slot at a time, as arrays: the nodes, files kept and group members
are those near_copies makes file by file and node by node."""
import random

import numpy as np

from beam_pipeline.core.planning import near_copies, near_copy_nodes


def _files(count: int, seed: int):
  """``count`` files on about count/3 hashes and colour signatures, as (sha256, phash, priority, colour);
  a sha256 ending in a zero byte among them, as numpy's bytes would drop it."""
  rng = random.Random(seed)
  hashes = [f'{rng.getrandbits(128):032x}' for _ in range(count // 3)]
  colours = ['', '0' * 16, '3c283c283c283c28', 'e0c0e0c0e0c0e0c0']
  files = [(f'{rng.getrandbits(256):064x}', rng.choice(hashes), rng.randrange(10**6), rng.choice(colours))
           for _ in range(count)]
  return files + [('ab' * 31 + '00', hashes[0], 5, '')]


def test_a_node_slot_is_the_same_from_an_int_and_from_an_array():
  rng = random.Random(1)
  phashes = [rng.getrandbits(64) - (1 << 63) for _ in range(5000)]
  colours = [rng.getrandbits(64) - (1 << 63) for _ in range(5000)]
  for slots in (256, 1024):
    found = near_copy_nodes.node_slots(np.array(phashes, np.int64), np.array(colours, np.int64), slots)
    assert found.tolist() == [near_copy_nodes.node_slot(p, c, slots) for p, c in zip(phashes, colours)]
    assert 0 <= found.min() and found.max() < slots and len(set(found.tolist())) > slots // 2


def test_slots_keep_a_slot_within_its_share_of_the_images():
  assert near_copy_nodes.slots_for(0) == near_copy_nodes.slots_for(3_200_000) == 16
  assert near_copy_nodes.slots_for(3_200_001) == 32 and near_copy_nodes.slots_for(10**9) == 8192


def test_each_hash_and_colour_its_files_share_is_one_node_or_near_uniform():
  """Expected: one node per (DCT half, colour) its files share, its best file the smallest (priority,
  sha256, blocks half), the files of a node of several listed best first, and a hash of more
  files than the cap counted as near-uniform; whichever slot and order the files come in."""
  files = _files(600, 2)
  files += [(f'{i:064x}', 'f' * 32, i, '') for i in range(9)]  # nine files of one hash, over a cap of 8
  of_node = {}
  for sha, phash, priority, colour in files:
    of_node.setdefault(near_copies.node_key(phash, colour), []).append(
        (priority, sha, near_copies.parse_blocks(phash)))
  expected, several = set(), set()
  for (phash, colour), shared in of_node.items():
    shared.sort()
    if len(shared) <= 8:
      expected.add((near_copies.parse(phash), shared[0][0], shared[0][1], len(shared), colour, shared[0][2]))
      if len(shared) > 1:
        several.add(((near_copies.parse(phash), colour), tuple(sha for _, sha, _ in shared)))
  table = near_copy_nodes.file_table(random.Random(3).sample(files, len(files)))
  found, listed, uniform_hashes, uniform_images = set(), set(), 0, 0
  for _, rows in near_copy_nodes.by_slot(table, 256):
    nodes = near_copy_nodes.nodes_of(rows, same_hash_cap=8)
    found |= {(phash, priority, sha.ljust(32, b'\0').hex(), count, colour, blocks)
              for phash, priority, colour, blocks, sha, count in nodes.nodes.tolist()}
    listed |= set(nodes.several)
    uniform_hashes += nodes.uniform_hashes
    uniform_images += nodes.uniform_images
  assert found == expected and listed == several and (uniform_hashes, uniform_images) == (1, 9)
  assert any(node[2].endswith('00') for node in found)


def test_a_file_given_twice_keeps_its_smallest_hash_as_the_texts_compare():
  """A file validated twice may hash differently: the smallest (phash, priority, colour) as
  texts is kept, as a combiner of the tuples would keep."""
  files = _files(300, 4)
  twice = [(sha, f'{(int(phash, 16) ^ 1 << 70):032x}', priority + 1, 'ff00000000000001')
           for sha, phash, priority, _ in files[::5]]
  expected = {}
  for sha, phash, priority, colour in files + twice:
    expected[sha] = min(expected.get(sha, (phash, priority, colour)), (phash, priority, colour))
  table = near_copy_nodes.file_table(files + twice)
  slots = list(near_copy_nodes.by_file_slot(table, 16))
  assert len(slots) > 8 and sum(len(rows) for _, rows in slots) == len(table)
  shas_by_slot = [set(rows['sha'].tolist()) for _, rows in slots]
  assert len(set().union(*shas_by_slot)) == sum(map(len, shas_by_slot))  # each file's copies in one slot
  kept = np.concatenate([near_copy_nodes.smallest_per_file(rows) for _, rows in slots])
  assert len(kept) == len(expected)
  assert sorted(kept.tolist()) == sorted(near_copy_nodes.file_table(
      [(sha, phash, priority, colour) for sha, (phash, priority, colour) in expected.items()]).tolist())


def test_each_node_goes_to_the_best_anchor_its_keys_told_of():
  """Expected: a node told of two anchors goes to the better-ranked; a node that anchors another,
  or has several files, goes under its own hash; a node of one file no key spoke of goes nowhere."""
  table = near_copy_nodes.file_table([
      ('a' * 64, '1' * 32, 10, ''), ('b' * 64, '2' * 32, 20, ''), ('c' * 64, '3' * 32, 30, ''),
      ('d' * 64, '4' * 32, 40, ''), ('e' * 64, '4' * 32, 41, ''), ('f' * 64, '5' * 32, 50, '')])
  nodes = near_copy_nodes.nodes_of(table).nodes
  one, two, three, four = (near_copies.parse(digit * 16) for digit in '1234')
  told = [((three, 0), (20, two, 0)), ((three, 0), (10, one, 0)), ((one, 0), None), ((two, 0), None)]
  assert sorted(near_copy_nodes.best_anchors(nodes, told)) == sorted([
      ((one, 0), (10, 'a' * 64, one, 1, 0)), ((two, 0), (20, 'b' * 64, two, 1, 0)),
      ((one, 0), (30, 'c' * 64, three, 1, 0)), ((four, 0), (40, 'd' * 64, four, 2, 0))])
