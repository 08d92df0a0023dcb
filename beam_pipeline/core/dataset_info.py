"""beam_pipeline.json of a run: what each written shard reports, summed up shard by shard,
built into its run_record.RunRecord, and the error budget the run is held to.
"""
import collections
import dataclasses
import datetime
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from beam_pipeline import __version__
from beam_pipeline.core import errors_output, rejections, schemas
from beam_pipeline.core.run_record import Duplicates, Embedding, RunRecord, Shard, Split
from beam_pipeline.core.settings import EmbeddingSpec


def size_bin(value: int) -> str:
  """The power of two at or below ``value`` (0 for 0): the bins of the size histograms."""
  return str(1 << (value.bit_length() - 1) if value > 0 else 0)


def image_statistics(labels: Iterable[Union[None, str, Tuple[str, ...]]], longer_sides: Iterable[int],
                     stored_bytes: Iterable[int]) -> Dict[str, Dict[str, int]]:
  """A shard's counts per class and histograms of its images' longer side (pixels) and stored
  size (KiB, in power-of-two bins): what beam_pipeline.json holds per split. An image's label
  may be a tuple (--multi_label), each of whose classes it counts once."""
  texts = (text for label in labels for text in ((label,) if isinstance(label, str) else label or ()))
  return {'classes': dict(collections.Counter(texts)),
          'longer_side_px': dict(collections.Counter(map(size_bin, longer_sides))),
          'kib': dict(collections.Counter(size_bin(size // 1024) for size in stored_bytes))}


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


# What each written shard reports (shard_writer.py) that beam_pipeline.json sums up: counts of the
# run, and per split histograms.
_COUNTS = ('num_reencoded', 'num_resized', 'num_rotated', 'num_damaged_jpeg')
_HISTOGRAMS = ('classes', 'longer_side_px', 'kib')
_SHARD_FIELDS = tuple(field.name for field in dataclasses.fields(Shard))


def written_totals(shards: Iterable[Mapping[str, Any]]) -> Dict[str, Any]:
  """What beam_pipeline.json says of written shards, summed: per split its examples, bytes,
  histograms and shards (file, num_examples, num_bytes); and the run's counts. A combiner
  sums them up shard by shard (add_shard) and merges its partial totals (add_totals),
  never holding every shard's histograms at once: 100 million images in 1,000 classes
  make 70,000 shards of hundreds of classes each."""
  totals: Dict[str, Any] = {'splits': {}, **{key: 0 for key in _COUNTS}}
  for shard in shards:
    add_shard(totals, shard)
  return totals


def add_shard(into: Dict[str, Any], shard: Mapping[str, Any]) -> Dict[str, Any]:
  """``into`` (changed) with one written shard's report added."""
  for key in _COUNTS:
    into[key] += shard[key]
  listed = {key: shard[key] for key in _SHARD_FIELDS if key in shard}
  _add_split(_split_totals(into, shard['split']), shard, [listed])
  return into


def add_totals(into: Dict[str, Any], more: Mapping[str, Any]) -> Dict[str, Any]:
  """``into`` (changed) with the totals ``more`` added."""
  for key in _COUNTS:
    into[key] += more[key]
  for name, split in more['splits'].items():
    _add_split(_split_totals(into, name), split, split['shards'])
  return into


def _add_split(split: Dict[str, Any], more: Mapping[str, Any], shards: List[Mapping[str, Any]]) -> None:
  """A split's totals (changed) with the examples, bytes and histograms of ``more`` (a shard's
  report or another split's totals) and its ``shards`` added."""
  split['num_examples'] += more['num_examples']
  split['num_bytes'] += more['num_bytes']
  split['shards'].extend(shards)
  for field in _HISTOGRAMS:
    _add_counts(split[field], more[field])
  if 'objects' in more:  # with --annotations
    _add_counts(split.setdefault('objects', {}), more['objects'])


def _split_totals(totals: Dict[str, Any], name: str) -> Dict[str, Any]:
  return totals['splits'].setdefault(name, {'num_examples': 0, 'num_bytes': 0, 'shards': [],
                                            **{field: {} for field in _HISTOGRAMS}})


def _add_counts(into: Dict[str, int], more: Mapping[str, int]) -> None:
  for key, count in more.items():
    into[key] = into.get(key, 0) + count


def build(*, written: Mapping[str, Any], labels: List[str], errors_by_reason: Mapping[str, int],
          num_errors_files: int, duplicates: Mapping[str, Any], dedupe: bool, num_removed: int,
          settings: Mapping[str, Any], runner: str, embedding: Optional[Embedding] = None) -> RunRecord:
  """``written`` is written_totals of every shard: counts per split come from the shards as
  written, so they match the files. ``duplicates`` is how planning.DuplicateGroups sums
  up the groups of identical files: num_groups, num_extra_copies, num_label_conflicts, and the
  first MAX_LISTED_DUPLICATE_GROUPS groups.
  """
  order = {label: index for index, label in enumerate(labels)}
  splits = {}
  for name, split in sorted(written['splits'].items()):
    splits[name] = Split(num_examples=split['num_examples'], num_bytes=split['num_bytes'],
                         shards=[Shard(**shard) for shard in sorted(split['shards'], key=lambda shard: shard['file'])],
                         classes=dict(sorted(split['classes'].items(), key=lambda item: order[item[0]])),
                         **{field: dict(sorted(split[field].items(), key=lambda item: int(item[0])))
                            for field in ('longer_side_px', 'kib')},
                         objects=(dict(sorted(split['objects'].items(), key=lambda item: order[item[0]]))
                                  if 'objects' in split else None))
  return RunRecord(
      version=__version__,
      created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
      num_examples=sum(split.num_examples for split in splits.values()),
      num_reencoded=written['num_reencoded'],
      num_resized=written['num_resized'],
      num_rotated=written['num_rotated'],
      num_damaged_jpeg=errors_by_reason.get(rejections.DAMAGED_JPEG, 0) + written['num_damaged_jpeg'],
      splits=splits,
      labels=labels,
      num_classes=len(labels),
      num_errors=sum(errors_by_reason.values()),
      errors_by_reason=dict(sorted(errors_by_reason.items())),
      errors_file=errors_output.pattern(num_errors_files),
      errors_files=errors_output.file_names(num_errors_files),
      duplicates=Duplicates(num_groups=duplicates['num_groups'], num_extra_copies=duplicates['num_extra_copies'],
                            removed=dedupe, num_removed=num_removed,
                            num_label_conflicts=duplicates.get('num_label_conflicts') or None,
                            groups=duplicates['groups']),
      compression=settings['compression'],
      schema=settings['schema'],
      embedding=embedding,
      options=dict(settings, runner=runner),
  )


class ErrorBudgetExceeded(RuntimeError):
  """Too much of the input was rejected; the message is meant for the user as is."""

  PREFIX = 'error budget exceeded: '


def check_error_budget(num_written: int, errors_by_reason: Mapping[str, int], num_removed: int, max_fraction: float,
                       errors_path: str) -> None:
  """Raises ErrorBudgetExceeded naming the top reasons if too large a share of the inputs was
  rejected; ``num_removed`` copies that --dedupe dropped count as inputs, not as errors."""
  rejected = sum(errors_by_reason.values())
  total = num_written + rejected + num_removed
  if not total or rejected / total <= max_fraction:
    return
  top = sorted(errors_by_reason.items(), key=lambda item: (-item[1], item[0]))[:3]
  reasons = ', '.join(f'{reason} {count}' for reason, count in top)
  raise ErrorBudgetExceeded(
      f'{ErrorBudgetExceeded.PREFIX}{rejected} of {total} inputs ({rejected / total:.1%}) were rejected, '
      f'more than --max_error_fraction={max_fraction:g}; top reasons: {reasons}; see {errors_path}')
