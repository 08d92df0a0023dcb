"""``inspect``'s text: a completed output at a glance, its rejected files by reason, and its groups of copies."""
import collections
import json
from typing import Any, Dict, List, Mapping, Tuple

from beam_pipeline.core import uris
from beam_pipeline.core.output.run_record import RunRecord
from beam_pipeline.inspection import files, summary
from beam_pipeline.core.console.quantities import counted

# Rows of the class table, and examples shown per rejection reason.
LISTED_CLASSES = 30
EXAMPLES_PER_REASON = 3


def glance(info: RunRecord, output: str) -> List[str]:
  """Splits and shards, classes and their balance, image sizes, rejections, options."""
  lines = summary.held(summary.of(info, output), info)
  splits = info.splits
  for split in splits.values():
    for shard in split.shards:
      lines.append(f'  {shard.file}: {counted(shard.num_examples, "example")}, {counted(shard.num_bytes, "byte")}')
  # A detection set's images rarely have a class of their own: its objects' table replaces one of zeros.
  objects = {name: split.objects for name, split in splits.items() if split.objects is not None}
  if not objects or any(any(split.classes.values()) for split in splits.values()):
    lines += _class_table(info.labels, {name: (split.classes, split.num_examples) for name, split in splits.items()},
                          'examples')
  if objects:
    lines += _class_table(info.labels, {name: (counts, sum(counts.values())) for name, counts in objects.items()},
                          'objects')
  for field, unit, title in (('longer_side_px', 'px', 'longer side'), ('kib', 'KiB', 'stored size')):
    lines.append(f'Images by {title}:')
    for name, split in splits.items():
      bins = ', '.join(f'{bin_label(edge, unit)} {count:,}' for edge, count in getattr(split, field).items())
      lines.append(f'  {name}: {bins or "none"}')
  lines += _quality(info)
  lines.append('Options: ' + ', '.join(f'{key}={json.dumps(value)}' for key, value in info.options.items()))
  return lines


def _quality(info: RunRecord) -> List[str]:
  """Images per data-quality flag, split by split and class by class (those of a split without
  flagged images are left out)."""
  if not summary.quality_totals(info):
    return []
  lines = ['Data-quality flags (images stored; worth a look), by split and class:']
  for name, split in info.splits.items():
    for flag, per_class in (split.quality or {}).items():
      classes = ', '.join(f'{label or "(no class)"} {count:,}'
                          for label, count in list(per_class.items())[:LISTED_CLASSES])
      more = f', ... and {len(per_class) - LISTED_CLASSES} more classes' if len(per_class) > LISTED_CLASSES else ''
      lines.append(f'  {name}: {flag} {sum(per_class.values()):,}: {classes}{more}')
  return lines


def errors(info: RunRecord, output: str) -> List[str]:
  """The errors files grouped by reason, largest group first, with the first few files of
  each; read line by line, keeping only counts and those few."""
  counts: Dict[str, int] = collections.Counter()
  examples: Dict[str, List[dict]] = collections.defaultdict(list)
  for name in info.errors_files:
    with files.open_text(uris.join(output, name)) as f:
      for line in f:
        if line.strip():
          error = json.loads(line)
          counts[error['reason']] += 1
          if len(examples[error['reason']]) < EXAMPLES_PER_REASON:
            examples[error['reason']].append(error)
  if not counts:
    return ['No input was rejected.']
  lines = []
  for reason, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
    lines.append(f'{reason}: {count:,}')
    for error in examples[reason]:
      lines.append(f'  {error["uri"]}: {error["detail"]}')
    if count > EXAMPLES_PER_REASON:
      lines.append(f'  ... and {count - EXAMPLES_PER_REASON:,} more')
  return lines


def duplicates(info: RunRecord) -> List[str]:
  """The groups of exact and of near copies as the record lists them (the first
  MAX_LISTED_DUPLICATE_GROUPS of each), each file with where it went, and how many are not listed."""
  exact = info.duplicates
  what = ('--dedupe kept one of each, with the label most copies give, removed the rest' if exact.removed
          else 'each group in one split')
  lines = [f'Exact copies: {counted(exact.num_groups, "group")}, '
           f'{counted(exact.num_extra_copies, "extra copy", "extra copies")} ({what}).' if exact.num_groups
           else 'Exact copies: none.']
  for number, group in enumerate(exact.groups, 1):
    if isinstance(group, list):  # a record before group entries: its uris, the first kept under --dedupe
      group = {'images': group, **({'kept': group[0]} if exact.removed else {})}
    lines.append(f'  group {number}' + (': labels conflict' if group.get('label_conflict') else ''))
    labels = group.get('labels') or [''] * len(group['images'])
    for uri, label in zip(group['images'], labels):
      status = _copy_status(uri, group) if exact.removed else ''
      lines.append(f'    {uri}' + ''.join(f'  {part}' for part in (label, status) if part))
  lines += _unlisted(exact.num_groups, len(exact.groups))
  near = info.near_duplicates
  if near is None:
    return lines + ['Near copies: not looked for (--near_copies=off, or an output written before they were).']
  what = ('the best of each kept (undamaged, most pixels, most bytes), the rest removed' if near.removed
          else 'each group in one split')
  if not near.num_groups:
    return lines + [f'Near copies (perceptual hashes within {near.distance} bits): none.']
  lines.append(f'Near copies (perceptual hashes within {near.distance} bits): {counted(near.num_groups, "group")} of '
               f'{counted(near.num_images, "image")} ({what}).')
  for number, group in enumerate(near.groups, 1):
    about = ', '.join(filter(None, (group.get('split'), 'labels conflict' if group.get('label_conflict') else '')))
    lines.append(f'  group {number}' + (f': {about}' if about else ''))
    labels = group.get('labels') or [''] * len(group['images'])
    for uri, label in zip(group['images'], labels):
      status = near_copy_status(uri, group) if near.removed else ''
      lines.append(f'    {uri}' + ''.join(f'  {part}' for part in (label, status) if part))
  return lines + _unlisted(near.num_groups, len(near.groups))


def _copy_status(uri: str, group: Mapping[str, Any]) -> str:
  """What --dedupe did with a file of a listed group of identical files."""
  if group.get('kept') is None:
    return 'rejected (label_conflict)'
  return 'kept' if uri == group['kept'] else 'removed'


def near_copy_status(uri: str, group: Mapping[str, Any]) -> str:
  """Where a file of a listed near-copy group went: the group's split, or under --near_copies=drop
  kept or removed."""
  if 'kept' in group:
    return 'kept' if uri == group['kept'] else 'removed'
  return group.get('split') or ''


def _unlisted(total: int, listed: int) -> List[str]:
  if total <= listed:
    return []
  return [f'  ... and {total - listed:,} more groups, not listed (beam_pipeline.json lists the first {listed:,})']


def _class_table(labels: List[str], splits: Mapping[str, Tuple[Mapping[str, int], int]], what: str) -> List[str]:
  """A row per class: its ``what`` (examples, or objects with --annotations) in each split,
  ``splits`` giving each split's counts by class and their total."""
  if not labels:
    return ['Classes: none (unlabeled)']
  width = max(len(label) for label in labels[:LISTED_CLASSES])
  header = ''.join(f'{name:>22}' for name in splits)
  share = 'each split\'s objects' if what == 'objects' else 'each split'
  lines = [f'Classes ({len(labels)}), {what} and share of {share}:', f'  {"":<{width}}{header}']
  for label in labels[:LISTED_CLASSES]:
    cells = ''
    for counts, total in splits.values():
      count = counts.get(label, 0)
      cells += f'{count:>14,} ({count / max(total, 1):5.1%})'
    lines.append(f'  {label:<{width}}{cells}')
  if len(labels) > LISTED_CLASSES:
    lines.append(f'  ... and {len(labels) - LISTED_CLASSES} more classes')
  return lines


def bin_label(edge: str, unit: str) -> str:
  """A size histogram's bin (run_totals.size_bin: keyed by its power-of-two lower edge) for people.
  Sides are whole pixels, so '256-511 px' (and '1 px'); sizes are floored to KiB but any number
  of bytes, so their bins meet: '<1 KiB', '1-2 KiB', '512 KiB-1 MiB', '1-2 MiB'."""
  low = int(edge)
  if unit != 'KiB':
    return f'{low} {unit}' if low <= 1 else f'{low}-{2 * low - 1} {unit}'
  if low == 0:
    return '<1 KiB'
  (start, start_unit), (end, end_unit) = _kib(low), _kib(2 * low)
  return f'{start}-{end} {end_unit}' if start_unit == end_unit else f'{start} {start_unit}-{end} {end_unit}'


def _kib(value: int) -> Tuple[int, str]:
  """A power of two of KiB in the largest binary unit it is a whole number of."""
  units = ('KiB', 'MiB', 'GiB', 'TiB')
  index = 0
  while value >= 1024 and index < len(units) - 1:
    value, index = value // 1024, index + 1
  return value, units[index]
