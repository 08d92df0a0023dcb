import collections
import random

import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest

from beam_pipeline.core.planning import near_copies
from helpers.near_hashes import brute_force, flip, sha

D = 4


def near_groups(pairs, distance=D, key_cap=near_copies.KEY_CAP, group_cap=near_copies.GROUP_CAP,
                rounds=near_copies.ROUNDS, same_hash_cap=near_copies.SAME_HASH_CAP):
  """The Beam transform's steps as plain calls: {sha256: representative} and its counters."""
  counts = collections.Counter()
  contents = {}
  for content, phash in pairs:
    contents[content] = min(contents.get(content, phash), phash)
  by_hash = collections.defaultdict(list)
  for content, phash in contents.items():
    by_hash[phash].append(content)
  nodes, shas = [], {}
  for phash, files in by_hash.items():
    node = near_copies.node_or_uniform(phash, len(files), sorted(files), same_hash_cap)
    if node is None:
      counts['uniform_hashes'] += 1
    else:
      nodes.append(node)
      shas[node.phash] = sorted(files)
  first = collections.defaultdict(list)
  for node in nodes:
    for key in near_copies.band_keys(node.phash, distance):
      first[key].append(node.phash)
  keys = collections.defaultdict(list)
  for key, members in first.items():
    counts['dense_keys'] += len(members) > key_cap
    for phash in members:
      for sub in (near_copies.sub_band_keys(phash, distance, key) if len(members) > key_cap else [key]):
        keys[sub].append(phash)
  told = collections.defaultdict(list)
  for key, members in keys.items():
    for out in near_copies.compare_key(members, distance, near_copies.free_bits(key, distance), key_cap, group_cap):
      if isinstance(out, int):
        counts['over_cap_hashes'] += out
      else:
        for phash, message in near_copies.links(out):
          told[phash].append(message)
  states = {node.phash: near_copies.first_state(node, told[node.phash]) for node in nodes if node.phash in told}
  for _ in range(rounds):
    messages = collections.defaultdict(list)
    for node, state in states.items():
      for to, message in near_copies.offers(node, state):
        messages[to].append(message)
    counts['unsettled_edges'] = 0
    for node, received in messages.items():
      states[node], unsettled = near_copies.relabel(received)
      counts['unsettled_edges'] += unsettled
  by_label = collections.defaultdict(list)
  for node, state in states.items():
    by_label[state.label].append(node)
  representative = {}
  for label, members in by_label.items():
    if near_copies.is_capped(label) or len(members) > group_cap:
      counts['capped_groups'] += 1
      continue
    for node in members:
      representative.update((content, label) for content in shas[node])
  for node in nodes:
    if node.count > 1 and shas[node.phash][0] not in representative:
      representative.update((content, node.sha256) for content in shas[node.phash])
  return representative, counts


def as_hex(value: int) -> str:
  return f'{value:016x}'


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(st.integers(0, near_copies.ALL_BITS), st.integers(1, 10), st.data())
def test_any_pair_within_d_shares_a_band_key_and_under_it_a_sub_band_key(value, distance, data):
  bits = data.draw(st.sets(st.integers(0, 63), max_size=distance))
  other = flip(value, bits)
  shared = set(near_copies.band_keys(value, distance)) & set(near_copies.band_keys(other, distance))
  assert shared
  for key in shared:
    assert set(near_copies.sub_band_keys(value, distance, key)) & set(near_copies.sub_band_keys(other, distance, key))
    free = near_copies.free_bits(key, distance)
    assert (value ^ other) & ~free == 0


def test_parts_cover_the_free_bits_once_and_evenly():
  for distance in range(0, 12):
    masks = near_copies.bands(distance)
    assert sum(masks) == near_copies.ALL_BITS and len(masks) == distance + 1
    assert max(bin(m).count('1') for m in masks) - min(bin(m).count('1') for m in masks) <= 1
    for band in range(distance + 1):
      assert sum(near_copies.sub_bands(distance, band)) == near_copies.ALL_BITS & ~masks[band]


def test_popcount_both_ways():
  values = np.array([0, 1, near_copies.ALL_BITS, 0xF0F0, 1 << 63], dtype=np.uint64)
  expected = [0, 1, 64, 8, 1]
  assert near_copies.popcount(values).tolist() == expected
  assert near_copies.table_popcount(values).tolist() == expected
  assert near_copies.table_popcount(values.reshape(1, 5)).tolist() == [expected]


def test_close_pairs_split_in_memory_finds_every_pair():
  """3,000 random hashes, 300 of them near another: past _ALL_PAIRS, so split twice."""
  rng = random.Random(1)
  values = [rng.getrandbits(64) for _ in range(2700)]
  values += [flip(values[i], rng.sample(range(64), rng.randint(0, D))) for i in range(300)]
  hashes = np.array(values, dtype=np.uint64)
  found = {(int(i), int(j)) for a, b in near_copies.close_pairs(hashes, D) for i, j in zip(a, b)}
  expected = {(i, j) for i in range(len(values)) for j in range(i + 1, len(values))
              if near_copies.distance_between(values[i], values[j]) <= D}
  assert found == expected and len(expected) >= 300


def _found_by_one_sub_part_only(value: int, distance: int, rng: random.Random) -> int:
  """A hash ``distance`` bits from ``value`` that shares exactly one of close_pairs's parts with
  it and, outside that part, exactly one of the second pigeonhole's sub-parts: a pair that only
  the one sort by both finds."""
  parts = near_copies.dealt(near_copies.ALL_BITS, distance + 1)
  shared = rng.randrange(len(parts))
  subs = near_copies.dealt(near_copies.ALL_BITS & ~parts[shared], distance + 1)
  others = [part for index, part in enumerate(parts) if index != shared]
  while True:
    clean = rng.randrange(len(subs))
    chosen = rng.sample([sub for index, sub in enumerate(subs) if index != clean], len(others))
    cells = [part & sub for part, sub in zip(others, chosen)]
    if all(cells):
      bits = [rng.choice([bit for bit in range(64) if cell >> bit & 1]) for cell in cells]
      return flip(value, bits)


def test_close_pairs_split_again_past_a_long_run_finds_every_pair(monkeypatch):
  """Runs of a part's value over _LONG_RUN split again, by a second pigeonhole over the other
  bits, as millions of hashes in one process are: 300 pairs each found by one sort alone."""
  monkeypatch.setattr(near_copies, '_LONG_RUN', 8)  # parts of 6 bits: runs of about 47
  distance, rng = 10, random.Random(2)
  values = [rng.getrandbits(64) for _ in range(2700)]
  values += [_found_by_one_sub_part_only(values[i], distance, rng) for i in range(300)]
  hashes = np.array(values, dtype=np.uint64)
  found = {(int(i), int(j)) for a, b in near_copies.close_pairs(hashes, distance) for i, j in zip(a, b)}
  expected = {(i, j) for i in range(len(values)) for j in range(i + 1, len(values))
              if near_copies.distance_between(values[i], values[j]) <= distance}
  assert found == expected and len(expected) >= 300


def test_a_group_of_three_takes_its_smallest_sha():
  """a-b and b-c within D, a-c not: one group, its representative the smallest of the three."""
  a = 0x0123456789ABCDEF
  b, c = flip(a, [0, 1, 2, 3]), flip(a, [0, 1, 2, 3, 20, 30, 40, 50])
  pairs = [(sha('a'), as_hex(a)), (sha('b'), as_hex(b)), (sha('c'), as_hex(c)), (sha('other'), as_hex(~a & 0xFFFF))]
  representative, counts = near_groups(pairs)
  smallest = min(sha('a'), sha('b'), sha('c'))
  assert representative == {sha(name): smallest for name in 'abc'}
  assert representative == brute_force(pairs, D)
  assert counts['unsettled_edges'] == 0


def test_files_sharing_a_hash_group_and_a_near_uniform_hash_does_not():
  """Two files of one hash are a group alone; 1,001 of another are near-uniform frames."""
  pairs = [(sha(1), 'aaaaaaaaaaaaaaaa'), (sha(2), 'aaaaaaaaaaaaaaaa'), (sha(2), 'aaaaaaaaaaaaaaaa')]
  pairs += [(sha(f'black{i}'), '0000000000000000') for i in range(near_copies.SAME_HASH_CAP + 1)]
  pairs += [(sha('dark'), '0000000000000001')]
  representative, counts = near_groups(pairs)
  assert representative == {sha(1): min(sha(1), sha(2)), sha(2): min(sha(1), sha(2))}
  assert counts['uniform_hashes'] == 1
  assert near_copies.node_or_uniform('00000000000000ff', 3, [sha(1), sha(2), sha(3)], cap=2) is None


def chain(length: int, distance: int = D):
  """Hashes each within ``distance`` of the one before and of no other: each step flips one new
  bit in every band but one (another each time), so neighbours share exactly one band."""
  masks = near_copies.bands(distance)
  positions = [[bit for bit in range(64) if mask >> bit & 1] for mask in masks]
  values = [0]
  for step in range(length - 1):
    bits = [positions[band][step % len(positions[band])] for band in range(distance + 1) if band != step % (distance + 1)]
    values.append(flip(values[-1], bits))
  return values


def test_a_chain_longer_than_the_rounds_is_reported_unsettled():
  values = chain(12)
  assert all(near_copies.distance_between(a, b) == D for a, b in zip(values, values[1:]))
  assert all(near_copies.distance_between(a, c) > D for a, c in zip(values, values[2:]))
  pairs = [(sha(i), as_hex(value)) for i, value in enumerate(values)]
  representative, counts = near_groups(pairs, rounds=3)
  assert counts['unsettled_edges'] > 0
  assert len(set(representative.values())) > 1
  representative, counts = near_groups(pairs, rounds=12)
  assert counts['unsettled_edges'] == 0
  assert representative == brute_force(pairs, D)


def test_a_component_over_the_group_cap_is_counted_not_grouped():
  values = chain(12)
  pairs = [(sha(i), as_hex(value)) for i, value in enumerate(values)]
  pairs += [(sha('x'), 'ffffffffffffffff'), (sha('y'), 'fffffffffffffffe')]
  representative, counts = near_groups(pairs, rounds=12, group_cap=5)
  assert counts['capped_groups'] == 1
  assert representative == {sha('x'): min(sha('x'), sha('y')), sha('y'): min(sha('x'), sha('y'))}


def test_a_key_cap_far_below_the_input_finds_every_pair_of_a_sparse_input():
  """4,400 hashes at distance 10, every tenth with a near copy, and a cap of 30: the first-level
  keys (5- and 6-bit bands, about 90 hashes a key) are over it, so split again, and none of the
  sub-band keys is still over it."""
  rng = random.Random(2)
  values = [rng.getrandbits(64) for _ in range(4000)]
  values += [flip(values[i], rng.sample(range(64), rng.randint(1, 10))) for i in range(0, 4000, 10)]
  pairs = [(sha(i), as_hex(value)) for i, value in enumerate(values)]
  representative, counts = near_groups(pairs, distance=10, key_cap=30)
  assert counts['dense_keys'] > 0 and counts['over_cap_hashes'] == 0
  assert representative == brute_force(pairs, distance=10)
  assert len(representative) > 2 * 300


def test_a_dense_input_over_the_cap_reports_the_hashes_it_did_not_hold():
  """600 distinct hashes within 2 bits of one value, a cap of 100: the sub-band keys are still
  over it, and what they did not hold is counted; the cluster is one capped group."""
  rng = random.Random(3)
  base = rng.getrandbits(64)
  values = sorted({flip(base, rng.sample(range(64), 2)) for _ in range(2000)})[:600]
  pairs = [(sha(i), as_hex(value)) for i, value in enumerate(values)]
  representative, counts = near_groups(pairs, key_cap=100, group_cap=1000)
  assert counts['over_cap_hashes'] > 0
  assert counts['unsettled_edges'] == 0 and counts['capped_groups'] == 0
  assert set(representative.values()) == {min(sha(i) for i in range(600))}
  representative, counts = near_groups(pairs, key_cap=100, group_cap=50)
  assert counts['capped_groups'] >= 1 and representative == {}


@pytest.mark.parametrize('images, distance', [(20_000, 10), (100_000, 10), (1_000_000, 8), (3_000_000, 8),
                                              (100_000_000, 6)])
def test_the_distance_shrinks_as_the_input_grows_so_chance_groups_at_most_one_image_in_a_thousand(images, distance):
  assert near_copies.distance_for(images, 10) == distance
  assert near_copies.chance_share(images, distance) <= near_copies.MAX_CHANCE_SHARE
  if distance < 10:
    assert near_copies.chance_share(images, distance + 2) > near_copies.MAX_CHANCE_SHARE


def test_on_one_machine_the_groups_are_those_every_pair_compared_gives():
  """What the DirectRunner runs: 2,000 random hashes, one in ten with a near copy, a group of
  three, two files of one hash, a file listed twice, and a hash of six files over a same-hash
  cap of 5 (counted, not grouped); a cluster over the group cap is counted, not grouped."""
  rng = random.Random(8)
  values = [rng.getrandbits(64) for _ in range(2000)]
  values += [flip(values[i], rng.sample(range(64), rng.randint(1, 10))) for i in range(0, 2000, 10)]
  values += [flip(values[1], range(0, 60, 6)), flip(values[1], range(1, 61, 6))]
  files = [(sha(i), f'{value:016x}') for i, value in enumerate(values)]
  files += [(sha('same'), files[7][1]), (sha(3), files[3][1])]
  files += [(sha(f'black{i}'), '0000000000000000') for i in range(6)]
  base = rng.getrandbits(64)
  files += [(sha(f'cluster{i}'), f'{flip(base, [i % 64, (i * 7 + 1) % 64]):016x}') for i in range(40)]
  pairs, counts = near_copies.groups_on_one_machine(files, 10, same_hash_cap=5, group_cap=30)
  black = {sha(f'black{i}') for i in range(6)}
  expected = brute_force([file for file in files if file[0] not in black], 10)
  clustered = {name for name in expected if expected[name] in {expected[sha(f'cluster{i}')] for i in range(40)}}
  assert len(clustered) > 30
  expected = {name: rep for name, rep in expected.items() if name not in clustered}
  assert dict(pairs) == expected and len(pairs) == len(expected) > 400
  assert counts == {'groups': len(set(expected.values())), 'images_in_groups': len(expected), 'uniform_hashes': 1,
                    'uniform_images': 6, 'capped_groups': 1}
