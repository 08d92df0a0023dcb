import collections
import random

import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest

from beam_pipeline.core.planning import near_copies, near_copy_nodes
from helpers.near_hashes import brute_anchors, brute_force, cluster, files_of, flip, sha

D = 4


_Node = collections.namedtuple('_Node', 'phash priority sha256 count colour')


def near_groups(files, distance=D, key_cap=near_copies.KEY_CAP, cap=near_copies.GROUP_CAP,
                same_hash_cap=near_copies.SAME_HASH_CAP):
  """The Beam transform's steps as plain calls: {sha256: representative} and its counters."""
  counts = collections.Counter()
  found = near_copy_nodes.nodes_of(near_copy_nodes.smallest_per_file(near_copy_nodes.file_table(files)),
                                   same_hash_cap)
  counts['uniform_hashes'] += found.uniform_hashes
  several = dict(found.several)
  nodes = [_Node(phash, priority, sha.ljust(32, b'\0').hex(), count, colour)
           for phash, priority, colour, _, sha, count in found.nodes.tolist()]
  shas = {(node.phash, node.colour): list(several.get((node.phash, node.colour), [node.sha256])) for node in nodes}
  rows = near_copy_nodes.member_rows(found.nodes)
  keys = {}
  for key, members in near_copies.keyed_rows(rows, near_copies.bands(distance)):
    counts['dense_keys'] += len(members) > key_cap
    keys.update(near_copies.keyed_rows(members, near_copies.sub_bands(distance, key[0]), key)
                if len(members) > key_cap else [(key, members)])
  best = {}
  for key, members in keys.items():
    for out in near_copies.key_anchors([members], distance, near_copies.free_bits(key, distance), key_cap):
      if isinstance(out[0], str):
        counts[out[0]] += out[1]
      elif out[1] is not None:
        member, (priority, anchor, colour) = out
        found = (priority, anchor & near_copies.ALL_BITS, colour, anchor)
        best[member] = min(best.get(member, found), found)
  groups = collections.defaultdict(list)
  for node in nodes:
    anchor = best.get((node.phash, node.colour))
    groups[(anchor[3], anchor[2]) if anchor else (node.phash, node.colour)].append(node)
  representative = {}
  for members in groups.values():
    images = sum(node.count for node in members)
    if images > cap:
      counts['look_alike_sets'] += 1
      counts['look_alike_images'] += images
    elif images > 1:
      chosen = min((node.priority, node.sha256) for node in members)[1]
      representative.update((content, chosen) for node in members for content in shas[node.phash, node.colour])
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


def test_an_undamaged_larger_less_compressed_image_ranks_first():
  ranked = sorted([(near_copies.priority(True, 4000, 9_000_000), 'damaged'),
                   (near_copies.priority(False, 800, 90_000), 'downscaled'),
                   (near_copies.priority(False, 1000, 60_000), 'recompressed'),
                   (near_copies.priority(False, 1000, 200_000), 'source'),
                   (near_copies.priority(False, 10**9, 10**13), 'past every field')])
  assert [name for _, name in ranked] == ['past every field', 'source', 'recompressed', 'downscaled', 'damaged']
  assert 0 <= near_copies.priority(True, 10**9, 10**13) < 2**63 and near_copies.priority(False, -1, -1) < 2**63


def test_the_anchors_of_random_hashes_and_their_copies_are_the_first_within_d():
  """3,000 random hashes, 300 of them near another: every hash's anchor is the first hash in
  rank order within d of it, as comparing every pair finds."""
  rng = random.Random(1)
  values = [rng.getrandbits(64) for _ in range(2700)]
  values += [flip(values[i], rng.sample(range(64), rng.randint(0, D))) for i in range(300)]
  hashes = np.unique(np.array(values, dtype=np.uint64))
  found = near_copies.anchors(hashes, D)
  assert found.cut_short == 0 and (found.anchor != np.arange(len(hashes))).sum() >= 200
  assert np.array_equal(found.anchor, brute_anchors(hashes, D))


def _found_by_one_sub_part_only(value: int, distance: int, rng: random.Random) -> int:
  """A hash ``distance`` bits from ``value`` that shares exactly one of the first-level parts with
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


def test_long_sparse_runs_are_split_again_and_find_every_anchor(monkeypatch):
  """Runs of a part's value over _OFFSETS split again by a second pigeonhole over the other bits,
  as millions of hashes in one process are: 300 pairs each found by one sort alone."""
  monkeypatch.setattr(near_copies, '_OFFSETS', 8)  # parts of 6 bits: runs of about 47
  distance, rng = 10, random.Random(2)
  values = [rng.getrandbits(64) for _ in range(2700)]
  values += [_found_by_one_sub_part_only(values[i], distance, rng) for i in range(300)]
  hashes = np.array(values, dtype=np.uint64)
  found = near_copies.anchors(hashes, distance)
  assert found.cut_short == 0 and (found.anchor != np.arange(len(hashes))).sum() >= 300
  assert np.array_equal(found.anchor, brute_anchors(hashes, distance))


@pytest.mark.parametrize('kind', ['one camera', 'two scenes 12 bits apart', 'bursts among photos', 'a loose cloud'])
def test_look_alikes_find_the_same_anchors_in_about_one_comparison_each(kind):
  """Sets of look-alikes, where every hash has hundreds or thousands within d and a list of close
  pairs would hold millions: the anchors are those that comparing every pair finds."""
  rng = random.Random(kind)
  if kind == 'one camera':
    values = cluster(20_000, 40, 0.08, rng)
  elif kind == 'two scenes 12 bits apart':
    scene = cluster(8_000, 30, 0.1, rng)
    apart = flip(0, rng.sample(range(64), 12))
    values = scene + [value ^ apart for value in scene]
  elif kind == 'bursts among photos':
    values = [value for _ in range(10) for value in cluster(1_000, 40, 0.08, rng)]
    values += [rng.getrandbits(64) for _ in range(10_000)]
  else:
    values = cluster(20_000, 64, 0.09, rng)
  hashes = np.unique(np.array(values, dtype=np.uint64))
  np.random.default_rng(3).shuffle(hashes)
  pairs = int((near_copies.popcount(hashes[:2000, None] ^ hashes[None, :]) <= 10).sum()) * len(hashes) // 2000
  found = near_copies.anchors(hashes, 10)
  wrong = found.anchor != brute_anchors(hashes, 10)
  assert pairs > 20 * len(hashes)
  assert wrong.sum() <= found.cut_short <= len(hashes) // 100


@hypothesis.settings(max_examples=150, deadline=None)
@hypothesis.given(st.data())
def test_whatever_the_thresholds_an_anchor_is_the_first_within_d_unless_cut_short(data):
  """Random mixtures of scattered hashes and clusters, with every threshold of the comparison
  set small or large, so that each way through it runs: every anchor is within d and ranks at or
  before its hash, and the anchors that differ from the first within d are at most those counted
  as cut short."""
  for name, choices in [('_OFFSETS', [4, 16, 1024]), ('_SHORT', [1, 2, 32]), ('_FIRST_STEPS', [1, 2, 8]),
                        ('_STRAGGLER_STEPS', [1, 4, 32]), ('_WIDEST', [1, 3, 256]), ('_BLOCK', [16, 1 << 16])]:
    setattr(near_copies, name, data.draw(st.sampled_from(choices)))
  rng = random.Random(data.draw(st.integers(0, 2**32)))
  distance = data.draw(st.sampled_from([2, 4, 6, 10]))
  values = []
  for _ in range(rng.randint(1, 4)):
    if rng.random() < 0.4:
      values += [rng.getrandbits(64) for _ in range(rng.randint(1, 300))]
    else:
      values += cluster(rng.randint(1, 300), rng.randint(4, 64), rng.random() * 0.2, rng)
  hashes = np.unique(np.array(values, dtype=np.uint64))
  rng.shuffle(hashes)
  try:
    found = near_copies.anchors(hashes, distance)
  finally:
    import importlib  # pylint: disable=import-outside-toplevel
    importlib.reload(near_copies)
  assert (found.anchor <= np.arange(len(hashes))).all()
  assert (near_copies.popcount(hashes ^ hashes[found.anchor]) <= distance).all()
  assert (found.anchor != brute_anchors(hashes, distance)).sum() <= found.cut_short


def test_a_group_takes_its_best_file_and_a_chain_is_no_group():
  """a-b and b-c within D, a-c not: no chain joins them; the first in rank order (a, the
  largest) anchors b, and c, which only b is near, is not grouped with a. Each group's
  representative is its best file, whatever the names."""
  a = 0x0123456789ABCDEF
  b, c = flip(a, [0, 1, 2, 3]), flip(a, [0, 1, 2, 3, 20, 30, 40, 50])
  files = [(sha('a'), as_hex(a), near_copies.priority(False, 1000, 50_000), ''),
           (sha('b'), as_hex(b), near_copies.priority(False, 500, 20_000), ''),
           (sha('c'), as_hex(c), near_copies.priority(False, 400, 10_000), ''),
           (sha('other'), as_hex(~a & 0xFFFF), 0, '')]
  representative, _ = near_groups(files)
  assert representative == {sha('a'): sha('a'), sha('b'): sha('a')}
  assert representative == brute_force(files, D) == dict(near_copies.groups_on_one_machine(files, D).pairs)


def test_a_chain_is_cut_into_stars():
  """A chain of 12 hashes, each within D of the one before only: no group holds more than an
  anchor's neighbours, so no two members of one lie more than 2D apart."""
  masks = near_copies.bands(D)
  positions = [[bit for bit in range(64) if mask >> bit & 1] for mask in masks]
  values = [0]
  for step in range(11):
    values.append(flip(values[-1], [positions[band][step % len(positions[band])] for band in range(D + 1)
                                    if band != step % (D + 1)]))
  assert all(near_copies.distance_between(x, y) == D for x, y in zip(values, values[1:]))
  files = files_of(values)
  pairs = dict(near_copies.groups_on_one_machine(files, D).pairs)
  hashes = {content: int(phash, 16) for content, phash, _, _ in files}
  groups = collections.defaultdict(list)
  for content, representative in pairs.items():
    groups[representative].append(hashes[content])
  assert groups and all(len(members) <= 3 for members in groups.values())
  assert all(near_copies.distance_between(x, y) <= 2 * D
             for members in groups.values() for x in members for y in members)
  assert pairs == brute_force(files, D) == near_groups(files)[0]


def test_files_of_one_hash_and_priority_are_in_sha256_order_and_the_smallest_represents_them():
  """Files of one node tie on priority: the group lists them by sha256, and its representative
  is the smallest, however they were given; a hash of 16 digits (a catalog's from before blocks
  halves) and a missing colour signature join hashes of 32 digits and signatures, as they did."""
  a = 0x0123456789ABCDEF
  ties = [(sha(name), as_hex(a) * 2, 7, '') for name in ('z', 'm', 'b')]
  files = [*ties, (sha('short'), as_hex(flip(a, [3, 9])), 9, '0102030405060708'),
           (sha('again'), as_hex(a) * 2, 7, '')]
  found = near_copies.groups_on_one_machine(files + files[:1], D)
  best = min(sha(name) for name in ('z', 'm', 'b', 'again'))
  assert found.pairs == [(content, best) for content in sorted(sha(name) for name in ('z', 'm', 'b', 'again'))] + [
      (sha('short'), best)]
  assert found.counts == {'groups': 1, 'images_in_groups': 5}


def test_files_sharing_a_hash_group_and_a_near_uniform_hash_does_not():
  """Two files of one hash are a group alone; 1,001 of another are near-uniform frames."""
  files = [(sha(1), 'aaaaaaaaaaaaaaaa', 5, ''), (sha(2), 'aaaaaaaaaaaaaaaa', 3, ''),
           (sha(2), 'aaaaaaaaaaaaaaaa', 3, '')]
  files += [(sha(f'black{i}'), '0000000000000000', 0, '') for i in range(near_copies.SAME_HASH_CAP + 1)]
  files += [(sha('dark'), '0000000000000001', 0, '')]
  representative, counts = near_groups(files)
  assert representative == {sha(1): sha(2), sha(2): sha(2)}
  assert counts['uniform_hashes'] == 1
  over = near_copy_nodes.nodes_of(near_copy_nodes.file_table([(sha(i), '00000000000000ff', 0, '') for i in (1, 2, 3)]),
                                  same_hash_cap=2)
  assert (len(over.nodes), over.uniform_hashes, over.uniform_images) == (0, 1, 3)


@pytest.mark.parametrize('images, fraction, cap', [(13, 1.0, 10), (20_000, 0.2, 40), (20_000, 1.0, 200),
                                                   (1_000_000, 0.1, 1_000), (100_000_000, 0.05, 1_000)])
def test_a_group_holds_at_most_a_hundredth_of_the_smallest_split(images, fraction, cap):
  assert near_copies.group_cap(images, fraction) == cap


def test_a_set_of_look_alikes_over_the_cap_is_counted_not_grouped():
  """The frames of one camera (about 800 distinct hashes, nearly every one within d of the best),
  and two copies of one photo: with a cap of 40, the frames are one set of look-alikes, the
  copies a group."""
  rng = random.Random(4)
  frames = cluster(2_000, 20, 0.1, rng)
  photo = rng.getrandbits(64)
  files = files_of(frames, 'frame') + [(sha('photo'), as_hex(photo), 0, ''),
                                       (sha('copy'), as_hex(flip(photo, [3])), 1, '')]
  found = near_copies.groups_on_one_machine(files, 10, cap=40)
  assert dict(found.pairs) == {sha('photo'): sha('photo'), sha('copy'): sha('photo')} == brute_force(files, 10, cap=40)
  assert {name: found.counts[name] for name in ('groups', 'images_in_groups', 'look_alike_sets')} == {
      'groups': 1, 'images_in_groups': 2, 'look_alike_sets': 1}
  assert 0.95 * len(frames) < found.counts['look_alike_images'] <= len(frames)
  representative, counts = near_groups(files, distance=10, cap=40)
  assert representative == dict(found.pairs)
  assert (counts['look_alike_sets'], counts['look_alike_images']) == (1, found.counts['look_alike_images'])


def test_a_key_cap_far_below_the_input_finds_every_anchor_of_a_sparse_input():
  """4,400 hashes at distance 10, every tenth with a near copy, and a cap of 30: the first-level
  keys (5- and 6-bit bands, about 90 hashes a key) are over it, so split again, and none of the
  sub-band keys is still over it."""
  rng = random.Random(2)
  values = [rng.getrandbits(64) for _ in range(4000)]
  values += [flip(values[i], rng.sample(range(64), rng.randint(1, 10))) for i in range(0, 4000, 10)]
  files = files_of(values)
  representative, counts = near_groups(files, distance=10, key_cap=30)
  assert counts['dense_keys'] > 0 and counts['over_cap_hashes'] == 0
  assert representative == brute_force(files, distance=10)
  assert len(representative) > 2 * 300


def test_look_alikes_over_the_key_cap_find_their_anchors_among_the_held():
  """600 distinct hashes within 2 bits of one value, a key cap of 100: the sub-band keys are
  still over it; every hash finds its anchor among the 100 best held, so the groups are exact
  and nothing is counted as missed. The cluster is one group, or with a cap of 50 one set of
  look-alikes."""
  rng = random.Random(3)
  base = rng.getrandbits(64)
  values = sorted({flip(base, rng.sample(range(64), 2)) for _ in range(2000)})[:600]
  files = files_of(values)
  representative, counts = near_groups(files, key_cap=100)
  assert counts['dense_keys'] > 0 and counts['over_cap_hashes'] == 0
  assert representative == brute_force(files, D) and len(set(representative.values())) < 100
  representative, counts = near_groups(files, key_cap=100, cap=50)
  assert counts['look_alike_sets'] >= 1 and set(representative.values()) <= set(brute_force(files, D).values())


def test_hashes_a_full_key_does_not_hold_and_no_held_hash_is_near_are_counted():
  members = [(value, 0, 0, value) for value in range(0, 64 * 1024, 1024)]  # 64 hashes 1 to 6 bits apart
  far = [(value, 1, 0, value) for value in map(near_copies.parse, ['f0f0f0f0f0f0f0f0', '0f0f0f0f0f0f0f0f'])]
  out = list(near_copies.key_anchors([near_copies.member_rows(members + far)], 2, key_cap=32))
  assert ('over_cap_hashes', 2) in out
  anchored = dict(value for value in out if not isinstance(value[0], str) and value[1] is not None)
  assert {value for value, told in out if told is None} == {(anchor, colour) for _, anchor, colour in anchored.values()}
  assert set(anchored) <= {(value, 0) for value, _, _, _ in members} and len(anchored) >= 32


@pytest.mark.parametrize('images, distance', [(20_000, 10), (100_000, 10), (1_000_000, 8), (3_000_000, 8),
                                              (100_000_000, 6)])
def test_the_distance_shrinks_as_the_input_grows_so_chance_groups_at_most_one_image_in_a_thousand(images, distance):
  assert near_copies.distance_for(images, 10) == distance
  assert near_copies.chance_share(images, distance) <= near_copies.MAX_CHANCE_SHARE
  if distance < 10:
    assert near_copies.chance_share(images, distance + 2) > near_copies.MAX_CHANCE_SHARE


def test_on_one_machine_the_groups_are_those_every_pair_compared_gives():
  """What the DirectRunner runs: 2,000 random hashes, one in ten with a near copy, two files of
  one hash, a file listed twice, a hash of six files over a same-hash cap of 5 (counted, not
  grouped), and a cluster over the group cap (counted, not grouped); ranks from image sizes."""
  rng = random.Random(8)
  values = [rng.getrandbits(64) for _ in range(2000)]
  values += [flip(values[i], rng.sample(range(64), rng.randint(1, 10))) for i in range(0, 2000, 10)]
  files = [(sha(i), f'{value:016x}', near_copies.priority(i % 7 == 0, rng.randint(100, 4000), rng.randint(1, 10**6)),
            '') for i, value in enumerate(values)]
  files += [(sha('same'), files[7][1], 5, ''), (sha(3), files[3][1], files[3][2], '')]
  files += [(sha(f'black{i}'), '0000000000000000', 0, '') for i in range(6)]
  files += files_of(cluster(60, 8, 0.3, rng), 'cluster')
  found = near_copies.groups_on_one_machine(files, 10, cap=30, same_hash_cap=5)
  expected = brute_force(files, 10, same_hash_cap=5, cap=30)
  assert dict(found.pairs) == expected and len(found.pairs) == len(expected) > 400
  assert found.counts['look_alike_sets'] == 1 and found.counts['look_alike_images'] > 30
  assert {name: found.counts[name] for name in ('groups', 'images_in_groups', 'uniform_hashes', 'uniform_images')} == {
      'groups': len(set(expected.values())), 'images_in_groups': len(expected), 'uniform_hashes': 1,
      'uniform_images': 6}


RED, ORANGE, BLUE, GRAY = '3c283c283c283c28', '3a2c3a2c3a2c3a2c', 'e0c0e0c0e0c0e0c0', '0' * 16


def test_pictures_whose_colours_are_apart_are_no_copies_however_alike_their_hashes():
  """Four pictures of one hash (gradients that differ in hue) and a near one: the blue one is
  apart from the red ones and stays alone; a slightly different red (within COLOURS_APART), a
  gray copy and a file of unknown colour (a catalog from before signatures) join the best red."""
  value = 0x0123456789ABCDEF
  files = [(sha('red'), as_hex(value), 0, RED), (sha('blue'), as_hex(value), 1, BLUE),
           (sha('orange'), as_hex(flip(value, [3])), 2, ORANGE), (sha('gray'), as_hex(value), 3, GRAY),
           (sha('unknown'), as_hex(flip(value, [9])), 4, '')]
  found = near_copies.groups_on_one_machine(files, D)
  expected = {sha(name): sha('red') for name in ('red', 'orange', 'gray', 'unknown')}
  assert dict(found.pairs) == expected == brute_force(files, D) == near_groups(files)[0]
  assert found.counts['groups'] == 1


def test_a_node_passes_over_a_picture_in_other_colours_to_the_first_in_its_own():
  """A blue picture ranks first and lies within d of both reds: the red copy's anchor is the
  red picture, the first near it in hash and colour; both executors and the definition agree."""
  value = 0x0F0F0F0F0F0F0F0F
  files = [(sha('blue'), as_hex(value), 0, BLUE), (sha('red'), as_hex(flip(value, [1])), 1, RED),
           (sha('red copy'), as_hex(flip(value, [2])), 2, RED)]
  expected = {sha('red'): sha('red'), sha('red copy'): sha('red')}
  assert dict(near_copies.groups_on_one_machine(files, D).pairs) == expected == brute_force(files, D)
  assert near_groups(files)[0] == expected


def test_colours_apart_only_when_both_are_in_colour():
  colours = near_copies.parse_colours([near_copies.colour_value(colour) for colour in (RED, ORANGE, BLUE, GRAY, '')])
  apart = near_copies.colours_apart(colours[:, None], colours[None, :])
  assert apart.tolist() == [[False, False, True, False, False], [False, False, True, False, False],
                            [True, True, False, False, False], [False] * 5, [False] * 5]


@pytest.mark.parametrize('batch', [1, 7, 250])
def test_a_key_finds_the_same_anchors_whatever_batches_its_members_came_in(batch):
  """A key's members cross a shuffle a batch at a time: held past twice the cap, sorted into
  blocks past it. 600 look-alikes within 2 bits of one value and 40 random hashes, a cap of 100,
  in batches of one, seven or 250 rows, find what they find as one array."""
  rng = random.Random(5)
  base = rng.getrandbits(64)
  values = sorted({flip(base, rng.sample(range(64), 2)) for _ in range(2000)})[:600]
  values += [rng.getrandbits(64) for _ in range(40)]
  rows = near_copies.member_rows((near_copies.parse(as_hex(value)), rng.randrange(1000), 0,
                                  near_copies.parse(as_hex(value))) for value in values)
  whole = sorted(map(repr, near_copies.key_anchors([rows], D, key_cap=100)))
  batches = [rows[start:start + batch] for start in range(0, len(rows), batch)]
  assert sorted(map(repr, near_copies.key_anchors(batches, D, key_cap=100))) == whole
  assert sum(1 for out in whole if 'None' not in out) > 500


def test_member_rows_are_keyed_by_their_blocks_halves_bits_under_each_mask():
  """keyed_rows against plain Python: a key's value is the blocks half's bits under its mask,
  shifted down; band_keys and sub_band_keys give one hash's keys alike."""
  rng = random.Random(6)
  members = [(rng.getrandbits(64) - 2**63, rng.randrange(1000), rng.getrandbits(64) - 2**63,
              rng.getrandbits(64) - 2**63) for _ in range(300)]
  rows = near_copies.member_rows(members)
  band = (2, 5)

  def keys(blocks, masks, prefix):
    return [(*prefix, index, (blocks & near_copies.ALL_BITS & mask) >> ((mask & -mask).bit_length() - 1))
            for index, mask in enumerate(masks)]

  for distance in (4, 8, 10):
    first, second = near_copies.bands(distance), near_copies.sub_bands(distance, band[0])
    for masks, prefix in ((first, ()), (second, band)):
      expected = collections.defaultdict(set)
      for member in members:
        for key in keys(member[3], masks, prefix):
          expected[key].add(member)
      assert {key: set(map(tuple, part.tolist())) for key, part in near_copies.keyed_rows(rows, masks, prefix)} == (
          expected)
    for member in members[:20]:
      assert near_copies.band_keys(member[3], distance) == keys(member[3], first, ())
      assert near_copies.sub_band_keys(member[3], distance, band) == keys(member[3], second, band)
