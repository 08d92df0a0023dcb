"""Near-copy grouping at scale, simulated (issues 37 and 59): N synthetic (source_sha256, phash,
priority, colour signature) tuples through beam_pipeline.pipeline.planning.near_copy_groups.NearCopies
on the in-process runner, or through near_copies.groups_on_one_machine (the DirectRunner's) in one
process.

Usage: python -m benchmarks.near_copies_planning [--records 1000000,2000000] [--distance 6,8]
           [--kind photos|look-alikes] [--scenes 1] [--on-one-machine]

Each (N, d) runs in a child process under benchmarks.measure (peak memory of the largest
process, CPU over all of them), as benchmarks.planning does. The child generates the triples
inside the pipeline, a thousand at a time, so no list of N travels in the job graph. Photos
(the default kind), in every block of BLOCK images:

* one all-black frame (a hash shared by every such image: near-uniform, never grouped) and one
  near-uniform frame (0 to 2 bits of one value flipped: a dense cluster, a set of look-alikes
  over the group cap, whose files of one exact hash, a few dozen each past 1M images, are
  grouped by that hash);
* PLANTED near copies: an original and its copy with 0..d bits of its hash's blocks half and
  0..d + DCT_MARGIN of its DCT half flipped (near_copies: near at d), one of them a group of
  three (a second copy of the same original), 5% of the images; an original ranks before its
  copies, as a source is larger than its downscaled or re-compressed copies;
* one exact copy (the sha256 and hash of the image before it);
* the rest random hashes, each half drawn on its own.

The black and near-uniform frames have both halves alike, as a flat image's hash has.
Look-alikes (issue 59): every image a frame of one of ``--scenes`` fixed cameras, each half of
its hash the scene's with each of 40 of its bits flipped with probability 0.08 (a few pixels'
noise): most pairs of one scene lie near, so a list of close pairs would hold N^2/2 of them;
and the same planted copies, their originals random hashes.

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

from beam_pipeline.core.planning import near_copies
from benchmarks.planning import CHUNK, RESULTS, measured_child

BLOCK = 200
BLACK, NEAR_UNIFORM, EXACT = 0, 1, BLOCK - 1
# (original, copy) slots of a block: eight pairs, and a group of three around slot 18.
PLANTED = [(slot, slot + 1) for slot in range(2, 19, 2)] + [(18, 20)]
COPIES = {copy: original for original, copy in PLANTED}
NEAR_UNIFORM_BASE = 0x5A5A_0F0F_3C3C_A5A5
STAGES = ('NearBandTotals', 'NearBands', 'NearSubBands', 'NearNodes', 'NearGroups')
SCENE_BITS, SCENE_FLIPPED = 40, 0.08  # a look-alike frame's hash: these many bits of its scene's, each flipped so often
SPLITS = 0.2  # the smallest split's fraction, for the group cap: 80/20
BLOCKS = b'blocks'  # _random_hash's label of a blocks half


def family(index: int) -> int:
  """The index of the planted original an image is a copy of (or is), else -1."""
  slot = index % BLOCK
  if slot in COPIES:
    return index - slot + COPIES[slot]
  return index if any(slot == original for original, _ in PLANTED) else -1


def _sha(index: int) -> str:
  return hashlib.sha256(index.to_bytes(8, 'little')).hexdigest()[:48] + f'{index:016x}'


def _random_hash(index: int, half: bytes = b'phash') -> int:
  """An image's random DCT half, or with ``half`` another label its blocks half, drawn on its own."""
  return int.from_bytes(hashlib.sha256(half + index.to_bytes(8, 'little')).digest()[:8], 'little')


def _flipped(value: int, rng: np.random.Generator, most: int) -> int:
  for bit in rng.choice(64, size=rng.integers(0, most + 1), replace=False):
    value ^= 1 << int(bit)
  return value


def _priority(index: int) -> int:
  """A made-up image's rank as an anchor: random, an original's before its copies'."""
  slot = index % BLOCK
  if slot in COPIES:
    return _priority(index - slot + COPIES[slot]) + slot
  return int.from_bytes(hashlib.sha256(b'rank' + index.to_bytes(8, 'little')).digest()[:5], 'little') << 8


def _colour(index: int) -> str:
  """A made-up image's colour signature (colour_signature): a copy's its original's, a frame's its
  scene's (given as a negative index), a random one's its own."""
  slot = index % BLOCK
  if index >= 0 and slot in COPIES:
    index = index - slot + COPIES[slot]
  values = np.frombuffer(hashlib.sha256(b'colour' + index.to_bytes(8, 'little', signed=True)).digest()[:8], np.int8)
  return (values // 2).astype(np.int8).tobytes().hex()


def _frame(index: int, scenes: int, rng: np.random.Generator, half: bytes = b'phash') -> int:
  """A look-alike frame's hash half (_random_hash's ``half``): its scene's, with each of the scene's
  SCENE_BITS bits flipped with probability SCENE_FLIPPED."""
  scene = index % scenes
  bits = np.random.default_rng([10**9 + scene, len(half)]).choice(64, SCENE_BITS, replace=False)
  value = _random_hash(2**40 + scene, half)
  for bit in bits[rng.random(SCENE_BITS) < SCENE_FLIPPED]:
    value ^= 1 << int(bit)
  return value


def synthetic_chunk(start: int, count: int, distance: int, scenes: int = 0) -> List[Tuple[str, str, int, str]]:
  """(source_sha256, phash, priority, colour signature) of images ``start`` to ``start + count`` (whole blocks):
  photos, or with ``scenes``, frames of that many cameras besides the planted copies."""
  rng = np.random.default_rng(start)
  triples = []
  for index in range(start, start + count):
    slot = index % BLOCK
    if slot in COPIES:
      original = index - slot + COPIES[slot]
      value = _flipped(_random_hash(original), rng, distance + near_copies.DCT_MARGIN)
      blocks = _flipped(_random_hash(original, BLOCKS), rng, distance)
    elif any(slot == original for original, _ in PLANTED):
      value, blocks = _random_hash(index), _random_hash(index, BLOCKS)
    elif scenes:
      value, blocks = _frame(index, scenes, rng), _frame(index, scenes, rng, BLOCKS)
    elif slot == BLACK:
      value = blocks = 0
    elif slot == NEAR_UNIFORM:
      value = blocks = _flipped(NEAR_UNIFORM_BASE, np.random.default_rng(index), 2)
    else:
      value, blocks = _random_hash(index), _random_hash(index, BLOCKS)
    if slot == EXACT and not scenes:
      triples.append(triples[-1])
    else:
      plain = slot in (BLACK, NEAR_UNIFORM) and not scenes
      colour = '0' * 16 if plain else _colour(-1 - index % scenes if scenes and family(index) < 0 else index)
      triples.append((_sha(index), f'{value:016x}{blocks:016x}', _priority(index), colour))
  return triples


def planted_pairs(count: int) -> int:
  """Planted pairs in ``count`` images: a family of two is one pair, of three three."""
  sizes = collections.Counter(original for original, _ in PLANTED)
  return count // BLOCK * sum((n + 1) * n // 2 for n in sizes.values())


def _near_uniform(pair: Tuple[str, str], scenes: int) -> Iterator[Tuple[Tuple[str, str], int]]:
  """A near-uniform image's (group, hash): files of one hash grouped are same-hash pairs."""
  index = int(pair[0][48:], 16)
  if index % BLOCK == NEAR_UNIFORM and not scenes:
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


def run_grouping(count: int, distance: int, scenes: int = 0) -> Dict[str, Any]:
  """Groups ``count`` synthetic images in this process's pipeline; what the child reports."""
  import apache_beam as beam  # pylint: disable=import-outside-toplevel
  from apache_beam.metrics import Metrics  # pylint: disable=import-outside-toplevel
  from apache_beam.metrics.metric import MetricsFilter  # pylint: disable=import-outside-toplevel
  from apache_beam.options.pipeline_options import PipelineOptions  # pylint: disable=import-outside-toplevel

  from beam_pipeline.pipeline import local_runner, tags  # pylint: disable=import-outside-toplevel
  from beam_pipeline.pipeline.planning.near_copy_groups import NearCopies  # pylint: disable=import-outside-toplevel

  options = PipelineOptions([])
  p = beam.Pipeline(runner=local_runner.runner_for(options), options=options)
  chunks = [(start, min(CHUNK, count - start)) for start in range(0, count, CHUNK)]
  grouped = (p
             | 'Chunks' >> beam.Create(chunks)
             | 'Triples' >> beam.Map(lambda chunk: synthetic_chunk(*chunk, distance, scenes))
             | NearCopies(distance, near_copies.group_cap(count, SPLITS)))

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
       | 'NearUniform' >> beam.FlatMap(_near_uniform, scenes)
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
  return _row(count, distance, scenes, seconds, checks.get('planted_together', 0), checks.get('grouped_pairs', 0),
              checks.get('same_hash_pairs', 0), summary, largest, keys)


def run_on_one_machine(count: int, distance: int, scenes: int = 0) -> Dict[str, Any]:
  """Groups ``count`` synthetic images as a DirectRunner run does, in memory in this process."""

  files = [triple for start in range(0, count, CHUNK)
           for triple in synthetic_chunk(start, min(CHUNK, count - start), distance, scenes)]
  started = time.monotonic()
  found = near_copies.groups_on_one_machine(files, distance, near_copies.group_cap(count, SPLITS))
  seconds = time.monotonic() - started
  families: Dict[int, List[str]] = collections.defaultdict(list)
  sizes: Dict[str, int] = collections.Counter()
  same_hash: Dict[Tuple[str, str], int] = collections.Counter()
  for pair in found.pairs:
    for family_index, representative in _family_of(pair):
      families[family_index].append(representative)
    sizes[pair[1]] += 1
    for key, one in _near_uniform(pair, scenes):
      same_hash[key] += one
  together = sum(_same_group(representatives) for representatives in families.values())
  grouped = sum(n * (n - 1) // 2 for n in sizes.values())
  return _row(count, distance, scenes, seconds, together, grouped,
              sum(n * (n - 1) // 2 for n in same_hash.values()), found.counts, {}, {})


def _row(count: int, distance: int, scenes: int, seconds: float, together: int, grouped: int, same_hash: int,
         summary: Dict[str, int], largest: Dict[str, int], keys: Dict[str, int]) -> Dict[str, Any]:
  planted = planted_pairs(count)
  return {'records': count, 'distance': distance, 'scenes': scenes, 'seconds': round(seconds, 2),
          'us_per_record': round(seconds / count * 1e6, 2), 'largest_key': largest, 'keys': keys,
          'planted_pairs': planted, 'recall': round(together / planted, 5), 'same_hash_pairs': same_hash,
          'false_merge_pairs': grouped - together - same_hash, 'summary': summary}


def main() -> int:
  parser = argparse.ArgumentParser(prog='python -m benchmarks.near_copies_planning',
                                   description=__doc__.splitlines()[0])
  parser.add_argument('--records', default='1000000,2000000')
  parser.add_argument('--distance', default='6,8', help='Hamming distances, comma-separated')
  parser.add_argument('--kind', choices=('photos', 'look-alikes'), default='photos')
  parser.add_argument('--scenes', type=int, default=1, help='with --kind=look-alikes: how many cameras')
  parser.add_argument('--on-one-machine', action='store_true', help="the DirectRunner's grouping, in memory")
  parser.add_argument('--child', nargs=5, metavar=('N', 'D', 'SCENES', 'WHERE', 'RESULT'), help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    logging.getLogger('apache_beam').setLevel(logging.ERROR)
    count, distance, scenes, where, path = args.child
    run = run_on_one_machine if where == 'memory' else run_grouping
    Path(path).write_text(json.dumps(run(int(count), int(distance), int(scenes))))
    return 0
  RESULTS.mkdir(parents=True, exist_ok=True)
  scenes = args.scenes if args.kind == 'look-alikes' else 0
  where = 'memory' if args.on_one_machine else 'beam'
  rows = []
  for count in map(int, args.records.split(',')):
    for distance in map(int, args.distance.split(',')):
      row = measured_child(f'near-copies-{count}-d{distance}-{args.kind}-{where}',
                           ['benchmarks.near_copies_planning', '--child', str(count), str(distance), str(scenes),
                            where])
      rows.append({**row, 'where': where})
      largest = ', '.join(f'{stage} {row["largest_key"].get(stage, 0):,} of {row["keys"].get(stage, 0):,} keys'
                          for stage in STAGES if stage in row['largest_key'])
      print(f'{count:>11,} d={distance} {args.kind} ({where}) {row["seconds"]:>8.1f} s {row["us_per_record"]:>6.1f} '
            f'us/record, CPU {row["cpu_s"]:.1f} s, largest process {row["largest_process_mb"]:>6.0f} MB; recall '
            f'{row["recall"]:.4f}, false merges {row["false_merge_pairs"]:,} (and {row["same_hash_pairs"]:,} pairs of '
            f'near-uniform files sharing one hash); largest key: {largest or "-"}; {row["summary"]}', flush=True)
  (RESULTS / f'near_copies_planning-{args.kind}-{where}.json').write_text(json.dumps({'rows': rows}, indent=2))
  return 0


if __name__ == '__main__':
  sys.exit(main())
