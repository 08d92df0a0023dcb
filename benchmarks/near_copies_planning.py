"""Near-copy grouping at scale, simulated (issue 37): N synthetic (source_sha256, phash) pairs
through beam_pipeline.beam.near_copies.NearCopies on the in-process runner.

Usage: python -m benchmarks.near_copies_planning [--records 1000000,2000000] [--distance 6,8]

Each (N, d) runs in a child process under benchmarks.measure (peak memory of the largest
process, CPU over all of them), as benchmarks.planning does. The child generates the pairs
inside the pipeline, a thousand at a time, so no list of N travels in the job graph. In every
block of BLOCK images:

* one all-black frame (a hash shared by every such image: near-uniform, never grouped) and one
  near-uniform frame (0 to 2 bits of one value flipped: a dense cluster, over the group cap,
  whose files of one exact hash, a few dozen each past 1M images, are grouped by that hash);
* PLANTED near copies: an original and its copy with 0..d bits of its hash flipped, one of
  them a group of three (a second copy of the same original), 5% of the images;
* one exact copy (the sha256 and hash of the image before it);
* the rest random 64-bit hashes.

A sha256 here ends with the image's index in hex, so the checks know every image's family
without holding a list: recall is the share of planted pairs whose images ended in one group;
false merges are the pairs grouped together that were neither planted together nor near-uniform
files of one exact hash (random hashes within d of each other are among them, about
N^2/2 * P(distance <= d)). It reports them, the
summary's counters, the largest key of each stage (Beam distributions) and the time per record,
to standard output and work/bench-results/near_copies_planning.json.
"""
import argparse
import collections
import hashlib
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import numpy as np

from benchmarks.planning import CHUNK, RESULTS, measured_child

BLOCK = 200
BLACK, NEAR_UNIFORM, EXACT = 0, 1, BLOCK - 1
# (original, copy) slots of a block: eight pairs, and a group of three around slot 18.
PLANTED = [(slot, slot + 1) for slot in range(2, 19, 2)] + [(18, 20)]
COPIES = {copy: original for original, copy in PLANTED}
NEAR_UNIFORM_BASE = 0x5A5A_0F0F_3C3C_A5A5
STAGES = ('NearBandTotals', 'NearBands', 'NearSubBands', 'NearNodes', 'NearRounds', 'NearGroups')


def family(index: int) -> int:
  """The index of the planted original an image is a copy of (or is), else -1."""
  slot = index % BLOCK
  if slot in COPIES:
    return index - slot + COPIES[slot]
  return index if any(slot == original for original, _ in PLANTED) else -1


def _sha(index: int) -> str:
  return hashlib.sha256(index.to_bytes(8, 'little')).hexdigest()[:48] + f'{index:016x}'


def _random_hash(index: int) -> int:
  return int.from_bytes(hashlib.sha256(b'phash' + index.to_bytes(8, 'little')).digest()[:8], 'little')


def _flipped(value: int, rng: np.random.Generator, most: int) -> int:
  for bit in rng.choice(64, size=rng.integers(0, most + 1), replace=False):
    value ^= 1 << int(bit)
  return value


def synthetic_chunk(start: int, count: int, distance: int) -> List[Tuple[str, str]]:
  """(source_sha256, phash) of images ``start`` to ``start + count`` (whole blocks)."""
  rng = np.random.default_rng(start)
  pairs = []
  for index in range(start, start + count):
    slot = index % BLOCK
    if slot == BLACK:
      value = 0
    elif slot == NEAR_UNIFORM:
      value = _flipped(NEAR_UNIFORM_BASE, np.random.default_rng(index), 2)
    elif slot in COPIES:
      value = _flipped(_random_hash(index - slot + COPIES[slot]), rng, distance)
    else:
      value = _random_hash(index)
    if slot == EXACT:
      pairs.append(pairs[-1])
    else:
      pairs.append((_sha(index), f'{value:016x}'))
  return pairs


def planted_pairs(count: int) -> int:
  """Planted pairs in ``count`` images: a family of two is one pair, of three three."""
  sizes = collections.Counter(original for original, _ in PLANTED)
  return count // BLOCK * sum((n + 1) * n // 2 for n in sizes.values())


def _near_uniform(pair: Tuple[str, str]) -> Iterator[Tuple[Tuple[str, str], int]]:
  """A near-uniform image's (group, hash): files of one hash grouped are same-hash pairs."""
  index = int(pair[0][48:], 16)
  if index % BLOCK == NEAR_UNIFORM:
    yield (pair[1], f'{_flipped(NEAR_UNIFORM_BASE, np.random.default_rng(index), 2):016x}'), 1


def _family_of(pair: Tuple[str, str]) -> Iterator[Tuple[int, str]]:
  index = int(pair[0][48:], 16)
  if family(index) >= 0:
    yield family(index), pair[1]


def _same_group(representatives: List[str]) -> int:
  """Planted pairs of one family that ended in one group."""
  counts: Dict[str, int] = {}
  for representative in representatives:
    counts[representative] = counts.get(representative, 0) + 1
  return sum(n * (n - 1) // 2 for n in counts.values())


def run_grouping(count: int, distance: int) -> Dict[str, Any]:
  """Groups ``count`` synthetic images in this process's pipeline; what the child reports."""
  import apache_beam as beam  # pylint: disable=import-outside-toplevel
  from apache_beam.metrics import Metrics  # pylint: disable=import-outside-toplevel
  from apache_beam.metrics.metric import MetricsFilter  # pylint: disable=import-outside-toplevel
  from apache_beam.options.pipeline_options import PipelineOptions  # pylint: disable=import-outside-toplevel

  from beam_pipeline.beam import local_runner, tags  # pylint: disable=import-outside-toplevel
  from beam_pipeline.beam.near_copies import NearCopies  # pylint: disable=import-outside-toplevel

  options = PipelineOptions([])
  p = beam.Pipeline(runner=local_runner.runner_for(options), options=options)
  chunks = [(start, min(CHUNK, count - start)) for start in range(0, count, CHUNK)]
  grouped = (p
             | 'Chunks' >> beam.Create(chunks)
             | 'Pairs' >> beam.FlatMap(lambda chunk: synthetic_chunk(*chunk, distance))
             | NearCopies(distance))
  def report(name: str) -> Any:
    return lambda value: Metrics.counter('near_copies_check', name).inc(value)

  _ = (grouped['pairs']
       | 'Families' >> beam.FlatMap(_family_of)
       | 'GroupByFamily' >> beam.GroupByKey()
       | 'SameGroup' >> beam.MapTuple(lambda _, representatives: _same_group(list(representatives)))
       | 'PlantedTogether' >> beam.CombineGlobally(sum)
       | 'ReportPlanted' >> beam.Map(report('planted_together')))
  _ = (grouped['pairs']
       | 'ByGroup' >> beam.MapTuple(lambda _, representative: (representative, 1))
       | 'GroupSizes' >> beam.CombinePerKey(sum)
       | 'PairsInGroup' >> beam.MapTuple(lambda _, size: size * (size - 1) // 2)
       | 'GroupedPairs' >> beam.CombineGlobally(sum)
       | 'ReportGrouped' >> beam.Map(report('grouped_pairs')))
  _ = (grouped['pairs']
       | 'NearUniform' >> beam.FlatMap(_near_uniform)
       | 'SameHashSizes' >> beam.CombinePerKey(sum)
       | 'SameHashPairs' >> beam.MapTuple(lambda _, size: size * (size - 1) // 2)
       | 'SameHashGrouped' >> beam.CombineGlobally(sum)
       | 'ReportSameHash' >> beam.Map(report('same_hash_pairs')))
  _ = (grouped[tags.NEAR_COPIES]
       | 'Counters' >> beam.FlatMap(lambda s: [(name, value) for name, value in s.items() if isinstance(value, int)])
       | 'ReportSummary' >> beam.MapTuple(lambda name, value: Metrics.counter('near_copies_summary', name).inc(value)))
  started = time.monotonic()
  result = p.run()
  result.wait_until_finish()
  seconds = time.monotonic() - started
  metrics = result.metrics()
  distributions = metrics.query(MetricsFilter().with_namespace(tags.NAMESPACE))['distributions']
  largest = {d.key.metric.name.replace('records_per_key_', ''): d.committed.max for d in distributions}
  keys = {d.key.metric.name.replace('records_per_key_', ''): d.committed.count for d in distributions}
  checks = {c.key.metric.name: c.committed
            for c in metrics.query(MetricsFilter().with_namespace('near_copies_check'))['counters']}
  summary = {c.key.metric.name: c.committed
             for c in metrics.query(MetricsFilter().with_namespace('near_copies_summary'))['counters']}
  planted = planted_pairs(count)
  together = checks.get('planted_together', 0)
  return {'records': count, 'distance': distance, 'seconds': round(seconds, 2),
          'us_per_record': round(seconds / count * 1e6, 2), 'largest_key': largest, 'keys': keys,
          'planted_pairs': planted, 'recall': round(together / planted, 5),
          'same_hash_pairs': checks.get('same_hash_pairs', 0),
          'false_merge_pairs': checks.get('grouped_pairs', 0) - together - checks.get('same_hash_pairs', 0),
          'summary': summary}


def main() -> int:
  parser = argparse.ArgumentParser(prog='python -m benchmarks.near_copies_planning',
                                   description=__doc__.splitlines()[0])
  parser.add_argument('--records', default='1000000,2000000')
  parser.add_argument('--distance', default='6,8', help='Hamming distances, comma-separated')
  parser.add_argument('--child', nargs=3, metavar=('N', 'D', 'RESULT'), help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    logging.getLogger('apache_beam').setLevel(logging.ERROR)
    count, distance, path = args.child
    Path(path).write_text(json.dumps(run_grouping(int(count), int(distance))))
    return 0
  RESULTS.mkdir(parents=True, exist_ok=True)
  rows = []
  for count in map(int, args.records.split(',')):
    for distance in map(int, args.distance.split(',')):
      row = measured_child(f'near-copies-{count}-d{distance}',
                           ['benchmarks.near_copies_planning', '--child', str(count), str(distance)])
      rows.append(row)
      largest = ', '.join(f'{stage} {row["largest_key"].get(stage, 0):,} of {row["keys"].get(stage, 0):,} keys'
                          for stage in STAGES)
      print(f'{count:>11,} d={distance} {row["seconds"]:>8.1f} s {row["us_per_record"]:>6.1f} us/record '
            f'largest process {row["largest_process_mb"]:>6.0f} MB; recall {row["recall"]:.4f}, '
            f'false merges {row["false_merge_pairs"]:,} (and {row["same_hash_pairs"]:,} pairs of near-uniform files '
            f'sharing one hash); largest key: {largest}; {row["summary"]}', flush=True)
  (RESULTS / 'near_copies_planning.json').write_text(json.dumps({'rows': rows}, indent=2))
  return 0


if __name__ == '__main__':
  sys.exit(main())
