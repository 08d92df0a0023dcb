"""NearCopies on the DirectRunner: the groups are those that comparing every pair gives, the
summary counts what the caps left out, and no key holds more than its cap."""
import collections
import random

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from beam_pipeline.pipeline import local_runner, tags
from beam_pipeline.pipeline.planning import near_copy_groups
from beam_pipeline.pipeline.planning.near_copy_groups import NearCopies
from helpers.near_hashes import brute_force, cluster, files_of, flip, sha


def run(files, checks, **options):
  """Runs NearCopies over ``files``, in lists of seven as validation's batches come;
  ``checks(result)`` adds the assertions. Returns the largest key of each stage."""
  p = beam.Pipeline(runner=local_runner.runner_for(PipelineOptions([])))
  result = p | beam.Create([files[start:start + 7] for start in range(0, len(files), 7)]) | NearCopies(**options)
  checks(result)
  outcome = p.run()
  outcome.wait_until_finish()
  return {d.key.metric.name.replace('records_per_key_', ''): d.committed.max
          for d in outcome.metrics().query(MetricsFilter().with_namespace(tags.NAMESPACE))['distributions']}


def test_the_groups_are_those_every_pair_compared_gives():
  """300 random hashes, one in ten with a near copy (1-10 bits flipped), a group of three, two
  files of one hash, exact copies, and a hash of six files over a same-hash cap of 5; ranks
  from made-up sizes. At distance 10 the bands are 5 and 6 bits wide (about 6 hashes a key): a
  key cap of 8 splits some again."""
  rng = random.Random(5)
  values = [rng.getrandbits(64) for _ in range(300)]
  values += [flip(values[i], rng.sample(range(64), rng.randint(1, 10))) for i in range(0, 300, 10)]
  values += [flip(values[1], range(0, 60, 6)), flip(values[1], range(1, 61, 6))]  # with 1, a group of 3
  files = [(sha(i), f'{value:016x}', rng.randrange(10**6), '') for i, value in enumerate(values)]
  files += [(sha('same'), files[7][1], 7, ''), (sha(3), files[3][1], files[3][2], ''),
            (sha(3), files[3][1], files[3][2], '')]
  files += [(sha(f'black{i}'), '0000000000000000', 0, '') for i in range(6)]
  expected = brute_force(files, 10, same_hash_cap=5)
  assert len(expected) > 60 and expected[sha('same')] == min((7, sha('same')), (files[7][2], sha(7)))[1]
  summary = {'groups': len(set(expected.values())), 'images_in_groups': len(expected), 'uniform_hashes': 1,
             'uniform_images': 6, 'over_cap_hashes': 0, 'cut_short_hashes': 0, 'look_alike_sets': 0}

  def checks(result):
    assert_that(result['pairs'], equal_to(list(expected.items())), label='pairs')
    assert_that(result[tags.NEAR_COPIES] | beam.Map(lambda s: ({k: s[k] for k in summary}, s['dense_keys'] > 0,
                                                               len(s['listed_groups']))),
                equal_to([(summary, True, summary['groups'])]), label='summary')

  largest = run(files, checks, distance=10, key_cap=8, same_hash_cap=5)
  assert largest["NearBands"] <= 8 and largest["NearSubBands"] <= 8 < largest["NearBandTotals"]


def test_look_alikes_over_every_cap_are_counted_and_no_key_holds_more_than_its_cap():
  """About 800 frames of one camera over a key cap of 60 and a group cap of 30: every sub-band
  key is still over the key cap, holds 60 and finds the others' anchors among them; the frames
  are one set of look-alikes, counted, not grouped (but for a few at its edge, anchored to
  another frame); a photo and its copy are a group."""
  rng = random.Random(6)
  frames = cluster(2_000, 20, 0.1, rng)
  photo = rng.getrandbits(64)
  files = files_of(frames, 'frame') + [(sha('photo'), f'{photo:016x}', 0, ''),
                                       (sha('copy'), f'{flip(photo, [5]):016x}', 1, '')]
  expected = brute_force(files, 10, cap=30)
  assert expected[sha('photo')] == expected[sha('copy')] == sha('photo') and len(expected) < 20

  def checks(result):
    assert_that(result['pairs'], equal_to(list(expected.items())), label='pairs')
    assert_that(result[tags.NEAR_COPIES] | beam.Map(lambda s: (s['look_alike_sets'] >= 1,
                                                               s['look_alike_images'] > len(frames) // 2,
                                                               s['dense_keys'] > 0, s['groups'])),
                equal_to([(True, True, True, len(set(expected.values())))]), label='summary')

  largest = run(files, checks, distance=10, cap=30, key_cap=60)
  assert largest['NearBands'] <= 60 < largest['NearSubBands'] and largest['NearGroups'] > 30


def test_colours_apart_split_what_the_hashes_join_as_the_definition_does():
  """200 random hashes, each shared or nearly shared (0-6 bits flipped) by a picture of another
  colour signature: red, orange (within COLOURS_APART of red), blue (apart from both), gray or
  unknown; the groups are the definition's, compared pair by pair, and no group holds red and
  blue."""
  rng = random.Random(12)
  colours = {'red': '3c283c283c283c28', 'orange': '3a2c3a2c3a2c3a2c', 'blue': 'e0c0e0c0e0c0e0c0', 'gray': '0' * 16,
             'unknown': ''}
  files, colour_of = [], {}
  for i in range(200):
    value = rng.getrandbits(64)
    first, second = rng.sample(sorted(colours), 2)
    near = flip(value, rng.sample(range(64), rng.randint(0, 6)))
    for name, colour, hashed in ((f'{i}a', first, value), (f'{i}b', second, near)):
      files.append((sha(name), f'{hashed:016x}', rng.randrange(10**6), colours[colour]))
      colour_of[sha(name)] = colour
  expected = brute_force(files, 10)
  groups = collections.defaultdict(set)
  for content, representative in expected.items():
    groups[representative].add(colour_of[content])
  assert len(expected) > 100 and not any({'red', 'blue'} <= found or {'orange', 'blue'} <= found
                                         for found in groups.values())

  def checks(result):
    assert_that(result['pairs'], equal_to(list(expected.items())), label='pairs')

  run(files, checks, distance=10)


def test_keys_are_packed_within_the_cap_band_by_band_and_a_dense_key_alone():
  """Expected: a band's keys in value order, as many to a pack as hold at most the cap together,
  each pack under its first key; a key over the cap in none (it is split into sub-bands); a dense
  key's sub-band keys likewise, a sub-band at a time."""
  sizes = [((0, 1), 30), ((0, 2), 40), ((0, 3), 25), ((0, 5), 120), ((0, 7), 10), ((1, 0), 60), ((1, 4), 45)]
  assert near_copy_groups._packs(sizes, 100) == {  # pylint: disable=protected-access
      (0, 1): (0, 1), (0, 2): (0, 1), (0, 3): (0, 1), (0, 7): (0, 7), (1, 0): (1, 0), (1, 4): (1, 4)}
  subs = [((0, 5, 2, 0), 50), ((0, 5, 2, 3), 40), ((0, 5, 3, 1), 5), ((0, 5, 3, 2), 101)]
  assert near_copy_groups._packs(subs, 100) == {  # pylint: disable=protected-access
      (0, 5, 2, 0): (0, 5, 2, 0), (0, 5, 2, 3): (0, 5, 2, 0), (0, 5, 3, 1): (0, 5, 3, 1)}
