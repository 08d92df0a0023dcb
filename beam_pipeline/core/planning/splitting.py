"""Split assignment: reproducible, stratified per class, and never across identical photos or
near copies.

Identical files (same content hash) form one group that always lands in one split,
so a scraped set's copies cannot leak between training and evaluation; near copies
(core/planning/near_copies.py) join theirs into one group too (merge_near_copies). Within a
class, groups are ranked by content hash and each takes the split that covers its
midpoint in the cumulative image count, which holds every class to the requested
fractions within one group. The rank follows the hash, so a group's split depends
on its content, not on listing order, runner or worker count; growing the dataset
only moves groups that sit next to a boundary.
"""
import bisect
import collections
import itertools
import re
from typing import Any, Dict, FrozenSet, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from beam_pipeline.core import isolation, rejections, split_names
from beam_pipeline.core.planning import hash_order
from beam_pipeline.core.messages import ContentGroup, CheckedImage, Rejection
from beam_pipeline.core.settings import SplitSpec
from beam_pipeline.core.user_errors import UsageError

DEFAULT_SPLIT = 'train'
_NAME = re.compile(r'^[a-z][a-z0-9_]*$')


def parse_splits(value: Optional[str]) -> SplitSpec:
  """Parses --splits=train=0.8,validation=0.2; without it everything is train. A usual split's
  other words name it as a manifest or a folder would (val=0.2 is validation: split_names)."""
  if not value:
    return SplitSpec((DEFAULT_SPLIT,), (1.0,))
  names, fractions = [], []
  for part in value.split(','):
    name, _, fraction = part.partition('=')
    name = name.strip()
    name = split_names.named(name) if _NAME.match(name) else name
    meant = split_names.mistyped(name)
    if meant:
      raise UsageError(f'--splits={value}: {name!r} is one letter off {meant}; did you mean {meant}? (to name a '
                       f'split of your own so, put a digit or an underscore in it: {name}_1)')
    if not _NAME.match(name) or name in names:
      raise UsageError(f'--splits={value}: {name!r} is not a valid, unique split name (lowercase, a-z0-9_)')
    try:
      number = float(fraction)
    except ValueError:
      raise UsageError(f'--splits={value}: give each split as name=fraction, e.g. train=0.8,validation=0.2') from None
    if not 0 < number <= 1:
      raise UsageError(f'--splits={value}: the fraction of {name} must be in (0, 1]')
    names.append(name)
    fractions.append(number)
  if abs(sum(fractions) - 1) > 1e-6:
    raise UsageError(f'--splits={value}: the fractions add up to {sum(fractions):g}, not 1')
  return SplitSpec(tuple(names), tuple(fractions))


# Buckets are keyed by at least this many hex digits of the content hash, more for a
# large input (hash_order.prefix_digits): 256 keys spread duplicate detection across
# workers, and each bucket's batch of records crosses the shuffle as one element
# (Beam's per-element cost dwarfs a record's own).
CONTENT_BUCKET_DIGITS = 2


def content_buckets(records: Iterable[CheckedImage], digits: int = CONTENT_BUCKET_DIGITS
                    ) -> Dict[str, List[CheckedImage]]:
  """Records batched by the first ``digits`` hex digits of their content hash; copies always
  share a bucket."""
  buckets = collections.defaultdict(list)
  for record in records:
    buckets[record.source_sha256[:digits]].append(record)
  return buckets


def same_content(records: Iterable[CheckedImage]) -> Iterator[List[CheckedImage]]:
  """The records of one bucket as lists of identical files; most lists hold one record."""
  by_hash = collections.defaultdict(list)
  for record in records:
    by_hash[record.source_sha256].append(record)
  return iter(by_hash.values())


def group_duplicates(records: Sequence[CheckedImage], dedupe: bool) -> Tuple[ContentGroup, List[Rejection]]:
  """One content group from records sharing a hash, and the copies --dedupe drops.

  A split named for any member (manifest column, split folder) applies to all of
  them: the first such split by uri wins, so copies never straddle two splits.
  Under ``dedupe`` the copy kept carries the label most copies give (the first such copy by
  uri); where no one label is given most (cat once, dog once), which label the picture has
  cannot be told from the files, and every copy is rejected as label_conflict: an empty group.
  """
  isolation.fault_point(isolation.GROUP)
  if len(records) == 1 and not dedupe:  # most groups: the record as it is
    return ContentGroup(tuple(records)), []
  ordered = sorted(records, key=lambda r: r.uri)
  split = next((r.split for r in ordered if r.split), None)
  ordered = [r if r.split == split else r.with_split(split) for r in ordered]
  if not dedupe:
    return ContentGroup(tuple(ordered)), []
  given = sorted(collections.Counter(map(_label_set, ordered)).items(), key=lambda item: (-item[1], sorted(item[0])))
  if len(given) > 1 and given[0][1] == given[1][1]:
    return ContentGroup(()), [Rejection(r.uri, rejections.LABEL_CONFLICT, _conflict_detail(r, ordered, given))
                              for r in ordered]
  kept = next(r for r in ordered if _label_set(r) == given[0][0])
  dropped = [Rejection(r.uri, rejections.DUPLICATE, _duplicate_detail(r, kept, len(ordered), given[0][1]))
             for r in ordered if r is not kept]
  return ContentGroup((kept,)), dropped


# A near-copy group is placed in a bucket of its own beside its representative's content bucket:
# the suffix sorts after every hex digit, so 'ab~' comes right after 'ab' in the hash order, and
# the bucket's offsets count it apart from 'ab', whose records other workers place.
NEAR_BUCKET_SUFFIX = '~'


def near_bucket(content_bucket: str) -> str:
  return content_bucket + NEAR_BUCKET_SUFFIX


def is_near_bucket(bucket: str) -> bool:
  return bucket.endswith(NEAR_BUCKET_SUFFIX)


def _best_first(record: CheckedImage) -> Tuple[bool, int, int, str]:
  """--near_copies=drop's order of a group's files: undamaged first, then the most pixels, then
  the most bytes (the least compressed), then by content, never by name: renaming a file never
  changes which is kept."""
  return record.damaged, -record.height * record.width, -record.num_bytes, record.source_sha256


def merge_near_copies(groups: Iterable[ContentGroup], drop: bool) -> Tuple[ContentGroup, List[Rejection]]:
  """One group from the content groups of one near-copy group, and what --near_copies=drop drops.

  The records go in content-hash order, so the group ranks by its smallest hash as any group
  does. A split named for a member (manifest column, split folder) stays its own: near copies
  are found by likeness, which may be wrong, so they never move an image out of the split it
  was given; the members without one take the first given split (by uri). Under ``drop`` the
  best image (_best_first: undamaged, most pixels, most bytes) is kept and every other file of
  the group, exact copies too, is rejected as a near duplicate naming it."""
  records = sorted((record for group in groups for record in group.records),
                   key=lambda r: (r.source_sha256, r.uri))
  given = next((r.split for r in sorted(records, key=lambda r: r.uri) if r.split), None)
  records = [r if r.split or not given else r.with_split(given) for r in records]
  if not drop:
    return ContentGroup(tuple(records)), []
  kept = min(records, key=_best_first)
  dropped = [Rejection(r.uri, rejections.NEAR_DUPLICATE,
                       f'a near copy of {kept.uri}, which is kept (--near_copies=drop keeps the best image: '
                       'undamaged, then the most pixels, then the most bytes)')
             for r in sorted(records, key=lambda r: r.uri) if r is not kept]
  return ContentGroup((kept,)), dropped


def duplicate_group_entry(records: Sequence[CheckedImage], kept: Optional[CheckedImage], dedupe: bool
                          ) -> Dict[str, Any]:
  """How beam_pipeline.json lists one group of identical files: its files (sorted uris), each's
  label, under --dedupe the one ``kept`` (none where every copy was rejected as label_conflict),
  and whether their labels conflict."""
  ordered = sorted(records, key=lambda r: r.uri)
  entry: Dict[str, Any] = {'images': [r.uri for r in ordered], 'labels': [_label_names(r) for r in ordered]}
  if dedupe:
    entry['kept'] = kept.uri if kept is not None else None
  if labels_conflict(records):
    entry['label_conflict'] = True
  return entry


def near_group_entry(records: Sequence[CheckedImage], split: Optional[str] = None,
                     kept: Optional[CheckedImage] = None) -> Dict[str, Any]:
  """How beam_pipeline.json lists one near-copy group of ``records``: its files (sorted uris),
  each's label, and the ``split`` they are in (comma-separated where a manifest or folders gave its files
  different ones), or under --near_copies=drop the one ``kept``; and whether their labels
  conflict."""
  ordered = sorted(records, key=lambda r: r.uri)
  entry: Dict[str, Any] = {'images': [r.uri for r in ordered], 'labels': [_label_names(r) for r in ordered]}
  if kept is not None:
    entry['kept'] = kept.uri
  else:
    entry['split'] = split
  if labels_conflict(records):
    entry['label_conflict'] = True
  return entry


def _label_set(record: CheckedImage) -> FrozenSet[str]:
  """A record's labels, as a set: the order a --multi_label row names them in is no conflict."""
  return frozenset(record.labels or ([record.label] if record.label is not None else []))


def labels_conflict(records: Iterable[CheckedImage]) -> bool:
  """Whether identical files were given different labels: one picture that training would see
  as two classes (without --dedupe), or whose other labels --dedupe drops."""
  return len({_label_set(record) for record in records}) > 1


def _label_names(record: CheckedImage) -> str:
  """A record's labels as a group's entry lists them: 'cat, dog', '' for none."""
  return ', '.join(record.labels or ((record.label,) if record.label is not None else ()))


def _label_text(record: CheckedImage) -> str:
  """A record's labels as an errors line names them: "'cat', 'dog'", or 'no label'."""
  labels = record.labels or ((record.label,) if record.label is not None else ())
  return ', '.join(repr(label) for label in labels) or 'no label'


def _duplicate_detail(copy: CheckedImage, kept: CheckedImage, copies: int, with_kept_label: int) -> str:
  """The errors line of a copy --dedupe drops: whose copy it is, and whether their labels
  conflict (then which label won, and by how many of the copies).

  Args:
    copy: the copy dropped.
    kept: the copy --dedupe keeps, whose labels won.
    copies: how many copies the picture has, the kept one included.
    with_kept_label: how many of them give the kept one's labels.
  """
  detail = f'same content as {kept.uri} (--dedupe keeps one copy)'
  if _label_set(copy) == _label_set(kept):
    return detail
  return (f'{detail}; the labels conflict: {_label_text(copy)} here, {_label_text(kept)} on {kept.uri}, '
          f'which is kept with its label, given by {with_kept_label} of the {copies} copies')


def _conflict_detail(copy: CheckedImage, copies: Sequence[CheckedImage], given: Sequence[Tuple[FrozenSet[str], int]]
                     ) -> str:
  """The errors line of a copy of a picture whose copies give no one label most."""
  labels = '; '.join(f'{", ".join(repr(label) for label in sorted(labels)) or "no label"} by {count}'
                     for labels, count in given)
  return (f'the same picture as {", ".join(r.uri for r in copies if r is not copy)} under other labels ({labels}): '
          'no one label is given most, so --dedupe keeps none; give the copies one label, or remove those wrongly '
          'labelled')


def class_weights(bucket: str, groups: Iterable[ContentGroup]) -> Iterable[Tuple[Tuple[str, str], int]]:
  """((class, bucket), images) of one content bucket, for the groups whose split is not given."""
  weights = collections.Counter()
  for group in groups:
    if not group.records[0].split:
      weights[group.stratum, bucket] += group.weight
  return weights.items()


def given_weights(groups: Iterable[ContentGroup]) -> Iterable[Tuple[Tuple[str, str], int]]:
  """((class, split), images) of the groups whose split is given: in an --incremental update, new
  copies and near copies of catalogued pictures (placed in their pictures' splits), which a class's
  fractions count as it counts the kept records (fractions_after)."""
  weights = collections.Counter()
  for group in groups:
    if group.records[0].split:
      weights[group.stratum, group.records[0].split] += group.weight
  return weights.items()


def fractions_after(spec: SplitSpec, kept: Mapping[str, int], new: int) -> Tuple[float, ...]:
  """The fractions ``new`` images of a class are split by, when the class already holds ``kept``
  images per split (an --incremental output's): each split gets what it lacks of its share of
  the class's total after, in proportion where a split already holds more than its share, so
  the class's fractions come back to the requested ones as closely as the new images allow."""
  total = sum(kept.values()) + new
  lacking = [max(0.0, fraction * total - kept.get(name, 0)) for name, fraction in zip(spec.names, spec.fractions)]
  if not new or not kept or sum(lacking) <= 0:
    return spec.fractions
  return tuple(value / sum(lacking) for value in lacking)


def assign_splits(bucket: str, groups: Iterable[ContentGroup], spec: SplitSpec,
                  placed: hash_order.Offsets, kept: Optional[Mapping[str, Mapping[str, int]]] = None
                  ) -> Iterator[CheckedImage]:
  """Gives every record of one content bucket its split.

  Args:
    bucket: the content bucket: a prefix of its records' content hashes (a near bucket's ends in NEAR_BUCKET_SUFFIX).
    groups: its content groups; a group whose split is given keeps it.
    spec: the splits' names and fractions (--splits).
    placed: every bucket's class_weights, as offsets per class.
    kept: each class's images per split that an --incremental output holds already (and the new ones whose split
      is given), which the class's new images make up for (fractions_after); None outside an update.
  """
  pending: Dict[str, List[ContentGroup]] = collections.defaultdict(list)
  for group in groups:
    if group.records[0].split:
      yield from group.records
    else:
      pending[group.stratum].append(group)
  for stratum, stratum_groups in pending.items():
    stratum_groups.sort(key=lambda g: g.records[0].source_sha256)
    total = placed[stratum].total
    boundaries = list(itertools.accumulate(fractions_after(spec, kept[stratum], total) if kept is not None
                                           else spec.fractions))
    for group, midpoint in hash_order.midpoints(stratum_groups, lambda g: g.weight, bucket, placed[stratum]):
      index = min(bisect.bisect_right(boundaries, midpoint / total), len(boundaries) - 1)  # the first bound above
      for record in group.records:
        yield record.with_split(spec.names[index])
