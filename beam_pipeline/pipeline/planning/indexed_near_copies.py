"""The near-copy index's steps (core/planning/near_index.py): built from a grouping of every
node (BuildIndex), and updated by an --incremental update that queries its changed nodes only
(UpdateIndex), so that a node that did not change crosses no shuffle.

Only changes cross the shuffles: the files a content slot gained or lost go to their node slot,
the nodes that left or joined the bands to the band files of their band values, what the
queries found to the node slots, and the final anchors to the node and band files they change.
Each node file and band file is read by the one worker that takes its key, and written again
only where a change reaches it. Every node slot is read once more for the groups of the whole
dataset, which meet as NearCopies's do (near_copy_groups.grouped_members).
"""
import collections
from typing import Any, Dict, Iterable, Iterator, List, Mapping, NamedTuple, Optional, Tuple

import apache_beam as beam
import numpy as np
from apache_beam.pvalue import AsList, TaggedOutput

from beam_pipeline.pipeline.output import output_dir
from beam_pipeline.pipeline.planning import near_copy_groups
from beam_pipeline.core.images import perceptual_hash
from beam_pipeline.core.output import catalog_lookup, incremental_update, output_layout
from beam_pipeline.core.output.run_record import LookupFile, RunRecord
from beam_pipeline.core.planning import near_copy_nodes, near_index
from beam_pipeline.core.rejections import DamagedOutput

NODES, BANDS = 'nodes', 'bands'  # the kinds of index files, as the written ones are tagged
DRAFT = 'draft'  # a band file written by the queries, its new nodes anchoring themselves, until patched (BANDS)
OVER = 'over'  # a file that would hold more than near_index.MOST_ROWS entries, not written
DROPPED, ADDED = 'dropped', 'added'  # the files a node slot lost and gained (file_changes)
_GONE, _JOINED, _FOUND, _ORPHANS = 'gone', 'joined', 'found', 'orphans'
_FINALS, _TAKEN, _SEVERAL, _COUNTS = 'finals', 'taken', 'several', 'counts'


def file_changes(dropped: List[Tuple[str, str, int, str]], added: List[Tuple[str, str, int, str]], count: int
                 ) -> Iterator[Any]:
  """Files (sha256, phash, priority, colour) that the dataset's grouping lost and gained, as
  FILE_KEY bytes under their node slots, tagged DROPPED and ADDED."""
  for tag, files in ((DROPPED, dropped), (ADDED, added)):
    if files:
      yield from _tagged(tag, _files_by_slot(near_copy_nodes.file_table(files), count))


def index_written(_, files: List[Tuple[str, LookupFile]], distance: int, used: bool
                  ) -> Optional[incremental_update.IndexWritten]:
  """What the commit records of the index: the files written, and whether they were all of it;
  None where a file would have held more than near_index.MOST_ROWS entries (the index is not kept,
  and the next update groups every node again).

  Args:
    _: the one element that starts the step.
    files: (kind, LookupFile) of every index file written.
    distance: the grouping's distance.
    used: whether the update used the index (else it built it whole).
  """
  if any(kind == OVER for kind, _ in files):
    return None
  bands = {found.slot: found for kind, found in files if kind == DRAFT}
  bands.update((found.slot, found) for kind, found in files if kind == BANDS)  # a patched draft's file
  return incremental_update.IndexWritten(
      distance, perceptual_hash.NAME, rebuilt=not used,
      nodes=tuple(sorted((found for kind, found in files if kind == NODES), key=lambda found: found.slot)),
      bands=tuple(bands[slot] for slot in sorted(bands)))


class Place(NamedTuple):
  """Where an index's files are read and written: the output, the run that stages them, and how
  many files each kind has (node files, and files a band)."""
  output: str
  run_id: str
  count: int


def read_checked(output: str, found: LookupFile) -> bytes:
  """The bytes of index file ``found``, checked against the run record's checksum."""
  data = output_dir.read_listed(output, found.file)
  if catalog_lookup.checksum(data) != found.sha256:
    raise DamagedOutput(f'{found.file} is not the near-copy index file the run wrote: its checksum differs')
  return data


def _staged(place: Place, kind: str, slot: int, data: bytes, entries: int) -> Tuple[str, LookupFile]:
  """Stages an index file for the commit: (kind, its LookupFile); or, for a file of more than
  near_index.MOST_ROWS entries, stages nothing: (OVER, its LookupFile without a checksum), and
  the index is not kept.

  Args:
    place: where the index's files go.
    kind: NODES, BANDS or DRAFT.
    slot: the file's slot: its node slot, or band x count + file.
    data: what it holds.
    entries: how many files (a node file) or rows (a band file) it holds.
  """
  band, file = divmod(slot, place.count)
  name = (output_layout.near_node_file(slot, place.count) if kind == NODES
          else output_layout.near_band_file(band, file, place.count))  # BANDS and their DRAFT
  if entries > near_index.MOST_ROWS:
    return OVER, LookupFile(slot=slot, file=name, num_entries=entries, sha256='')
  output_dir.stage_bytes(place.output, place.run_id, name, data)
  return kind, LookupFile(slot=slot, file=name, num_entries=entries, sha256=catalog_lookup.checksum(data))


def _earlier(output: str, found: LookupFile, checked: bool) -> bytes:
  """An index file's earlier bytes, ``checked`` against the run record unless a later step of the run checks them."""
  return read_checked(output, found) if checked else output_dir.read_listed(output, found.file)


def _earlier_slot(sides: Mapping[str, Iterable[Any]], output: str, checked: bool = True) -> near_index.NodeSlot:
  """A node slot's earlier file (_earlier)."""
  for found in sides.get('earlier', ()):
    try:
      return near_index.NodeSlot.decoded(_earlier(output, found, checked))
    except ValueError as e:
      raise DamagedOutput(f'{found.file}: {e}') from e
  return near_index.NodeSlot.empty()


def _earlier_rows(sides: Mapping[str, Iterable[Any]], output: str, checked: bool = True) -> np.ndarray:
  """A band file's earlier rows (_earlier)."""
  for found in sides.get('earlier', ()):
    data = _earlier(output, found, checked)
    if len(data) % near_index.BAND_ROWS.itemsize:
      raise DamagedOutput(f'{found.file} is cut short')
    return np.frombuffer(data, near_index.BAND_ROWS)
  return np.empty(0, near_index.BAND_ROWS)


def _one_array(parts: Iterable[bytes], dtype: np.dtype) -> np.ndarray:
  """Arrays sent as bytes, as one."""
  arrays = [np.frombuffer(data, dtype) for data in parts]
  return np.concatenate(arrays) if arrays else np.empty(0, dtype)


def _rows(sides: Mapping[str, Iterable[bytes]], side: str, dtype: np.dtype) -> np.ndarray:
  """A side's arrays (sent as bytes) as one."""
  return _one_array(sides.get(side, ()), dtype)


def _as_bytes(keyed: Iterable[Tuple[int, np.ndarray]]) -> Iterator[Tuple[int, bytes]]:
  """(key, array) pairs as (key, its bytes), as arrays cross a shuffle."""
  return ((key, rows.tobytes()) for key, rows in keyed)


def _tagged(tag: str, keyed: Iterable[Tuple[int, np.ndarray]]) -> Iterator[Any]:
  """(key, array) pairs as (key, its bytes), tagged."""
  return (TaggedOutput(tag, item) for item in _as_bytes(keyed))


class UpdateIndex(beam.PTransform):
  """From the files each node slot lost and gained (FILE_KEY bytes, keyed by node slot), to the
  groups of near copies of the updated dataset, as NearCopies's output ({'pairs', tags.NEAR_COPIES}),
  and 'files', the (kind, LookupFile) of each index file written again."""

  def __init__(self, earlier: beam.PCollection, place: Place, distance: Any, cap: Any, use: Any):
    """A step that updates the index of the dataset an update updates.

    Args:
      earlier: one element: the run record of the dataset updated, which lists the index's files.
      place: where the index's files are.
      distance: the grouping's distance (a side input).
      cap: the most images a group may hold (a side input).
      use: whether the index is used (a side input): its distance is the grouping's; if not, it does nothing.
    """
    super().__init__()
    self._earlier = earlier
    self._place = place
    self._distance = distance
    self._cap = cap
    self._use = use

  def expand(self, deltas):
    place, distance = self._place, self._distance
    node_files = self._earlier | 'NodeFiles' >> beam.FlatMap(_listed, NODES)
    band_files = self._earlier | 'BandFiles' >> beam.FlatMap(_listed, BANDS)
    changed = ({'earlier': node_files, DROPPED: deltas[DROPPED], ADDED: deltas[ADDED]}
               | 'ChangesBySlot' >> beam.CoGroupByKey()
               | 'ChangedNodes' >> beam.FlatMap(_changed_nodes, place, distance).with_outputs(_GONE, _JOINED, _FOUND))
    bands = {'earlier': band_files, _GONE: changed[_GONE], _JOINED: changed[_JOINED]}
    queried = (bands
               | 'ChangesByBandFile' >> beam.CoGroupByKey()
               | 'Query' >> beam.FlatMap(_queried, place, distance).with_outputs(_FOUND, _ORPHANS, DRAFT))
    orphans = ({**bands, _ORPHANS: queried[_ORPHANS]}
               | 'OrphansByBandFile' >> beam.CoGroupByKey()
               | 'QueryOrphans' >> beam.FlatMap(_orphans_queried, place, distance))
    finals = ((changed[_FOUND], queried[_FOUND], orphans)
              | 'AllFound' >> beam.Flatten()
              | 'FoundBySlot' >> beam.GroupByKey()
              | 'Finals' >> beam.FlatMap(_finals, place.count, distance).with_outputs(_FINALS, _TAKEN, BANDS))
    nodes = ({'earlier': node_files, DROPPED: deltas[DROPPED], ADDED: deltas[ADDED], _FINALS: finals[_FINALS],
              _TAKEN: finals[_TAKEN]}
             | 'NodeSlots' >> beam.CoGroupByKey()
             | 'WriteNodeFiles' >> beam.FlatMap(_nodes_written, place, self._use).with_outputs(
                 NODES, _SEVERAL, _COUNTS, main='members'))
    written_bands = ({**bands, _FINALS: finals[BANDS]}
                     | 'BandFileChanges' >> beam.CoGroupByKey()
                     | 'WriteBandFiles' >> beam.FlatMap(_bands_written, place, distance))
    found = near_copy_groups.grouped_members(nodes.members, nodes[_SEVERAL], [nodes[_COUNTS]], self._cap)
    found['files'] = (nodes[NODES], queried[DRAFT], written_bands) | 'IndexFiles' >> beam.Flatten()
    return found


def _listed(record: Optional[RunRecord], kind: str) -> Iterator[Tuple[int, LookupFile]]:
  """(slot, LookupFile) of each file of the record's index of ``kind``."""
  index = record.catalog_lookup.near_index if record and record.catalog_lookup else None
  if index is not None:
    yield from ((found.slot, found) for found in (index.nodes if kind == NODES else index.bands))


def _changed_nodes(joined: Tuple[int, Mapping[str, Iterable[Any]]], place: Place, distance: int
                   ) -> Iterator[Any]:
  """A node slot's changed nodes: those that left the bands (_GONE) and joined them (_JOINED) to
  the band files of their band values, and each joined node as its own anchor so far (_FOUND)."""
  _, sides = joined
  dropped, added = _rows(sides, DROPPED, near_index.FILE_KEY), _rows(sides, ADDED, near_index.FILE_KEY)
  if not (len(dropped) or len(added)):
    return
  # WriteNodeFiles reads and checks every node file before the run commits anything.
  change = near_index.changed_slot(_earlier_slot(sides, place.output, checked=False), dropped, added)
  bands = near_index.Bands(distance, place.count)
  yield from _tagged(_GONE, bands.by_band_file(change.removed, query=True))
  yield from _tagged(_JOINED, bands.by_band_file(change.added, query=True))
  yield from _tagged(_FOUND, near_index.by_node_slot(near_index.own(change.added), place.count))


def _band_now(joined: Tuple[int, Mapping[str, Iterable[Any]]], output: str, bands: near_index.Bands,
              checked: bool = True) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
  """A band file's (rows after the changes, nodes gone, nodes joined).

  Args:
    joined: (band file slot, its sides: 'earlier', its LookupFile; _GONE and _JOINED, CHANGED bytes).
    output: the output folder.
    bands: the index's layout.
    checked: whether its earlier bytes are checked against the run record (not where a step before did).
  """
  slot, sides = joined
  gone, new = _rows(sides, _GONE, near_index.CHANGED), _rows(sides, _JOINED, near_index.CHANGED)
  return bands.rows_now(_earlier_rows(sides, output, checked), gone, new, slot), gone, new


def _queried(joined: Tuple[int, Mapping[str, Iterable[Any]]], place: Place, distance: int) -> Iterator[Any]:
  """What a band file's rows tell of the nodes that joined (_FOUND, by node slot), and its orphans,
  each to every band file of its band values (_ORPHANS) and as its own anchor so far (_FOUND);
  the file written again, the nodes that joined anchoring themselves ((DRAFT, LookupFile)): the
  final anchors that differ are patched in later (_bands_written), in the few files they reach."""
  slot, sides = joined
  if _unread(sides):
    return
  bands = near_index.Bands(distance, place.count)
  rows, gone, new = _band_now(joined, place.output, bands)
  result = near_index.queried(rows, new, gone['rank'][gone['anchors']], bands.band_file(slot)[0], distance)
  yield from _tagged(_FOUND, near_index.by_node_slot(result.found, place.count))
  if len(result.orphans):
    yield from _tagged(_FOUND, near_index.by_node_slot(near_index.own(result.orphans, stale=True), place.count))
    yield from _tagged(_ORPHANS, bands.by_band_file(result.orphans, query=True))
  yield TaggedOutput(DRAFT, _staged(place, DRAFT, slot, rows.tobytes(), len(rows)))


def _unread(sides: Mapping[str, Iterable[Any]]) -> bool:
  """Whether the queries did not read a band file (no node left or joined its values), so that a later
  step reading it checks its bytes: each file is checked once a run."""
  return not (sides.get(_GONE) or sides.get(_JOINED))


def _orphans_queried(joined: Tuple[int, Mapping[str, Iterable[Any]]], place: Place, distance: int
                     ) -> Iterator[Tuple[int, bytes]]:
  """What a band file's rows tell of the orphans of its band values: (node slot, FOUND bytes)."""
  slot, sides = joined
  orphans = np.unique(_rows(sides, _ORPHANS, near_index.CHANGED))
  if not len(orphans):
    return
  bands = near_index.Bands(distance, place.count)
  rows, _, _ = _band_now(joined, place.output, bands, checked=_unread(sides))
  found = near_index.queried(rows, orphans, np.empty(0, near_index.RANK), bands.band_file(slot)[0], distance,
                             forward=False).found
  yield from _as_bytes(near_index.by_node_slot(found, place.count))


def _finals(item: Tuple[int, Iterable[bytes]], count: int, distance: int) -> Iterator[Any]:
  """A node slot's nodes' final anchors, the first each was found: to its node file (_FINALS), to
  the node slots of anchors that are other nodes (_TAKEN), and those the band files do not hold
  yet (near_index.patches) to its band files (BANDS)."""
  slot, found = item
  finals = near_index.best(_one_array(found, near_index.FOUND))
  yield TaggedOutput(_FINALS, (slot, finals.tobytes()))
  taken = near_index.nodes_of(finals['anchor'][finals['anchor'] != finals['rank']])
  yield from _tagged(_TAKEN, near_index.by_node_slot(taken, count, field=None))
  yield from _tagged(BANDS, near_index.Bands(distance, count).by_band_file(near_index.patches(finals)))


def _nodes_written(joined: Tuple[int, Mapping[str, Iterable[Any]]], place: Place, use: bool) -> Iterator[Any]:
  """A node slot after the update, written again if it changed ((NODES, LookupFile)); its nodes in
  groups (near_copy_nodes.Member), its grouped nodes of several files (_SEVERAL) and its
  near-uniform hashes' counts (_COUNTS), for the groups of the whole dataset. Nothing where the
  index is not ``use``d.

  The node slot's sides: 'earlier', its LookupFile; DROPPED and ADDED, FILE_KEY bytes; _FINALS,
  FOUND bytes; _TAKEN, NODE bytes."""
  if not use:
    return
  slot, sides = joined
  node_slot = _earlier_slot(sides, place.output)
  dropped, added = _rows(sides, DROPPED, near_index.FILE_KEY), _rows(sides, ADDED, near_index.FILE_KEY)
  finals, taken = _rows(sides, _FINALS, near_index.FOUND), _rows(sides, _TAKEN, near_index.NODE)
  if len(dropped) or len(added):
    node_slot = near_index.changed_slot(node_slot, dropped, added).slot
  if len(finals) or len(taken):
    node_slot = near_index.slot_with_anchors(node_slot, finals, taken)
  if len(dropped) or len(added) or len(finals) or len(taken):
    yield TaggedOutput(NODES, _staged(place, NODES, slot, node_slot.encoded(), len(node_slot.files)))
  yield from near_index.members(node_slot)
  yield from (TaggedOutput(_SEVERAL, several) for several in near_index.several(node_slot))
  hashes, images = near_index.uniform(node_slot)
  if hashes:
    yield TaggedOutput(_COUNTS, ('uniform_hashes', hashes))
    yield TaggedOutput(_COUNTS, ('uniform_images', images))


def _bands_written(joined: Tuple[int, Mapping[str, Iterable[Any]]], place: Place, distance: int
                   ) -> Iterator[Tuple[str, LookupFile]]:
  """A band file written again where final anchors it does not hold reach it: (BANDS, its
  LookupFile), in place of the queries' draft of it, if they wrote one."""
  slot, sides = joined
  if not sides.get(_FINALS):
    return
  bands = near_index.Bands(distance, place.count)
  rows, _, _ = _band_now(joined, place.output, bands, checked=_unread(sides))
  rows = bands.with_anchors(rows, near_index.best(_rows(sides, _FINALS, near_index.FOUND)), bands.band_file(slot)[0])
  yield _staged(place, BANDS, slot, rows.tobytes(), len(rows))


class BuildIndex(beam.PTransform):
  """The index of a grouping of every node (NearCopies's ``indexed`` output: 'files', tables of
  near_copy_nodes.FILES, and 'anchors', FOUND rows), written whole: (kind, LookupFile) of each file.
  On one machine the same steps run in one, slot by slot (_built_on_one_machine), instead of
  crossing two shuffles that the in-process runner holds in memory."""

  def __init__(self, place: Place, distance: Any, one_machine: bool = False):
    """A step that writes the index of a grouping at ``distance`` (a side input) to ``place``; in
    one step on ``one_machine`` (the DirectRunner)."""
    super().__init__()
    self._place = place
    self._distance = distance
    self._one_machine = one_machine

  def expand(self, found):
    place = self._place
    if self._one_machine:
      return (found['files'].pipeline
              | 'Once' >> beam.Create([None])
              | 'WriteIndexFiles' >> beam.FlatMap(_built_on_one_machine, AsList(found['files']),
                                                  AsList(found['anchors']), place, self._distance))
    files = found['files'] | 'FilesBySlot' >> beam.FlatMap(lambda table: _as_bytes(_files_by_slot(table, place.count)))
    anchors = found['anchors'] | 'AnchorsBySlot' >> beam.FlatMap(_anchors_by_slot, place.count).with_outputs(
        _TAKEN, main=_FINALS)
    slots = ({ADDED: files, _FINALS: anchors[_FINALS], _TAKEN: anchors[_TAKEN]}
             | 'BySlot' >> beam.CoGroupByKey()
             | 'WriteNodeFiles' >> beam.FlatMap(_slot_built, place, self._distance).with_outputs(BANDS, main=NODES))
    bands = (slots[BANDS]
             | 'ByBandFile' >> beam.GroupByKey()
             | 'WriteBandFiles' >> beam.Map(_band_built, place))
    return (slots[NODES], bands) | 'IndexFiles' >> beam.Flatten()


def _built_on_one_machine(_, tables: List[np.ndarray], found: List[np.ndarray], place: Place, distance: int
                          ) -> Iterator[Tuple[str, LookupFile]]:
  """BuildIndex's files, written by its own steps called slot by slot and band file by band file
  in one process: the same bytes, without their shuffles.

  Args:
    _: the one element that starts the step; the grouping comes as side inputs.
    tables: the tables of every file grouped (near_copy_nodes.FILES).
    found: FOUND rows of the nodes anchored to another.
    place: where the index's files go.
    distance: the grouping's distance.
  """
  sides: Dict[int, Dict[str, List[bytes]]] = collections.defaultdict(lambda: collections.defaultdict(list))
  for table in tables:
    for slot, data in _as_bytes(_files_by_slot(table, place.count)):
      sides[slot][ADDED].append(data)
  for rows in found:
    for item in _anchors_by_slot(rows, place.count):
      tag, (slot, data) = (item.tag, item.value) if isinstance(item, TaggedOutput) else (_FINALS, item)
      sides[slot][tag].append(data)
  bands: Dict[int, List[bytes]] = collections.defaultdict(list)
  for slot in sorted(sides):
    for item in _slot_built((slot, sides.pop(slot)), place, distance):
      if isinstance(item, TaggedOutput):
        bands[item.value[0]].append(item.value[1])
      else:
        yield item
  for file in sorted(bands):
    yield _band_built((file, bands.pop(file)), place)


def _files_by_slot(table: np.ndarray, count: int) -> Iterator[Tuple[int, np.ndarray]]:
  """A table of files (near_copy_nodes.FILES) as FILE_KEY strings under their node slots."""
  keys = near_index.file_keys_of(table)
  yield from near_copy_nodes.partitioned(keys, near_index.node_slots(near_index.file_nodes(keys), count))


def _anchors_by_slot(found: np.ndarray, count: int) -> Iterator[Any]:
  """A grouping's anchors to their nodes' slots, and the nodes they anchor to theirs (_TAKEN)."""
  yield from _as_bytes(near_index.by_node_slot(found, count))
  yield from _tagged(_TAKEN, near_index.by_node_slot(near_index.nodes_of(found['anchor']), count, field=None))


def _slot_built(joined: Tuple[int, Mapping[str, Iterable[bytes]]], place: Place, distance: int) -> Iterator[Any]:
  """A node file built ((NODES, LookupFile)) and its nodes' rows of each band file (BANDS, keyed by file)."""
  slot, sides = joined
  built = near_index.built_slot(_rows(sides, ADDED, near_index.FILE_KEY), _rows(sides, _FINALS, near_index.FOUND),
                                _rows(sides, _TAKEN, near_index.NODE))
  if not len(built.files):
    return
  yield _staged(place, NODES, slot, built.encoded(), len(built.files))
  bands = near_index.Bands(distance, place.count)
  for band, file, rows in bands.slot_rows(built):
    yield TaggedOutput(BANDS, (bands.file_slot(band, file), rows.tobytes()))


def _band_built(item: Tuple[int, Iterable[bytes]], place: Place) -> Tuple[str, LookupFile]:
  """A band file built from its nodes' rows: (BANDS, its LookupFile); counted first, and not
  gathered where there are more than the index keeps (_staged)."""
  slot, parts = item
  entries = sum(len(data) // near_index.BAND_ROWS.itemsize for data in parts)
  if entries > near_index.MOST_ROWS:
    return _staged(place, BANDS, slot, b'', entries)
  rows = near_index.sorted_rows(_one_array(parts, near_index.BAND_ROWS))
  return _staged(place, BANDS, slot, rows.tobytes(), len(rows))
