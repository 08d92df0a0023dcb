"""beam_pipeline.json of a run: what each written shard reports, summed up shard by shard,
built into its run_record.RunRecord, and the error budget the run is held to.
"""
import collections
import dataclasses
import datetime
import math
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from beam_pipeline.version import __version__
from beam_pipeline.core import rejections, schemas
from beam_pipeline.core.output import output_layout
from beam_pipeline.core.output.catalog_entries import Entry, checksum, text
from beam_pipeline.core.messages import ShardReport
from beam_pipeline.core.output.run_record import (CatalogLookup, Duplicates, Embedding, Listing, NearDuplicates,
                                                  RunRecord, Shard, Split, Update)
from beam_pipeline.core.settings import EmbeddingSpec


def size_bin(value: int) -> str:
  """The power of two at or below ``value`` (0 for 0): the bins of the size histograms."""
  return str(1 << (value.bit_length() - 1) if value > 0 else 0)


def shard_report(split: str, file: str, shard_entries: List[Entry], num_bytes: int, *, multi_label: bool,
                 annotations: bool, index_file: Optional[str] = None, catalog_file: Optional[str] = None
                 ) -> ShardReport:
  """The report of a shard holding ``shard_entries``: what the writer reports of it, counted
  again from its records' catalog entries alone (which every run makes, and an --incremental
  one keeps), with its catalog file's checksum.

  Args:
    split: the split the shard belongs to.
    file: the shard's file name in the output, as the run record lists it.
    shard_entries: the catalog entries of its records, in the shard's order.
    num_bytes: the shard file's size.
    multi_label: whether a record counts for each of its labels (--multi_label) rather than its one label.
    annotations: whether objects are counted per class (--annotations).
    index_file: its index file's name in the output (--index_files); None without one.
    catalog_file: its catalog file's name in the output (--incremental); None without one, and then no checksum.
  """
  labels = [value.labels if multi_label else value.label for value in shard_entries]
  objects = collections.Counter(label for value in shard_entries for label in value.objects)
  return ShardReport(split=split, file=file, num_examples=len(shard_entries), num_bytes=num_bytes,
                     num_reencoded=sum(value.reencoded for value in shard_entries),
                     num_resized=sum(value.resized for value in shard_entries),
                     num_rotated=sum(value.rotated for value in shard_entries),
                     num_damaged_jpeg=sum(value.damaged for value in shard_entries),
                     objects=dict(objects) if annotations else None, index_file=index_file,
                     catalog_file=catalog_file,
                     catalog_sha256=checksum(text(shard_entries)) if catalog_file else None,
                     **image_statistics(labels, [value.longer_side for value in shard_entries],
                                        [value.stored_bytes for value in shard_entries],
                                        [(value.stratum, value.quality) for value in shard_entries]))


def image_statistics(labels: Iterable[Union[None, str, Tuple[str, ...]]], longer_sides: Iterable[int],
                     stored_bytes: Iterable[int], qualities: Iterable[Tuple[str, Tuple[str, ...]]] = ()
                     ) -> Dict[str, Dict[str, Any]]:
  """A shard's counts per class and histograms of its images' longer side (pixels) and stored
  size (KiB, in power-of-two bins): what beam_pipeline.json holds per split.

  Args:
    labels: each image's label (None: none); a tuple under --multi_label, each of whose classes it counts once.
    longer_sides: each image's longer side as stored, in pixels.
    stored_bytes: each image's size as stored.
    qualities: each image's class (the one its split was stratified by) and data-quality flags, counted per flag
      and class.
  """
  texts = (text for label in labels for text in ((label,) if isinstance(label, str) else label or ()))
  quality: Dict[str, Dict[str, int]] = {}
  for stratum, flags in qualities:
    for flag in flags:
      per_class = quality.setdefault(flag, {})
      per_class[stratum] = per_class.get(stratum, 0) + 1
  return {'classes': dict(collections.Counter(texts)),
          'longer_side_px': dict(collections.Counter(map(size_bin, longer_sides))),
          'kib': dict(collections.Counter(size_bin(size // 1024) for size in stored_bytes)),
          'quality': quality}


MAX_LISTED_DUPLICATE_GROUPS = 1000


def embedding_info(spec: Optional[EmbeddingSpec], schema: str) -> Optional[Embedding]:
  """What beam_pipeline.json says of the embeddings of ``spec`` (None without them)."""
  if spec is None:
    return None
  keys = schemas.keys(schema)
  return Embedding(model=spec.model, sha256=spec.sha256, input_size=[spec.image_size, spec.image_size, 3],
                   input='RGB, resized bilinearly (tf.image.resize), float32 values 0-255',
                   output_shape=list(spec.output_shape), num_values=spec.num_values, key=keys[schemas.EMBEDDING],
                   shape_key=keys[schemas.EMBEDDING_SHAPE], images_stored=not spec.only)


@dataclasses.dataclass
class SplitTotals:
  """A split's written examples, bytes, shards (as beam_pipeline.json lists them) and histograms."""
  num_examples: int = 0
  num_bytes: int = 0
  shards: List[Shard] = dataclasses.field(default_factory=list)
  classes: Dict[str, int] = dataclasses.field(default_factory=dict)
  longer_side_px: Dict[str, int] = dataclasses.field(default_factory=dict)
  kib: Dict[str, int] = dataclasses.field(default_factory=dict)
  objects: Optional[Dict[str, int]] = None  # with --annotations
  quality: Dict[str, Dict[str, int]] = dataclasses.field(default_factory=dict)  # images per flag and class

  def add(self, more: Union[ShardReport, 'SplitTotals', Split], shards: List[Shard], sign: int = 1) -> None:
    """These totals (changed) with the examples, bytes and histograms of ``more`` (a shard's
    report, another split's totals or an earlier run record's split) and its ``shards`` added;
    taken off with ``sign`` -1."""
    self.num_examples += sign * more.num_examples
    self.num_bytes += sign * more.num_bytes
    self.shards.extend(shards)
    for mine, theirs in ((self.classes, more.classes), (self.longer_side_px, more.longer_side_px),
                         (self.kib, more.kib)):
      _add_counts(mine, theirs, sign)
    if more.objects is not None:
      self.objects = _add_counts(self.objects or {}, more.objects, sign)
    for flag, per_class in (more.quality or {}).items():
      if not _add_counts(self.quality.setdefault(flag, {}), per_class, sign):
        del self.quality[flag]


@dataclasses.dataclass
class WrittenTotals:
  """Every written shard's report, summed: per split its examples, bytes, histograms and shards;
  and the run's counts. A combiner sums them up shard by shard (add_shard) and merges its
  partial totals (add), never holding every shard's histograms at once: 100 million images
  in 1,000 classes make 70,000 shards of hundreds of classes each."""
  splits: Dict[str, SplitTotals] = dataclasses.field(default_factory=dict)
  num_reencoded: int = 0
  num_resized: int = 0
  num_rotated: int = 0
  num_damaged_jpeg: int = 0
  # Shards an earlier run wrote that this one wrote again (--incremental): the earlier totals'
  # entries of them go when these totals are added to those (add).
  replaced_files: List[str] = dataclasses.field(default_factory=list)
  # Shards written again from earlier shards' records (ShardReport.rewritten), empty ones included.
  rewritten_files: List[str] = dataclasses.field(default_factory=list)
  # The shard and index files of those whose catalog alone was written again (ShardReport.catalog_only):
  # they stay where they are, nothing of theirs staged.
  unstaged_files: List[str] = dataclasses.field(default_factory=list)

  def add_shard(self, report: ShardReport) -> 'WrittenTotals':
    """These totals (changed) with one written shard's report added, or an earlier report of a
    shard written again (``report.replaced``) taken off."""
    sign = -1 if report.replaced else 1
    self._add_counts(report, sign)
    if report.replaced:
      self.replaced_files.append(report.file)
    if report.rewritten:
      self.rewritten_files.append(report.file)
    if report.catalog_only and not report.replaced:
      self.unstaged_files.extend(name for name in (report.file, report.index_file) if name)
    shard = Shard(file=report.file, num_examples=report.num_examples, num_bytes=report.num_bytes,
                  index_file=report.index_file, catalog_file=report.catalog_file,
                  catalog_sha256=report.catalog_sha256, id=report.shard_id)
    self.splits.setdefault(report.split, SplitTotals()).add(report, [] if report.replaced else [shard], sign)
    return self

  def add(self, more: 'WrittenTotals', replace: bool = False) -> 'WrittenTotals':
    """These totals (changed) with the totals ``more`` added. With ``replace`` (these being an
    earlier run's, of_record), the shards ``more`` wrote again leave these totals' lists; their
    counts come off with its replaced reports."""
    self._add_counts(more)
    replaced = set(more.replaced_files) if replace else set()
    self.replaced_files.extend(more.replaced_files)
    self.rewritten_files.extend(more.rewritten_files)
    self.unstaged_files.extend(more.unstaged_files)
    for name, split in more.splits.items():
      totals = self.splits.setdefault(name, SplitTotals())
      if replaced:
        totals.shards = [shard for shard in totals.shards if shard.file not in replaced]
      totals.add(split, split.shards)
    return self

  @classmethod
  def of_record(cls, record: RunRecord) -> 'WrittenTotals':
    """The totals of what an earlier run's record says it wrote: where an --incremental run's
    own totals are added (add)."""
    totals = cls(num_reencoded=record.num_reencoded, num_resized=record.num_resized, num_rotated=record.num_rotated,
                 num_damaged_jpeg=record.num_damaged_jpeg - record.errors_by_reason.get(rejections.DAMAGED_JPEG, 0))
    for name, split in record.splits.items():
      totals.splits.setdefault(name, SplitTotals()).add(split, list(split.shards))
    return totals

  def _add_counts(self, more: Union[ShardReport, 'WrittenTotals'], sign: int = 1) -> None:
    self.num_reencoded += sign * more.num_reencoded
    self.num_resized += sign * more.num_resized
    self.num_rotated += sign * more.num_rotated
    self.num_damaged_jpeg += sign * more.num_damaged_jpeg

  @property
  def files(self) -> List[str]:
    """Every shard, index and catalog file written (and staged)."""
    unstaged = set(self.unstaged_files)
    return [name for split in self.splits.values() for shard in split.shards for name in shard.files
            if name not in unstaged]

  @property
  def num_examples(self) -> int:
    return sum(split.num_examples for split in self.splits.values())


def written_totals(reports: Iterable[ShardReport]) -> WrittenTotals:
  """The reports of written shards, summed."""
  totals = WrittenTotals()
  for report in reports:
    totals.add_shard(report)
  return totals


def _add_counts(into: Dict[str, int], more: Mapping[str, int], sign: int = 1) -> Dict[str, int]:
  """``into`` (changed) with ``more``'s counts added (``sign`` -1: taken off); a count that comes
  to 0 goes, as if it had never been counted."""
  for key, count in more.items():
    into[key] = into.get(key, 0) + sign * count
    if not into[key]:
      del into[key]
  return into


def build(*, written: WrittenTotals, labels: List[str], errors_by_reason: Mapping[str, int],
          num_errors_files: int, duplicates: Mapping[str, Any], dedupe: bool, num_removed: int,
          settings: Mapping[str, Any], runner: str, embedding: Optional[Embedding] = None,
          num_skipped: int = 0, update: Optional[Update] = None,
          near_copies: Optional[NearDuplicates] = None, listing: Optional[Listing] = None,
          catalog_lookup: Optional[CatalogLookup] = None) -> RunRecord:
  """The run's record, beam_pipeline.json: its counts per split come from the shards as written,
  so they match the files.

  Args:
    written: written_totals of every shard; after an update, of the whole dataset.
    labels: the class names in id order, as labels.txt lists them.
    errors_by_reason: the rejections per reason, without the copies dropped and the files skipped, which are no
      errors.
    num_errors_files: how many errors files the rejections were written to.
    duplicates: how content_groups.DuplicateGroups sums up the groups of identical files: num_groups,
      num_extra_copies, num_label_conflicts, and the first MAX_LISTED_DUPLICATE_GROUPS groups.
    dedupe: whether --dedupe kept one copy of each group.
    num_removed: the copies --dedupe dropped.
    settings: the run's options as given (Settings.as_dict), recorded with the runner.
    runner: the Beam runner the run ran on.
    embedding: what the record says of --embedding_model's embeddings (embedding_info); None without them.
    num_skipped: the files skipped as no images.
    update: what an --incremental run changed (incremental_update.what_changed); None without --incremental.
    near_copies: the near copies found (near_duplicates); None under --near_copies=off.
    listing: how many inputs an --incremental run listed and their digest, by which the next run may find
      nothing changed; None without it.
    catalog_lookup: an --incremental output's lookup files by uri; None without --incremental.
  """
  order = {label: index for index, label in enumerate(labels)}
  splits = {}
  for name, split in sorted(written.splits.items()):
    splits[name] = Split(num_examples=split.num_examples, num_bytes=split.num_bytes,
                         shards=sorted(split.shards, key=lambda shard: shard.file),
                         classes=dict(sorted(split.classes.items(), key=lambda item: order[item[0]])),
                         longer_side_px=dict(sorted(split.longer_side_px.items(), key=lambda item: int(item[0]))),
                         kib=dict(sorted(split.kib.items(), key=lambda item: int(item[0]))),
                         objects=(dict(sorted(split.objects.items(), key=lambda item: order[item[0]]))
                                  if split.objects is not None else None),
                         quality={flag: dict(sorted(split.quality[flag].items(),
                                                    key=lambda item: order.get(item[0], -1)))
                                  for flag in sorted(split.quality)} or None)
  return RunRecord(
      version=__version__,
      created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
      num_examples=sum(split.num_examples for split in splits.values()),
      num_reencoded=written.num_reencoded,
      num_resized=written.num_resized,
      num_rotated=written.num_rotated,
      num_damaged_jpeg=errors_by_reason.get(rejections.DAMAGED_JPEG, 0) + written.num_damaged_jpeg,
      splits=splits,
      labels=labels,
      num_classes=len(labels),
      num_errors=sum(errors_by_reason.values()),
      errors_by_reason=dict(sorted(errors_by_reason.items())),
      errors_file=output_layout.errors_pattern(num_errors_files),
      errors_files=output_layout.errors_files(num_errors_files),
      num_skipped=num_skipped or None,
      duplicates=Duplicates(num_groups=duplicates['num_groups'], num_extra_copies=duplicates['num_extra_copies'],
                            removed=dedupe, num_removed=num_removed,
                            num_label_conflicts=duplicates.get('num_label_conflicts') or None,
                            groups=duplicates['groups']),
      near_duplicates=near_copies,
      compression=settings['compression'],
      schema=settings['schema'],
      embedding=embedding,
      options=dict(settings, runner=runner),
      update=update,
      listing=listing,
      catalog_lookup=catalog_lookup,
  )


def near_duplicates(found: Optional[Mapping[str, Any]], mode: str, num_removed: int) -> Optional[NearDuplicates]:
  """The record's near copies from what planning found (graph.Planned.near_copies: content_groups.NearGroups
  with the grouping's distance and what it left out), None if it looked for none (--near_copies=off)."""
  if found is None:
    return None
  return NearDuplicates(distance=found['distance'], num_groups=found['num_groups'], num_images=found['num_images'],
                        removed=mode == 'drop', num_removed=num_removed,
                        num_label_conflicts=found['num_label_conflicts'] or None,
                        left_out=dict(sorted(found['left_out'].items())) or None,
                        largest_group=found['largest_group'], hash=found.get('hash'),
                        groups=found['groups'])


class ErrorBudgetExceeded(RuntimeError):
  """Too much of the input was rejected; the message is meant for the user as is."""

  PREFIX = 'error budget exceeded: '


# Rejections that are no failure of an image: a file skipped as no image, an annotation that
# cannot be used (no image), an image --drop_unannotated asked to leave out.
NOT_BUDGETED = frozenset({rejections.SKIPPED, rejections.BAD_ANNOTATION, rejections.UNANNOTATED})


def check_budget_before_writing(num_inputs: int, rejected_by_reason: Mapping[str, Tuple[int, str]],
                                max_fraction: float) -> None:
  """Raises ErrorBudgetExceeded before any shard is written if the listing's and the images'
  checks already rejected more than ``max_fraction`` of the ``num_inputs`` (``rejected_by_reason``:
  each reason's count and first uri; those of NOT_BUDGETED left out): rejections only grow from
  here, so the run would fail its budget at the end all the same. Names the top reasons, a file
  of each, and the budget that would let the run write the dataset."""
  counted = {reason: value for reason, value in rejected_by_reason.items() if reason not in NOT_BUDGETED}
  rejected = sum(count for count, _ in counted.values())
  if not num_inputs or rejected / num_inputs <= max_fraction:
    return
  top = sorted(counted.items(), key=lambda item: (-item[1][0], item[0]))[:3]
  reasons = ', '.join(f'{reason} {count} (first: {uri})' for reason, (count, uri) in top)
  enough = math.ceil(rejected / num_inputs * 10) / 10
  raise ErrorBudgetExceeded(
      f'{ErrorBudgetExceeded.PREFIX}{rejected} of {num_inputs} inputs ({rejected / num_inputs:.1%}) were rejected as '
      f'they were checked, more than --max_error_fraction={max_fraction:g}, so nothing was written; top reasons: '
      f'{reasons}; to write the dataset anyway, rerun with --max_error_fraction={enough:g}')


def check_error_budget(num_written: int, errors_by_reason: Mapping[str, int], num_removed: int, max_fraction: float,
                       errors_path: str) -> None:
  """Raises ErrorBudgetExceeded naming the top reasons if too large a share of the inputs was
  rejected.

  Args:
    num_written: the examples written; after an update, the whole dataset's.
    errors_by_reason: the rejections that count against the budget, per reason.
    num_removed: inputs left out on purpose (copies --dedupe or --near_copies=drop dropped, images
      --drop_unannotated left out): they count as inputs, not as errors.
    max_fraction: the largest share of the inputs that may be rejected (--max_error_fraction).
    errors_path: the errors files (a pattern where there are several), which the message points to.
  """
  rejected = sum(errors_by_reason.values())
  total = num_written + rejected + num_removed
  if not total or rejected / total <= max_fraction:
    return
  top = sorted(errors_by_reason.items(), key=lambda item: (-item[1], item[0]))[:3]
  reasons = ', '.join(f'{reason} {count}' for reason, count in top)
  raise ErrorBudgetExceeded(
      f'{ErrorBudgetExceeded.PREFIX}{rejected} of {total} inputs ({rejected / total:.1%}) were rejected, '
      f'more than --max_error_fraction={max_fraction:g}; top reasons: {reasons}; see {errors_path}')
