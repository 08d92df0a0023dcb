"""NearCopies on the DirectRunner: the groups are those that comparing every pair gives, the
summary counts what the caps left out, and no key holds more than its cap."""
import random

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from beam_pipeline.beam import local_runner, tags
from beam_pipeline.beam.near_copies import NearCopies
from beam_pipeline.core.planning import near_copies
from helpers.near_hashes import brute_force, flip, sha


def run(pairs, checks, **options):
  """Runs NearCopies over ``pairs``; ``checks(result)`` adds the assertions. Returns the largest
  key of each stage."""
  p = beam.Pipeline(runner=local_runner.runner_for(PipelineOptions([])))
  result = p | beam.Create(pairs) | NearCopies(**options)
  checks(result)
  outcome = p.run()
  outcome.wait_until_finish()
  return {d.key.metric.name.replace('records_per_key_', ''): d.committed.max
          for d in outcome.metrics().query(MetricsFilter().with_namespace(tags.NAMESPACE))['distributions']}


def test_the_groups_are_those_every_pair_compared_gives():
  """300 random hashes, one in ten with a near copy (1-10 bits flipped), a group of three, two
  files of one hash, exact copies, and a hash of six files over a same-hash cap of 5. At
  distance 10 the bands are 5 and 6 bits wide (about 6 hashes a key): a key cap of 8 splits some again."""
  rng = random.Random(5)
  values = [rng.getrandbits(64) for _ in range(300)]
  values += [flip(values[i], rng.sample(range(64), rng.randint(1, 10))) for i in range(0, 300, 10)]
  values += [flip(values[1], range(0, 60, 6)), flip(values[1], range(1, 61, 6))]  # with 1, a group of 3
  pairs = [(sha(i), f'{value:016x}') for i, value in enumerate(values)]
  pairs += [(sha('same'), pairs[7][1]), (sha(3), pairs[3][1]), (sha(3), pairs[3][1])]
  pairs += [(sha(f'black{i}'), '0000000000000000') for i in range(6)]
  expected = brute_force(pairs, 10, 5)
  assert len(expected) > 60 and expected[sha('same')] == min(sha('same'), sha(7))
  summary = {'groups': len(set(expected.values())), 'images_in_groups': len(expected), 'uniform_hashes': 1,
             'uniform_images': 6, 'over_cap_hashes': 0, 'unsettled_edges': 0, 'capped_groups': 0}

  def checks(result):
    assert_that(result['pairs'], equal_to(list(expected.items())), label='pairs')
    assert_that(result[tags.NEAR_COPIES] | beam.Map(lambda s: ({k: s[k] for k in summary}, s['dense_keys'] > 0,
                                                               s['listed_groups'][0][0] == min(expected.values()))),
                equal_to([(summary, True, True)]), label='summary')

  largest = run(pairs, checks, distance=10, key_cap=8, same_hash_cap=5)
  assert largest["NearBands"] <= 8 and largest["NearSubBands"] <= 8 < largest["NearBandTotals"]


def test_what_the_caps_and_rounds_leave_out_is_counted():
  """A chain of 12 hashes, each within 4 bits of the next only, over 2 rounds: unsettled. A
  cluster of 60 hashes within 2 bits of one value, over a key cap of 20 and a group cap of 30:
  its hashes not held are counted, and it is one capped group or more, not grouped."""
  masks = near_copies.bands(4)
  positions = [[bit for bit in range(64) if mask >> bit & 1] for mask in masks]
  chain = [0]
  for step in range(11):
    chain.append(flip(chain[-1], [positions[band][step] for band in range(5) if band != step % 5]))
  rng = random.Random(6)
  base = rng.getrandbits(64)
  cluster = sorted({flip(base, rng.sample(range(64), 2)) for _ in range(200)})[:60]
  pairs = [(sha(f'chain{i}'), f'{value:016x}') for i, value in enumerate(chain)]
  pairs += [(sha(f'cluster{i}'), f'{value:016x}') for i, value in enumerate(cluster)]

  def checks(result):
    chained = (result['pairs']
               | beam.Filter(lambda pair: pair[0] in {sha(f'chain{i}') for i in range(12)})
               | beam.Map(lambda pair: pair[1])
               | beam.Distinct()
               | beam.combiners.Count.Globally()
               | beam.Map(lambda parts: parts > 1))
    assert_that(chained, equal_to([True]), label='chain in parts')
    assert_that(result[tags.NEAR_COPIES] | beam.Map(lambda s: (s['unsettled_edges'] > 0, s['over_cap_hashes'] > 0,
                                                               s['capped_groups'] >= 1, s['images_in_groups'] <= 12)),
                equal_to([(True, True, True, True)]), label='summary')

  largest = run(pairs, checks, distance=4, key_cap=20, group_cap=30, rounds=2)
  assert largest['NearBands'] <= 20 and largest['NearSubBands'] > 20
