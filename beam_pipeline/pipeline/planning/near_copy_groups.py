"""Near copies at Dataflow scale (issue 37, 59): every file's (source_sha256, phash, priority, colour) in,
and for every file in a group of near copies (source_sha256, the group's representative) out, so
that a group never straddles two splits. The steps are core/planning/near_copies.py's; here each
meets its data by a shuffle in which no key, list or element grows with the input:

* files cross the shuffles a table at a time (core/planning/near_copy_nodes.py: a file or a node
  per element costs Beam's coder and Python several times its own work): one hash per file
  where a file's copies meet, by the slot of its sha256; then the nodes of a node slot, a share
  of the (hash, colour) space (near_copy_nodes.slots_for: never more than about 200,000 nodes);
* band keys, holding their members a slot at a time as the bytes of an int64 array
  (near_copies.member_rows), counted by a combiner; the keys' sizes (bands x 2^bits of them at
  most, not N) reach the split as one side input: a key over the cap is split into sub-band keys,
  the others go in packs of at most the cap, and so do small sub-band keys, their sizes looked up
  key by key (_packs);
* each key finds its members' anchors holding at most the cap (near_copies.key_anchors), and
  what it found meets the nodes in their slot, where each node takes the best anchor its keys
  found (near_copy_nodes.best_anchors);
* a group's members meet by anchor in a combiner that stops listing them past GROUP_CAP images;
  a node of one file that neither has an anchor nor is one (most images) does not go there;
* the summary is a CombineGlobally that lists the first groups only.

A key's members are iterated twice when it is over the cap: a GroupByKey's values can be, on
every runner.
"""
import itertools
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

import apache_beam as beam
import numpy as np

from beam_pipeline.pipeline import tags
from beam_pipeline.pipeline.planning import content_groups
from beam_pipeline.core.images import perceptual_hash
from beam_pipeline.core.output import run_totals
from beam_pipeline.core.planning import near_copies, near_copy_nodes, near_index
from beam_pipeline.core.settings import Settings

# The planning stages whose largest key tags.records_per_key reports.
BANDS, SUB_BANDS, NODES, GROUPS = 'NearBands', 'NearSubBands', 'NearNodes', 'NearGroups'
BAND_TOTALS = 'NearBandTotals'  # every first-level key before the dense ones are split
# What the grouping's bounds left out of it (beam_pipeline.json's left_out): near-uniform images,
# hashes a key could not hold that found no anchor among those it held, hashes whose comparison
# was cut short, and the sets of look-alikes too large to keep in one split and their images.
LEFT_OUT = ('uniform_images', 'over_cap_hashes', 'cut_short_hashes', 'look_alike_sets', 'look_alike_images')
COUNTERS = ('uniform_hashes', 'dense_keys') + LEFT_OUT
_COUNTS, _SEVERAL, _LABELLED, _MEMBER = 'counts', 'several', 'labelled', 'member'
# Lists of hashes (a validation batch's, or a slot's of the catalog) are joined this many at a time
# before they are keyed, so that each slot's files of a list cross the shuffle as one element
# (Beam's per-element cost dwarfs a hash's own).
_LISTS = 16


def find_near_copies(steps: Any, records: Any, settings: Settings, num_listed: Any, records_per_bucket: int
                     ) -> Dict[str, Any]:
  """Lists of validated records to the files of their near-copy groups, as (content bucket,
  (source_sha256, representative)) pairs for GroupCopies's multimap side input ('pairs'); and
  ('found') one element: the distance used and what the grouping's bounds left out.

  The distance is --near_distance, or one for the ``num_listed`` inputs (near_copies.
  distance_for); a group holds at most near_copies.group_cap images of them.

  Args:
    steps: the executor (steps.BeamSteps, by NearCopies's shuffles, or InMemorySteps).
    records: lists of validated records.
    settings: the conversion's settings.
    num_listed: one element: how many inputs were listed.
    records_per_bucket: about the most records a content bucket holds.
  """
  distance = near_distance(steps, num_listed, settings.near_distance)
  cap = largest_group(steps, num_listed, settings)
  hashes = steps.map('PerceptualHashes', records, content_groups.perceptual_hashes)  # a list per batch
  found = steps.near_copies(hashes, distance, cap)
  pairs = steps.map('ByContentBucket', found['pairs'], content_groups.near_pair_bucket,
                    steps.singleton(num_listed), records_per_bucket)
  summary = steps.map('WithDistance', found[tags.NEAR_COPIES], left_out, steps.singleton(distance),
                      steps.singleton(cap))
  return {'pairs': pairs, 'found': summary}


def near_distance(steps: Any, num_listed: Any, given: Optional[int]) -> Any:
  """One element: the distance within which hashes are near, ``given`` or the one for the
  ``num_listed`` inputs (near_copies.distance_for)."""
  if given:
    return steps.create('Distance', [given])
  return steps.map('Distance', num_listed, near_copies.distance_for, perceptual_hash.NEAR_DISTANCE)


def largest_group(steps: Any, num_listed: Any, settings: Settings) -> Any:
  """One element: the most images a group of near copies of the ``num_listed`` inputs may hold
  (near_copies.group_cap, for the smallest of the splits asked for)."""
  return steps.map('LargestGroup', num_listed, near_copies.group_cap, min(settings.splits.fractions))


def grouped(hashes: beam.PCollection, distance: beam.PCollection, cap: beam.PCollection, one_machine: bool,
            one_per_file: bool = False, indexed: bool = False) -> Dict[str, beam.PCollection]:
  """Lists of (source_sha256, phash, priority, colour) to NearCopies's output: in memory on
  ``one_machine``, by NearCopies's bounded shuffles elsewhere.

  Args:
    hashes: lists of (source_sha256, phash, priority, colour), a batch's each (content_groups.perceptual_hashes).
    distance: one element: the distance within which hashes are near (near_distance).
    cap: one element: the most images a group may hold (largest_group).
    one_machine: the runner holds every element in one process (the DirectRunner), where a shuffle spreads nothing.
    one_per_file: each file's hash comes once (NearCopies's ``one_per_file``).
    indexed: also return what the near-copy index is built from (NearCopies's ``indexed``).
  """
  distance, cap = beam.pvalue.AsSingleton(distance), beam.pvalue.AsSingleton(cap)
  if one_machine:
    return hashes | 'Group' >> NearCopiesOnOneMachine(distance, cap, indexed)
  return hashes | 'Group' >> NearCopies(distance, cap, one_per_file=one_per_file, indexed=indexed)


def left_out(summary: Mapping[str, Any], distance: int, cap: int) -> Dict[str, Any]:
  """find_near_copies's 'found' element: the distance, the most images a group may hold, the hash
  compared (perceptual_hash.NAME), and what the grouping's bounds left out."""
  return {'distance': distance, 'largest_group': cap, 'hash': perceptual_hash.NAME,
          'left_out': {name: summary[name] for name in LEFT_OUT if summary.get(name)}}


class NearCopies(beam.PTransform):
  """Lists of (source_sha256, phash, priority, colour), of validated records, to (source_sha256,
  representative) for every distinct file of a group of near copies holding two files or more (an anchor and
  the hashes within ``distance`` bits that take it as theirs, near_copies), at most ``cap``
  images; tagged tags.NEAR_COPIES, one summary dict (NearCopySummary). ``distance`` and ``cap``
  may be side inputs of one int.

  Returns {'pairs': ..., tags.NEAR_COPIES: ...}."""

  def __init__(self, distance: Any, cap: Any = near_copies.GROUP_CAP, key_cap: int = near_copies.KEY_CAP,
               same_hash_cap: int = near_copies.SAME_HASH_CAP, one_per_file: bool = False, indexed: bool = False):
    """A step of bounded shuffles.

    Args:
      distance: the distance within which hashes are near.
      cap: the most images a group may hold: a larger group's images are counted as look-alikes, not grouped.
      key_cap: the most hashes one key holds for comparison: a band key with more is split into sub-band keys, and
        a key's members past it are compared only with those held (near_copies.key_anchors).
      same_hash_cap: the most distinct files a hash may be shared by; one shared by more is near-uniform (an
        all-black frame), its images counted, not grouped.
      one_per_file: each file's hash comes once (an update's, made one per file where its catalog meets its new
        records), so the shuffle that keeps a file's smallest is left out; otherwise a file may come more than once
        (copies of one picture, each validated).
      indexed: also return what the near-copy index is built from (indexed_near_copies.BuildIndex): 'files', the
        tables of files grouped, and 'anchors', near_index.FOUND rows of the nodes that have an anchor.
    """
    super().__init__()
    self._distance = distance
    self._cap = cap
    self._key_cap = key_cap
    self._same_hash_cap = same_hash_cap
    self._one_per_file = one_per_file
    self._indexed = indexed

  def expand(self, batches):
    slots = beam.pvalue.AsSingleton(batches
                                    | 'Sizes' >> beam.Map(len)
                                    | 'CountFiles' >> beam.CombineGlobally(sum)
                                    | 'NodeSlots' >> beam.Map(near_copy_nodes.slots_for))
    files = (batches
             | 'Rebatch' >> beam.BatchElements(min_batch_size=_LISTS, max_batch_size=_LISTS)
             | 'Tables' >> beam.Map(lambda lists: near_copy_nodes.file_table(itertools.chain.from_iterable(lists))))
    if not self._one_per_file:  # a file validated twice: its smallest hash, where all its copies meet
      files = (files
               | 'ByFile' >> beam.FlatMap(_by_slot, near_copy_nodes.by_file_slot, slots)
               | 'GroupByFile' >> beam.GroupByKey()
               | 'SmallestPerFile' >> beam.MapTuple(
                   lambda _, tables: near_copy_nodes.smallest_per_file(np.concatenate([_table(t) for t in tables]))))
    nodes = (files
             | 'ByNodeSlot' >> beam.FlatMap(_by_slot, near_copy_nodes.by_slot, slots)
             | 'GroupByNodeSlot' >> beam.GroupByKey()
             | 'Nodes' >> beam.FlatMap(_nodes, self._same_hash_cap).with_outputs(_COUNTS, _SEVERAL, main='slots'))
    first = nodes.slots | 'BandKeys' >> beam.FlatMap(_band_keys, self._distance)
    sizes = (first
             | 'KeySizes' >> beam.MapTuple(lambda key, batch: (key, len(_rows(batch))))
             | 'SumPerKey' >> beam.CombinePerKey(sum))
    dense = sizes | 'Dense' >> beam.FlatMap(_dense, self._key_cap)
    packs = sizes | 'AllKeySizes' >> beam.combiners.ToList() | 'Packs' >> beam.Map(_packs, self._key_cap)
    split = first | 'SplitDense' >> beam.FlatMap(_split_dense, self._distance, beam.pvalue.AsSingleton(packs))
    sub_packs = (split
                 | 'SubKeySizes' >> beam.FlatMapTuple(
                     lambda key, batch: [(key, len(_rows(batch)))] if len(key) == 4 else [])
                 | 'SumPerSubKey' >> beam.CombinePerKey(sum)
                 | 'ByDenseKey' >> beam.MapTuple(lambda key, count: (key[:3], (key, count)))
                 | 'SubKeysOfDenseKey' >> beam.GroupByKey()
                 | 'SubPacks' >> beam.FlatMapTuple(lambda _, sizes: _packs(sizes, self._key_cap).items()))
    anchored = (split
                | 'PackSubBands' >> beam.Map(_sub_packed, beam.pvalue.AsMultiMap(sub_packs))
                | 'GroupByBand' >> beam.GroupByKey()
                | 'Anchors' >> beam.FlatMap(_anchors, self._distance, self._key_cap, slots).with_outputs(
                    _COUNTS, main='told'))
    joined = {'nodes': nodes.slots, 'told': anchored.told} | 'NodesAndAnchors' >> beam.CoGroupByKey()
    found = grouped_members(joined | 'BestAnchors' >> beam.FlatMapTuple(_best_anchors), nodes[_SEVERAL],
                            [nodes[_COUNTS], dense | 'CountDense' >> beam.Map(lambda _: ('dense_keys', 1)),
                             anchored[_COUNTS]], self._cap)
    if self._indexed:  # what the near-copy index is built from: every file, and each node's anchor
      found.update(files=files, anchors=joined | 'IndexAnchors' >> beam.FlatMapTuple(_told_anchors))
    return found


def grouped_members(members: beam.PCollection, several: beam.PCollection, counts: List[beam.PCollection],
                    cap: Any) -> Dict[str, beam.PCollection]:
  """NearCopies's output from its nodes in groups.

  Args:
    members: the nodes in groups (near_copy_nodes.Member), under their anchor's key.
    several: the files of the nodes of several ((DCT half, colour), sha256s).
    counts: the counts found on the way ((counter, number) elements).
    cap: the most images a group may hold (a side input).
  """
  groups = (members
            | 'GroupMembers' >> beam.CombinePerKey(Bounded(near_copies.GROUP_CAP, weight=_files))
            | 'Groups' >> beam.FlatMap(_group, cap).with_outputs(_COUNTS, _LABELLED, main='pairs'))
  mapped = ({'shas': several, 'label': groups[_LABELLED]}
            | 'JoinSeveral' >> beam.CoGroupByKey()
            | 'MapBack' >> beam.FlatMapTuple(_map_back))
  out = (groups.pairs, mapped) | 'Together' >> beam.Flatten()
  summary = ((*counts, groups[_COUNTS], out | 'AsMembers' >> beam.Map(lambda pair: (_MEMBER, pair)))
             | 'AllCounts' >> beam.Flatten()
             | 'Summary' >> beam.CombineGlobally(NearCopySummary()))
  return {'pairs': out, tags.NEAR_COPIES: summary}


class NearCopiesOnOneMachine(beam.PTransform):
  """NearCopies's output for a runner that holds every element in one process (the
  DirectRunner), from lists of (source_sha256, phash, priority, colour): read whole as a side input of
  one step that groups them in memory (near_copies.groups_on_one_machine), instead of NearCopies's
  shuffles, each a fixed cost there, and a list at a time, as Beam's cost per element exceeds a
  hash's own. The summary holds the same counters, without a listing; with ``indexed``, what
  the near-copy index is built from is NearCopies's too, so that an update on one machine builds
  the index without NearCopies's shuffles."""

  def __init__(self, distance: Any, cap: Any, indexed: bool = False):
    super().__init__()
    self._distance = distance  # side inputs of one int each
    self._cap = cap
    self._indexed = indexed

  def expand(self, pairs):
    outputs = (tags.NEAR_COPIES, 'files', 'anchors') if self._indexed else (tags.NEAR_COPIES,)
    found = (pairs.pipeline
             | 'Once' >> beam.Create([None])
             | 'Group' >> beam.FlatMap(_group_in_memory, beam.pvalue.AsList(pairs), self._distance, self._cap,
                                       self._indexed).with_outputs(*outputs, main='pairs'))
    return {'pairs': found.pairs, **{tag: found[tag] for tag in outputs}}


def _group_in_memory(_, lists: Iterable[List[Tuple[str, str, int, str]]], distance: int, cap: int,
                     indexed: bool = False) -> Iterator[Any]:
  """The pairs of near_copies.groups_on_one_machine, then its summary tagged tags.NEAR_COPIES;
  with ``indexed``, the table of every file tagged 'files' and the FOUND rows of the nodes
  anchored to another tagged 'anchors' (NearCopies's ``indexed`` outputs).

  Args:
    _: the one element that starts the step; the hashes come as a side input.
    lists: every list of (source_sha256, phash, priority, colour), each file's once where ``indexed``.
    distance: the distance within which hashes are near.
    cap: the most images a group may hold.
    indexed: also give what the near-copy index is built from.
  """
  files = list(itertools.chain.from_iterable(lists))
  found = near_copies.groups_on_one_machine(files, distance, cap)
  yield from found.pairs
  yield beam.pvalue.TaggedOutput(tags.NEAR_COPIES, found.counts)
  if indexed:
    yield beam.pvalue.TaggedOutput('files', near_copy_nodes.file_table(files))
    if found.ranked is not None:
      yield beam.pvalue.TaggedOutput('anchors', near_index.told_by(found.ranked))


def _files(member: Tuple[int, str, int, int]) -> int:
  """A group member's weight: its hash's distinct files."""
  return member[3]


class Bounded(beam.CombineFn):
  """The sum of the inputs' ``weight``, and the inputs themselves (sorted) while that is at most
  ``cap``: one anchor's members (a set of look-alikes may have millions of images)."""

  def __init__(self, cap: int, weight: Callable[[Any], int]):
    self._cap = cap
    self._weight = weight

  def create_accumulator(self) -> Tuple[int, Optional[List[Any]]]:
    return 0, []

  def add_input(self, accumulator, item: Any):
    count, items = accumulator
    count += self._weight(item)
    if items is not None:
      items.append(item)
    return count, items if count <= self._cap else None

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


def _table(data: bytes) -> np.ndarray:
  """A table of files (near_copy_nodes.FILES) as it crossed a shuffle."""
  return np.frombuffer(data, dtype=near_copy_nodes.FILES)


def _by_slot(table: np.ndarray, split: Callable[[np.ndarray, int], Iterator[Tuple[int, np.ndarray]]], slots: int
             ) -> Iterator[Tuple[int, bytes]]:
  """A table's files under their slots as ``split`` finds them (near_copy_nodes.by_file_slot,
  where every copy of a file meets, or by_slot, a node's), each slot's rows as bytes."""
  for slot, rows in split(table, slots):
    yield slot, rows.tobytes()


def _nodes(item: Tuple[int, Iterable[bytes]], same_hash_cap: int) -> Iterator[Any]:
  """A node slot's nodes, as (slot, the bytes of its near_copy_nodes.NODES rows); each node of
  several files, tagged, with its files; the near-uniform hashes' counts, tagged."""
  slot, tables = item
  found = near_copy_nodes.nodes_of(np.concatenate([_table(table) for table in tables]), same_hash_cap)
  tags.records_per_key(NODES).update(len(found.nodes))
  if found.uniform_hashes:
    yield beam.pvalue.TaggedOutput(_COUNTS, ('uniform_hashes', found.uniform_hashes))
    yield beam.pvalue.TaggedOutput(_COUNTS, ('uniform_images', found.uniform_images))
  for several in found.several:
    yield beam.pvalue.TaggedOutput(_SEVERAL, several)
  if len(found.nodes):
    yield slot, found.nodes.tobytes()


def _node_table(data: bytes) -> np.ndarray:
  return np.frombuffer(data, dtype=near_copy_nodes.NODES)


def _band_keys(item: Tuple[int, bytes], distance: int) -> List[Tuple[Tuple[int, int], bytes]]:
  """A slot's nodes as (first-level key of their blocks halves, the bytes of its nodes' member rows of the slot)."""
  _, nodes = item
  rows = near_copy_nodes.member_rows(_node_table(nodes))
  return [(key, rows.tobytes()) for key, rows in near_copies.keyed_rows(rows, near_copies.bands(distance))]


def _rows(batch: bytes) -> np.ndarray:
  """A key's members of one batch, as _band_keys sent them."""
  return np.frombuffer(batch, dtype=np.int64).reshape(-1, 4)


def _dense(item: Tuple[Any, Any], cap: int) -> Iterator[Any]:
  key, count = item
  tags.records_per_key(BAND_TOTALS).update(count)
  if count > cap:
    yield key, count


def _packs(sizes: Iterable[Tuple[Tuple[int, ...], int]], cap: int) -> Dict[Tuple[int, ...], Tuple[int, ...]]:
  """Each key of at most ``cap`` members to the pack of keys it is compared in: the keys that
  differ in their last value only (a band's first-level keys, a dense key's sub-band keys of one
  sub-band), in value order, as many as hold at most ``cap`` members together, under the first
  one's key. A key's comparisons cost near_copies.anchors a few numpy calls per step of its
  longest run whatever its size, so a pack of small keys costs about what one key does
  (benchmarks/README.md, Near copies at scale); a key over ``cap`` is in none (a dense
  first-level key is split into sub-band keys; a sub-band key over it keeps its best-ranked).
  One entry per key: at most 2^bits of a band or sub-band at once."""
  packs: Dict[Tuple[int, ...], Tuple[int, ...]] = {}
  pack, size = None, 0
  for key, count in sorted(sizes):
    if count > cap:
      continue
    if pack is None or pack[:-1] != key[:-1] or size + count > cap:
      pack, size = key, 0
    packs[key] = pack
    size += count
  return packs


def _split_dense(item: Tuple[Any, bytes], distance: int, packs: Mapping[Tuple[int, ...], Tuple[int, ...]]
                 ) -> List[Tuple[Any, bytes]]:
  """A batch's members under their first-level key's pack (_packs), or under the key's sub-band
  keys where it is dense."""
  key, batch = item
  if key in packs:
    return [(packs[key], batch)]
  return [(sub, rows.tobytes())
          for sub, rows in near_copies.keyed_rows(_rows(batch), near_copies.sub_bands(distance, key[0]), key)]


def _sub_packed(item: Tuple[Any, bytes], packs: Mapping[Tuple[int, ...], Iterable[Tuple[int, ...]]]
                ) -> Tuple[Any, bytes]:
  """A sub-band key's members under its pack (_packs, looked up key by key), if it is in one;
  a first-level pack's, or a sub-band key's over the cap, as they are."""
  key, batch = item
  if len(key) == 4:
    for pack in packs[key]:
      return pack, batch
  return item


class _Members:
  """A key's member rows from its batches, as often as they are iterated; how many, once they were."""

  def __init__(self, batches: Iterable[bytes]):
    self._batches = batches
    self.count = 0

  def __iter__(self) -> Iterator[np.ndarray]:
    count = 0
    for batch in self._batches:
      rows = _rows(batch)
      count += len(rows)
      yield rows
    self.count = count


def _anchors(item: Tuple[Any, Any], distance: int, key_cap: int, slots: int) -> Iterator[Any]:
  """What one key (or pack of keys) told of its members (near_copy_nodes.Told), a list per node slot;
  its counts, tagged.

  Args:
    item: (key, its members' batches of member rows).
    distance: the distance within which hashes are near.
    key_cap: the most members the key holds for comparison (near_copies.key_anchors).
    slots: how many node slots there are (near_copy_nodes.slots_for).
  """
  key, batches = item
  members = _Members(batches)
  told: Dict[int, List[near_copy_nodes.Told]] = {}
  for out in near_copies.key_anchors(members, distance, near_copies.free_bits(key, distance), key_cap):
    if isinstance(out[0], str):
      yield beam.pvalue.TaggedOutput(_COUNTS, out)
    else:
      told.setdefault(near_copy_nodes.node_slot(*out[0], slots), []).append(out)
  yield from told.items()
  tags.records_per_key(SUB_BANDS if len(key) == 4 else BANDS).update(members.count)


def _best_anchors(_: int, joined: Mapping[str, Iterable[Any]]) -> Iterator[near_copy_nodes.Member]:
  """A node slot's group members (near_copy_nodes.best_anchors), from its nodes and what the keys told of them."""
  nodes = [_node_table(table) for table in joined['nodes']]
  if nodes:
    yield from near_copy_nodes.best_anchors(np.concatenate(nodes), itertools.chain.from_iterable(joined['told']))


def _told_anchors(_: int, joined: Mapping[str, Iterable[Any]]) -> Iterator[np.ndarray]:
  """The near_index.FOUND rows of a node slot's nodes whose keys told of an anchor."""
  nodes = [_node_table(table) for table in joined['nodes']]
  if nodes:
    found = near_index.told_anchors(np.concatenate(nodes),
                                    near_copy_nodes.best_told(itertools.chain.from_iterable(joined['told'])).best)
    if len(found):
      yield found


def _group(item: Tuple[Any, Any], cap: int) -> Iterator[Any]:
  """A group's pairs, each to the group's best file (a node of several files goes to MapBack
  with it, tagged), or its counts as look-alikes: more than ``cap`` images."""
  _, (images, members) = item
  tags.records_per_key(GROUPS).update(images)
  if images < 2:
    return
  if members is None or images > cap:
    yield beam.pvalue.TaggedOutput(_COUNTS, ('look_alike_sets', 1))
    yield beam.pvalue.TaggedOutput(_COUNTS, ('look_alike_images', images))
    return
  representative = members[0][1]
  for _, sha, phash, files, colour in members:
    if files == 1:
      yield sha, representative
    else:
      yield beam.pvalue.TaggedOutput(_LABELLED, ((phash, colour), representative))


def _map_back(key: Tuple[int, int], joined: Mapping[str, List[Any]]) -> Iterator[Tuple[str, str]]:
  """The files of a node of several, to their group's representative."""
  for label in joined['label']:
    for shas in joined['shas']:
      for sha in shas:
        yield sha, label


class NearCopySummary(beam.CombineFn):
  """What beam_pipeline.json says of near copies: how many groups and files in them, the
  counters (COUNTERS), and the first MAX_LISTED_DUPLICATE_GROUPS groups' files (sorted), never
  more groups than twice that at once. Inputs: (counter, number), or (_MEMBER, (sha256,
  representative)) per output pair."""
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
