"""Whether an --incremental run updates the dataset its output holds or converts everything.

An update converts only what changed and leaves the other shards as they are, so it is
only right where today's options would have made those shards: an earlier complete
dataset written with --incremental (it has a catalog), by the options that shape what a
record holds and where it goes. Anything else is converted whole, in the incremental
layout, and the run says why in one line.
"""
import dataclasses
from typing import Dict, Iterable, List, Mapping, NamedTuple, Optional, Tuple

from beam_pipeline.core import option_table
from beam_pipeline.core.output import catalog_lookup, catalog_entries, output_layout, run_totals
from beam_pipeline.core.output.run_record import CatalogLookup, LookupFile, NearIndex, RunRecord, Shard, Update
from beam_pipeline.core.settings import Settings

# Options whose value the update does not depend on, though they change what a run writes:
# the input, whose files are compared one by one (earlier_input.py checks it is the same).
_COMPARED_ELSEWHERE = frozenset({'input', 'incremental', 'rebuild'})


class Merge(NamedTuple):
  """Small shards of one split written again as one, under the first one's name and id."""
  split: str
  file: str
  sources: Tuple[str, ...]
  shard_id: str = ''  # the first one's (Shard.key)


# A shard smaller than this share of the target size is small: increments smaller than a shard
# leave one such shard per split each, and a run merges them once a split holds two.
SMALL_SHARD = 0.5


def merges(earlier: RunRecord, target_bytes: int) -> List[Merge]:
  """The merges of an update of ``earlier``: per split, its small shards in order, packed into as
  few shards of at most the target size as go (a greedy pass), each of two or more."""
  planned = []
  for name, split in sorted(earlier.splits.items()):
    small = [shard for shard in split.shards if shard.num_bytes < SMALL_SHARD * target_bytes]
    if len(small) < 2:
      continue
    packed: List[List[Shard]] = [[]]
    for shard in small:
      if packed[-1] and sum(s.num_bytes for s in packed[-1]) + shard.num_bytes > target_bytes:
        packed.append([])
      packed[-1].append(shard)
    planned.extend(Merge(name, sources[0].file, tuple(s.file for s in sources), sources[0].key) for sources in packed
                   if len(sources) > 1)
  return planned


class Numbering(NamedTuple):
  """How a split's new shards are numbered in an update: into the indexes merges freed, then
  after the split's earlier shards."""
  count: int  # the split's earlier shards
  free: Tuple[int, ...] = ()

  def index(self, new: int) -> int:
    """The index of the split's ``new``-th new shard (from 0)."""
    return self.free[new] if new < len(self.free) else self.count + new - len(self.free)


class Decision(NamedTuple):
  """What an --incremental run does, decided at launch from the output's run record: update its
  dataset (merging the small shards ``merges`` names), or convert everything and say why.

  The pipeline's graph carries it, so it holds only what does not grow with the dataset but
  for its classes and the small shards a run merges: the record itself (a line per shard, 70,000
  of them at 100 million images) is read again by the pipeline where it is needed.
  """
  updates: bool = False
  full_conversion: Optional[str] = None  # one line, for the console and the run record
  labels: Tuple[str, ...] = ()  # the earlier dataset's classes, in id order
  numbering: Tuple[Tuple[str, Numbering], ...] = ()  # (split, how its new shards are numbered)
  merges: Tuple[Merge, ...] = ()
  # How many files the catalog's lookup by uri has (catalog_lookup.py), and whether the update
  # builds it again from the shards' catalogs: the earlier record has none (it is from before
  # lookups), or the dataset grew or shrank past what its count suits (catalog_lookup.fits).
  lookup_count: int = 0
  lookup_rebuilt: bool = False
  # The distance of the near-copy grouping whose index (core/planning/near_index.py) the update
  # keeps, if it has one of today's hashes and keeps the lookups (their count is the index's); 0:
  # none, the grouping groups every node and builds it again.
  near_index_distance: int = 0
  # How many records the dataset holds, and how many of them its last grouping found in sets of
  # look-alikes: what tells an update on one machine whether to keep a near-copy index
  # (earlier_copies.grouped_in_memory).
  catalogued: int = 0
  look_alikes: int = 0

  @classmethod
  def update(cls, earlier: RunRecord, merged: Tuple[Merge, ...] = (), hash_name: str = '') -> 'Decision':
    """The update of the dataset whose record is ``earlier``, with the merges ``merged``, today's
    perceptual hashes being ``hash_name``'s."""
    free: Dict[str, List[int]] = {}
    for merge in merged:
      free.setdefault(merge.split, []).extend(output_layout.shard_index(file) for file in merge.sources[1:])
    numbering = tuple((name, Numbering(len(split.shards), tuple(sorted(free.get(name, ())))))
                      for name, split in sorted(earlier.splits.items()))
    lookup = earlier.catalog_lookup
    kept = lookup is not None and catalog_lookup.fits(lookup.count, earlier.num_examples)
    index = lookup.near_index if kept else None
    return cls(True, labels=tuple(earlier.labels), numbering=numbering, merges=merged,
               lookup_count=lookup.count if kept else catalog_lookup.count_for(earlier.num_examples),
               lookup_rebuilt=not kept,
               near_index_distance=index.distance if index is not None and index.hash == hash_name else 0,
               catalogued=earlier.num_examples, look_alikes=_look_alikes(earlier))

  @property
  def numbered(self) -> Dict[str, Numbering]:
    """How each split's new shards are numbered."""
    return dict(self.numbering)

  @property
  def merged_into(self) -> Dict[str, str]:
    """The shard each merged shard's records go to."""
    return {source: merge.file for merge in self.merges for source in merge.sources}


def _look_alikes(earlier: RunRecord) -> int:
  """How many images the grouping of the run that wrote ``earlier`` left out as sets of look-alikes."""
  near = earlier.near_duplicates
  return (near.left_out or {}).get('look_alike_images', 0) if near else 0


def gap_moves(shards: List[Shard]) -> List[Tuple[str, str]]:
  """(from, to) names that leave a split's shards (``shards``, of an --incremental output)
  numbered without gaps, as TensorFlow Datasets reads them: the last shards move into the
  gaps merges left where fewer new shards filled them. Index and catalog files move with them."""
  by_index = {output_layout.shard_index(shard.file): shard for shard in shards}
  gaps = sorted(set(range(len(shards))) - set(by_index))
  moves = []
  for gap, index in zip(gaps, sorted((i for i in by_index if i >= len(shards)), reverse=True)):
    shard = by_index[index]
    renamed = output_layout.renumbered(shard.file, gap)
    moves.extend(zip(shard.files, [renamed] + [name for name in (output_layout.index_file(renamed)
                                                                 if shard.index_file else None,
                                                                 output_layout.catalog_file(renamed)
                                                                 if shard.catalog_file else None) if name]))
  return moves


def decide(earlier: Optional[RunRecord], settings: Settings, hash_name: str) -> Decision:
  """What an --incremental run into an output whose run record is ``earlier`` (None: no complete
  dataset) does, today's perceptual hashes being ``hash_name``'s (perceptual_hash.NAME)."""
  if earlier is None:
    return Decision(full_conversion='the output holds no complete dataset yet')
  if settings.rebuild:
    return Decision(full_conversion='--rebuild asks for it')
  if not earlier.options.get('incremental'):
    return Decision(full_conversion='the output was not written with --incremental (it has no catalog)')
  differing = changed_options(earlier.options, settings)
  if differing:
    verb = 'differs' if len(differing) == 1 else 'differ'
    return Decision(full_conversion=f'{", ".join("--" + name for name in differing)} {verb} from the earlier '
                    "run's")
  if earlier.embedding and settings.embedding and earlier.embedding.sha256 != settings.embedding.sha256:
    return Decision(full_conversion=f'--embedding_model {settings.embedding.model} is not the model the earlier '
                    'run used')
  if (settings.near_copies != 'off' and earlier.near_duplicates is not None
      and earlier.near_duplicates.hash_name != hash_name):
    return Decision(full_conversion=f'the earlier run made its perceptual hashes another way '
                    f'({earlier.near_duplicates.hash_name}, where this version makes {hash_name}), so near '
                    'copies of its images could not be found')
  return Decision.update(earlier, tuple(merges(earlier, settings.target_shard_bytes)), hash_name)


def changed_options(recorded: Dict[str, object], settings: Settings) -> List[str]:
  """The options that change what a record holds whose value differs from ``recorded``'s (an
  earlier run record's options)."""
  today = option_table.recorded(settings)
  return [option.name for option in option_table.OPTIONS
          if option.changes_output and option.recorded_as and option.name not in _COMPARED_ELSEWHERE
          and _normal(today.get(option.name)) != _normal(recorded.get(option.name))]


def name_shards(dataset: run_totals.WrittenTotals) -> None:
  """Gives each shard of ``dataset`` (an updated output's totals) that has no id its file name as
  one, before any is renamed: the name the lookup built from a record before ids calls it
  (Shard.key)."""
  for split in dataset.splits.values():
    split.shards = [shard if shard.id else dataclasses.replace(shard, id=shard.file) for shard in split.shards]


class IndexWritten(NamedTuple):
  """The near-copy index a run kept up to date or built (its files written: ``nodes`` and
  ``bands``), and whether it built it whole (``rebuilt``) or updated the earlier one."""
  distance: int
  hash: str
  rebuilt: bool
  nodes: Tuple[LookupFile, ...] = ()
  bands: Tuple[LookupFile, ...] = ()


def lookup_after(decision: Decision, earlier: Optional[RunRecord], written: List[LookupFile],
                 written_content: List[LookupFile], count: int, index: Optional[IndexWritten] = None
                 ) -> CatalogLookup:
  """The catalog's lookups after an --incremental run that wrote the lookup files ``written`` (by
  uri) and ``written_content`` (by content): an update's earlier files with those it wrote in
  their place, unless it built the lookups again; likewise the near-copy index, which a run that
  neither kept nor built it (``index`` None) leaves out, as it no longer describes the dataset.

  Args:
    decision: whether the run updated a dataset, and whether it built the lookups again.
    earlier: the updated dataset's run record; None for a run that updates nothing.
    written: the files of the lookup by uri that the run wrote.
    written_content: the files of the lookup by content that the run wrote.
    count: how many files each lookup has.
    index: the near-copy index the run wrote.
  """
  kept = decision.updates and not decision.lookup_rebuilt

  def after(files: List[LookupFile], more: Iterable[LookupFile], keep: bool) -> List[LookupFile]:
    by_slot = {found.slot: found for found in files} if keep else {}
    by_slot.update((found.slot, found) for found in more)
    return [by_slot[slot] for slot in sorted(by_slot)]

  near = None
  if index is not None:
    kept_index = earlier.catalog_lookup.near_index if kept and not index.rebuilt else None
    near = NearIndex(distance=index.distance, hash=index.hash,
                     nodes=after(kept_index.nodes if kept_index else [], index.nodes, True),
                     bands=after(kept_index.bands if kept_index else [], index.bands, True))
  return CatalogLookup(count=count, files=after(earlier.catalog_lookup.files if kept else [], written, kept),
                       content_files=after(earlier.catalog_lookup.content_files if kept else [], written_content,
                                           kept),
                       near_index=near)


def close_gaps(dataset: run_totals.WrittenTotals) -> List[Tuple[str, str]]:
  """The moves (gap_moves) that number each split of ``dataset`` (an updated --incremental
  output's totals) without gaps; its shards' entries (changed) take the new names. A shard
  written again without any record goes first: its earlier file is deleted with the commit."""
  moves = []
  for split in dataset.splits.values():
    split.shards = [shard for shard in split.shards if shard.num_examples]
    split_moves = gap_moves(split.shards)
    renamed = dict(split_moves)
    split.shards = [dataclasses.replace(shard, file=renamed[shard.file],
                                        index_file=renamed.get(shard.index_file) if shard.index_file else None,
                                        catalog_file=renamed.get(shard.catalog_file) if shard.catalog_file else None)
                    if shard.file in renamed else shard for shard in split.shards]
    moves.extend(split_moves)
  return moves


def changed(changes: Mapping[str, int]) -> bool:
  """Whether an update's inputs (``changes``: catalog_entries.change counts) hold anything
  added, changed, removed or touched since the earlier run (a touched file's catalog line takes
  its new fingerprint, so that the next run does not read it again)."""
  return any(changes.get(kind) for kind in (catalog_entries.ADDED, catalog_entries.CHANGED,
                                            catalog_entries.REMOVED, catalog_entries.TOUCHED))


def what_changed(decision: Decision, changes: Mapping[str, int], written: run_totals.WrittenTotals,
           dataset: run_totals.WrittenTotals, labels: List[str]) -> Update:
  """What the run record of an --incremental run says it changed.

  Args:
    decision: whether the run updated the dataset or converted everything (and why); a full conversion counts
      every example as added, and lists no written files.
    changes: its inputs counted by what became of them (catalog_entries.change).
    written: what it wrote: new shards, and earlier ones written again.
    dataset: the whole dataset after it.
    labels: the dataset's classes after it, in id order; those past the earlier run's are new.
  """
  shards = sum(len(split.shards) for split in dataset.splits.values())
  rewritten, untouched = set(written.rewritten_files), set(written.unstaged_files)  # a catalog alone: kept
  new = sum(1 for split in written.splits.values() for shard in split.shards if shard.file not in rewritten)
  rewritten_live = sum(1 for split in written.splits.values() for shard in split.shards
                       if shard.file in rewritten and shard.file not in untouched and shard.num_examples)
  return Update(added=changes.get(catalog_entries.ADDED, 0) if decision.updates else dataset.num_examples,
                changed=changes.get(catalog_entries.CHANGED, 0),
                removed=changes.get(catalog_entries.REMOVED, 0),
                unchanged=changes.get(catalog_entries.UNCHANGED, 0),
                touched=changes.get(catalog_entries.TOUCHED) or None,
                shards_written=new, shards_rewritten=rewritten_live,
                shards_kept=shards - new - rewritten_live,
                new_classes=labels[len(decision.labels):] if decision.updates else [],
                full_conversion=decision.full_conversion,
                written_files=sorted(shard.file for split in written.splits.values() for shard in split.shards
                                     if shard.num_examples and shard.file not in untouched)
                if decision.updates else None)


def _normal(value: object) -> object:
  """A recorded value as JSON gives it back: what is not recorded is not given (False, None)."""
  return None if value is False else value
