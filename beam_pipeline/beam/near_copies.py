"""Near copies at Dataflow scale (issue 37): every file's (source_sha256, phash) in, and for every
file in a group of near copies (source_sha256, the group's smallest sha256) out, so that a group
never straddles two splits. The steps are core/planning/near_copies.py's; here each meets its
data by a shuffle in which no key, list or element grows with the input:

* one hash per file, then one node per distinct hash, by combiners (lifted before the shuffle,
  so an all-black hash of a million files costs no worker more than a few numbers and at most
  SAME_HASH_CAP sha256 values);
* band keys, holding bare hashes a batch at a time, counted by a combiner; only the keys over
  the cap (bands x 2^bits of them at most, not N) reach the split as a side input, looked up
  key by key;
* each key's comparison holds at most the cap; its stars meet the nodes (their sha256) by hash,
  and each node's rounds hold at most its links;
* a group's members meet in a combiner that stops holding them past GROUP_CAP;
* the summary is a CombineGlobally that lists the first groups only.
"""
import itertools
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

import apache_beam as beam

from beam_pipeline.beam import planning, tags
from beam_pipeline.core.images import perceptual_hash
from beam_pipeline.core.output import run_totals
from beam_pipeline.core.planning import near_copies
from beam_pipeline.core.settings import Settings

# The planning stages whose largest key tags.records_per_key reports.
BANDS, SUB_BANDS, NODES, ROUNDS, GROUPS = 'NearBands', 'NearSubBands', 'NearNodes', 'NearRounds', 'NearGroups'
BAND_TOTALS = 'NearBandTotals'  # every first-level key before the dense ones are split
COUNTERS = ('uniform_hashes', 'uniform_images', 'dense_keys', 'over_cap_hashes', 'unsettled_edges',
            'capped_groups')
# The counters that say what the bounds left out of the comparison (beam_pipeline.json's left_out).
LEFT_OUT = ('uniform_images', 'over_cap_hashes', 'capped_groups', 'unsettled_edges')
_COUNTS, _SEVERAL, _LABELLED, _MEMBER = 'counts', 'several', 'labelled', 'member'
# Hashes are keyed a batch at a time, so each key's hashes of one batch cross the shuffle as one
# element (Beam's per-element cost dwarfs a hash's own).
_BATCH_SIZE = 4096


class FindNearCopies(beam.PTransform):
  """Lists of validated records to the files of their near-copy groups, as (content bucket,
  (source_sha256, representative)) pairs for GroupCopies's multimap side input; and, tagged
  'found', one element: the distance used and what the grouping's bounds left out.

  The distance is --near_distance, or one for the ``num_listed`` inputs (near_copies.
  distance_for). The DirectRunner plans in memory instead (in_memory_planning)."""

  def __init__(self, settings: Settings, num_listed: beam.PCollection, records_per_bucket: int):
    super().__init__()
    self._given = settings.near_distance
    self._num_listed = num_listed
    self._records_per_bucket = records_per_bucket

  def expand(self, records):
    distance = near_distance(records.pipeline, self._num_listed, self._given)
    hashes = records | 'PerceptualHashes' >> beam.Map(planning.perceptual_hashes)  # a list per batch
    found = grouped(hashes, distance, one_machine=False)
    pairs = found['pairs'] | 'ByContentBucket' >> beam.Map(planning.near_pair_bucket,
                                                           beam.pvalue.AsSingleton(self._num_listed),
                                                           self._records_per_bucket)
    summary = found[tags.NEAR_COPIES] | 'WithDistance' >> beam.Map(left_out, beam.pvalue.AsSingleton(distance))
    return {'pairs': pairs, 'found': summary}


def near_distance(pipeline: beam.Pipeline, num_listed: beam.PCollection, given: Optional[int]) -> beam.PCollection:
  """One element: the distance within which hashes are near, ``given`` or the one for the
  ``num_listed`` inputs (near_copies.distance_for)."""
  if given:
    return pipeline | 'Distance' >> beam.Create([given])
  return num_listed | 'Distance' >> beam.Map(near_copies.distance_for, perceptual_hash.NEAR_DISTANCE)


def grouped(hashes: beam.PCollection, distance: beam.PCollection, one_machine: bool) -> Dict[str, beam.PCollection]:
  """Lists of (source_sha256, phash) to NearCopies's output: in memory on ``one_machine`` (the
  DirectRunner), by NearCopies's bounded shuffles elsewhere."""
  if one_machine:
    return hashes | 'Group' >> NearCopiesOnOneMachine(beam.pvalue.AsSingleton(distance))
  return hashes | 'EachHash' >> beam.FlatMap(list) | 'Group' >> NearCopies(beam.pvalue.AsSingleton(distance))


def left_out(summary: Mapping[str, Any], distance: int) -> Dict[str, Any]:
  """FindNearCopies's 'found' element: the distance, and what the grouping's bounds left out."""
  return {'distance': distance, 'left_out': {name: summary[name] for name in LEFT_OUT if summary.get(name)}}


class NearCopies(beam.PTransform):
  """(source_sha256, phash) per validated record to (source_sha256, representative) for every
  distinct file of a group of near copies holding two files or more (its hashes within
  ``distance`` bits, step by step); tagged tags.NEAR_COPIES, one summary dict (NearCopySummary).

  Returns {'pairs': ..., tags.NEAR_COPIES: ...}."""

  def __init__(self, distance: int, key_cap: int = near_copies.KEY_CAP, group_cap: int = near_copies.GROUP_CAP,
               same_hash_cap: int = near_copies.SAME_HASH_CAP, rounds: int = near_copies.ROUNDS):
    super().__init__()
    if rounds < 1:
      raise ValueError('NearCopies needs a label round at least: the last one counts what is unsettled')
    self._distance = distance
    self._key_cap = key_cap
    self._group_cap = group_cap
    self._same_hash_cap = same_hash_cap
    self._rounds = rounds

  def expand(self, pairs):
    nodes = (pairs
             | 'OneHashPerFile' >> beam.CombinePerKey(min)
             | 'ByHash' >> beam.MapTuple(lambda sha, phash: (phash, sha))
             | 'SameHash' >> beam.CombinePerKey(Bounded(self._same_hash_cap))
             | 'Nodes' >> beam.FlatMap(_node, self._same_hash_cap).with_outputs(_COUNTS, _SEVERAL, main='nodes'))
    first = (nodes.nodes
             | 'Batch' >> beam.BatchElements(min_batch_size=_BATCH_SIZE, max_batch_size=_BATCH_SIZE)
             | 'BandKeys' >> beam.FlatMap(_band_keys, self._distance))
    dense = (first
             | 'KeySizes' >> beam.MapTuple(lambda key, batch: (key, len(batch)))
             | 'SumPerKey' >> beam.CombinePerKey(sum)
             | 'Dense' >> beam.FlatMap(_dense, self._key_cap))
    compared = (first
                | 'SplitDense' >> beam.FlatMap(_split_dense, self._distance, beam.pvalue.AsMultiMap(dense))
                | 'GroupByBand' >> beam.GroupByKey()
                | 'Compare' >> beam.FlatMap(_compare, self._distance, self._key_cap, self._group_cap
                                            ).with_outputs(_COUNTS, main='told'))
    states = ((nodes.nodes | 'ByNode' >> beam.Map(lambda node: (node[0], node)), compared.told)
              | 'NodesAndLinks' >> beam.Flatten()
              | 'GroupByNode' >> beam.GroupByKey()
              | 'FirstState' >> beam.FlatMap(_first_state))
    for index in range(self._rounds):
      last = index == self._rounds - 1
      states = (states
                | f'Offers{index}' >> beam.FlatMapTuple(near_copies.offers)
                | f'GroupByNode{index}' >> beam.GroupByKey()
                | f'Relabel{index}' >> beam.FlatMap(_relabel, last).with_outputs(_COUNTS, main='states'))
      unsettled = states[_COUNTS]
      states = states.states
    groups = (states
              | 'ByLabel' >> beam.MapTuple(lambda phash, state: (state.label, (phash, state.sha256, state.count)))
              | 'GroupMembers' >> beam.CombinePerKey(Bounded(self._group_cap))
              | 'Groups' >> beam.FlatMap(_group, self._group_cap).with_outputs(_COUNTS, _LABELLED, main='pairs'))
    several = ({'shas': nodes[_SEVERAL], 'label': groups[_LABELLED]}
               | 'JoinSeveral' >> beam.CoGroupByKey()
               | 'MapBack' >> beam.FlatMapTuple(_map_back))
    out = (groups.pairs, several) | 'Together' >> beam.Flatten()
    summary = ((nodes[_COUNTS], dense | 'CountDense' >> beam.Map(lambda _: ('dense_keys', 1)), compared[_COUNTS],
                unsettled, groups[_COUNTS], out | 'AsMembers' >> beam.Map(lambda pair: (_MEMBER, pair)))
               | 'AllCounts' >> beam.Flatten()
               | 'Summary' >> beam.CombineGlobally(NearCopySummary()))
    return {'pairs': out, tags.NEAR_COPIES: summary}


class NearCopiesOnOneMachine(beam.PTransform):
  """NearCopies's output for a runner that holds every element in one process (the
  DirectRunner), from lists of (source_sha256, phash) pairs: read whole as a side input of one
  step that groups them in memory (near_copies.groups_on_one_machine). One step instead of
  NearCopies's twenty-odd shuffles, each a fixed cost there (a combiner's gathering would be
  five), and a list at a time, as Beam's cost per element exceeds a pair's own. The summary
  holds the same counters, without a listing."""

  def __init__(self, distance: Any):
    super().__init__()
    self._distance = distance  # a side input of one int

  def expand(self, pairs):
    found = (pairs.pipeline
             | 'Once' >> beam.Create([None])
             | 'Group' >> beam.FlatMap(_group_in_memory, beam.pvalue.AsList(pairs), self._distance).with_outputs(
                 tags.NEAR_COPIES, main='pairs'))
    return {'pairs': found.pairs, tags.NEAR_COPIES: found[tags.NEAR_COPIES]}


def _group_in_memory(_, lists: Iterable[List[Tuple[str, str]]], distance: int) -> Iterator[Any]:
  pairs, summary = near_copies.groups_on_one_machine(itertools.chain.from_iterable(lists), distance)
  yield from pairs
  yield beam.pvalue.TaggedOutput(tags.NEAR_COPIES, summary)


class Bounded(beam.CombineFn):
  """How many inputs, and the inputs themselves (sorted) while there are at most ``cap``: one
  hash's distinct files (an all-black hash may have millions), one label's nodes (a chain of
  near-uniform frames may have millions)."""

  def __init__(self, cap: int):
    self._cap = cap

  def create_accumulator(self) -> Tuple[int, Optional[List[Any]]]:
    return 0, []

  def add_input(self, accumulator, item: Any):
    count, items = accumulator
    if items is not None:
      items.append(item)
    return count + 1, items if count + 1 <= self._cap else None

  def merge_accumulators(self, accumulators):
    count, items = 0, []
    for more, listed in accumulators:
      count += more
      if items is not None and listed is not None and count <= self._cap:
        items.extend(listed)
      else:
        items = None
    return count, items

  def extract_output(self, accumulator) -> Tuple[int, Optional[List[Any]]]:
    count, items = accumulator
    return count, sorted(items) if items is not None else None


def _node(item: Tuple[Any, Any], cap: int) -> Iterator[Any]:
  """A hash's node, its files if it has several, or the counts of a near-uniform one."""
  phash, (count, shas) = item
  node = near_copies.node_or_uniform(phash, count, shas, cap)
  if node is None:
    yield beam.pvalue.TaggedOutput(_COUNTS, ('uniform_hashes', 1))
    yield beam.pvalue.TaggedOutput(_COUNTS, ('uniform_images', count))
    return
  yield tuple(node)
  if count > 1:
    yield beam.pvalue.TaggedOutput(_SEVERAL, (node.phash, tuple(shas)))


def _band_keys(batch: List[tuple], distance: int) -> List[Any]:
  """A batch of nodes as (first-level key, its hashes of the batch) pairs."""
  return _by_key((key, node[0]) for node in batch for key in near_copies.band_keys(node[0], distance))


def _by_key(pairs: Iterable[Tuple[Any, int]]) -> List[Tuple[Any, List[int]]]:
  by_key: Dict[Any, List[int]] = {}
  for key, phash in pairs:
    by_key.setdefault(key, []).append(phash)
  return list(by_key.items())


def _dense(item: Tuple[Any, Any], cap: int) -> Iterator[Any]:
  key, count = item
  tags.records_per_key(BAND_TOTALS).update(count)
  if count > cap:
    yield key, count


def _split_dense(item: Tuple[Any, Any], distance: int, dense: Mapping[Any, Iterable[int]]
                 ) -> List[Tuple[Tuple[int, ...], tuple]]:
  """A batch's hashes under their first-level key, or under the key's sub-band keys where it is dense."""
  key, batch = item
  if not any(True for _ in dense[key]):
    return [(key, batch)]
  return _by_key((sub, phash) for phash in batch for sub in near_copies.sub_band_keys(phash, distance, key))


def _compare(item: Tuple[Any, Any], distance: int, key_cap: int, group_cap: int
             ) -> Iterator[Any]:
  """One key's stars as what each member tells the first round; the hashes it did not hold, tagged."""
  key, batches = item
  held = [0]

  def counted() -> Iterator[int]:
    for batch in batches:
      held[0] += len(batch)
      yield from batch

  for out in near_copies.compare_key(counted(), distance, near_copies.free_bits(key, distance), key_cap, group_cap):
    if isinstance(out, int):
      yield beam.pvalue.TaggedOutput(_COUNTS, ('over_cap_hashes', out))
    else:
      yield from near_copies.links(out)
  tags.records_per_key(SUB_BANDS if len(key) == 4 else BANDS).update(held[0])


def _first_state(item: Tuple[Any, Any]) -> Iterator[Tuple[int, near_copies.State]]:
  """A node's state if some key linked it: its node (a 3-tuple) and its links (2-tuples) met here."""
  phash, values = item
  node, told = None, []
  for value in values:
    if len(value) == 3:
      node = value
    else:
      told.append(value)
  tags.records_per_key(NODES).update(len(told) + 1)
  state = near_copies.first_state(node, told)
  if state is not None:
    yield phash, state


def _relabel(item: Tuple[Any, Any], last: bool) -> Iterator[Any]:
  phash, messages = item[0], list(item[1])
  tags.records_per_key(ROUNDS).update(len(messages))
  state, unsettled = near_copies.relabel(messages)
  yield phash, state
  if last and unsettled:
    yield beam.pvalue.TaggedOutput(_COUNTS, ('unsettled_edges', unsettled))


def _group(item: Tuple[Any, Any], cap: int) -> Iterator[Any]:
  """A group's pairs (a node of several files goes to MapBack with its label, tagged), or its
  count as capped: too large to be copies of one picture, or marked so by a key."""
  label, (count, nodes) = item
  tags.records_per_key(GROUPS).update(count)
  if near_copies.is_capped(label) or nodes is None or count > cap:
    yield beam.pvalue.TaggedOutput(_COUNTS, ('capped_groups', 1))
    return
  if len(nodes) < 2:
    return
  for phash, sha, files in nodes:
    if files == 1:
      yield sha, label
    else:
      yield beam.pvalue.TaggedOutput(_LABELLED, (phash, label))


def _map_back(phash: int, joined: Mapping[str, List[Any]]) -> Iterator[Tuple[str, str]]:
  """The files of a hash shared by several: to their group's label, or, in no group, to their smallest."""
  for shas in joined['shas']:
    label = min(joined['label'], default=shas[0])
    for sha in shas:
      yield sha, label


class NearCopySummary(beam.CombineFn):
  """What beam_pipeline.json says of near copies: how many groups and files in them, the
  counters (COUNTERS), and the first MAX_LISTED_DUPLICATE_GROUPS groups' files (sorted; a
  group's first file is its representative), never more groups than twice that at once.
  Inputs: (counter, number), or (_MEMBER, (sha256, representative)) per output pair."""
  _LISTED = run_totals.MAX_LISTED_DUPLICATE_GROUPS

  def create_accumulator(self) -> Tuple[Dict[str, int], Dict[str, List[str]]]:
    return dict.fromkeys(('groups', 'images_in_groups', *COUNTERS), 0), {}

  def add_input(self, accumulator, item: Tuple[str, Any]):
    counts, listed = accumulator
    name, value = item
    if name != _MEMBER:
      counts[name] += value
      return accumulator
    sha, representative = value
    counts['images_in_groups'] += 1
    counts['groups'] += sha == representative
    listed.setdefault(representative, []).append(sha)
    return counts, self._first(listed) if len(listed) > 2 * self._LISTED else listed

  def _first(self, listed: Dict[str, List[str]]) -> Dict[str, List[str]]:
    """The groups of the smallest representatives: one dropped here can never be among the
    first of the total, which holds every smaller one too."""
    return {representative: listed[representative] for representative in sorted(listed)[:self._LISTED]}

  def merge_accumulators(self, accumulators):
    counts, listed = self.create_accumulator()
    for more, groups in accumulators:
      for name, value in more.items():
        counts[name] += value
      for representative, shas in groups.items():
        listed.setdefault(representative, []).extend(shas)
      listed = self._first(listed)
    return counts, listed

  def extract_output(self, accumulator) -> Dict[str, Any]:
    counts, listed = accumulator
    return {**counts, 'listed_groups': [sorted(listed[representative]) for representative in sorted(listed)]}
