"""What a completed conversion wrote, in a few lines or as JSON: printed at the end of a
run and by ``inspect``."""
import math
from typing import Any, Dict, List, Mapping, Optional

from beam_pipeline.core import rejections, uris
from beam_pipeline.core.console.quantities import binary_size, counted, noun, rate
from beam_pipeline.core.output.run_record import RunRecord

# Classes listed by name in a split's line; more are summarized by their smallest and largest counts.
LISTED_CLASSES = 8


def of(info: RunRecord, output: str, wall_seconds: Optional[float] = None) -> Dict[str, Any]:
  """The summary of ``info`` (beam_pipeline.json) as plain values, for --json and for its lines."""
  # Copies --dedupe dropped are inputs too (earlier versions counted them as errors).
  # An annotation that could not be used (--annotations) is an error, but no input image.
  bad_annotations = info.errors_by_reason.get(rejections.BAD_ANNOTATION, 0)
  near = info.near_duplicates
  inputs = (info.num_examples + info.num_errors - bad_annotations + info.duplicates.num_removed
            + (near.num_removed if near else 0))
  duplicates = info.duplicates
  summary = {
      'output': output,
      'num_inputs': inputs,
      'num_examples': info.num_examples,
      'num_classes': info.num_classes,
      'splits': {name: {'num_examples': split.num_examples, 'num_bytes': split.num_bytes,
                        'num_shards': len(split.shards), 'classes': split.classes,
                        **({'objects': split.objects} if split.objects is not None else {}),
                        **({'quality': split.quality} if split.quality else {}),
                        'shards': [shard.as_dict() for shard in split.shards]}
                 for name, split in info.splits.items()},
      'num_errors': info.num_errors - bad_annotations,
      'errors_by_reason': {reason: count for reason, count in info.errors_by_reason.items()
                           if reason != rejections.BAD_ANNOTATION},
      **({'num_bad_annotations': bad_annotations} if bad_annotations else {}),
      'num_skipped': info.num_skipped or 0,  # no images (.DS_Store, notes.txt): listed, but no inputs and no errors
      'errors_file': uris.join(output, info.errors_file),
      'duplicates': {'num_groups': duplicates.num_groups, 'num_extra_copies': duplicates.num_extra_copies,
                     'removed': duplicates.removed,
                     **({'num_label_conflicts': duplicates.num_label_conflicts}
                        if duplicates.num_label_conflicts else {})},
      'num_damaged_jpeg': info.num_damaged_jpeg,
      'strict_jpeg': info.options.get('strict_jpeg', False),
  }
  if near:
    summary['near_duplicates'] = {'distance': near.distance, 'num_groups': near.num_groups,
                                  'num_images': near.num_images, 'removed': near.removed,
                                  'num_removed': near.num_removed,
                                  **({'num_label_conflicts': near.num_label_conflicts}
                                     if near.num_label_conflicts else {}),
                                  **({'left_out': near.left_out} if near.left_out else {}),
                                  **({'largest_group': near.largest_group} if near.largest_group else {})}
  quality = quality_totals(info)
  if quality:
    summary['quality'] = quality
  if info.update:
    summary['update'] = info.update.as_dict()
  embedding = info.embedding
  if embedding:
    summary['embedding'] = {'model': embedding.model, 'sha256': embedding.sha256,
                            'output_shape': embedding.output_shape, 'images_stored': embedding.images_stored}
  if wall_seconds is not None:
    summary.update(wall_seconds=round(wall_seconds, 2), images_per_second=round(inputs / max(wall_seconds, 1e-9), 3))
  return summary


def quality_totals(info: RunRecord) -> Dict[str, int]:
  """Images per data-quality flag over every split and class, most first."""
  totals: Dict[str, int] = {}
  for split in info.splits.values():
    for flag, per_class in (split.quality or {}).items():
      totals[flag] = totals.get(flag, 0) + sum(per_class.values())
  return dict(sorted(totals.items(), key=lambda item: (-item[1], item[0])))


def lines(summary: Mapping[str, Any]) -> List[str]:
  """The summary for people, as a run ends: what it wrote, then details()."""
  speed = ''
  if 'wall_seconds' in summary:
    speed = f' in {summary["wall_seconds"]:.1f} s ({rate(summary["images_per_second"], "images")})'
  update = summary.get('update')
  if update and not update.get('full_conversion'):
    return [*updated(summary, update, speed), *details(summary)]
  return [f'Wrote {counted(summary["num_examples"], "example")} of {counted(summary["num_inputs"], "image")}, '
          f'{counted(summary["num_classes"], "class", "classes")}, to {summary["output"]}{speed}', *details(summary)]


def _touched(update: Mapping[str, Any]) -> str:
  touched = update.get('touched')
  return f', {touched:,} touched (new fingerprint, same bytes: records kept)' if touched else ''


def updated(summary: Mapping[str, Any], update: Mapping[str, Any], speed: str) -> List[str]:
  """What an --incremental run changed: its inputs, its shards, and the classes a model's head
  must now have."""
  lines_ = [f'Updated {summary["output"]}{speed}: {update["added"]:,} added, {update["changed"]:,} changed, '
            f'{update["removed"]:,} removed, {update["unchanged"]:,} unchanged{_touched(update)}; now '
            f'{counted(summary["num_examples"], "example")}, {counted(summary["num_classes"], "class", "classes")}',
            f'  shards: {update["shards_written"]:,} new, {update["shards_rewritten"]:,} written again, '
            f'{update["shards_kept"]:,} kept as they were']
  if update['new_classes']:
    earlier = summary['num_classes'] - len(update['new_classes'])
    lines_.append(f'The class count changed from {earlier:,} to {summary["num_classes"]:,} '
                  f'({", ".join(update["new_classes"][:5])}{", ..." if len(update["new_classes"]) > 5 else ""} '
                  "added after the earlier ids): a model's output layer must change with it")
  return lines_


def held(summary: Mapping[str, Any], info: RunRecord) -> List[str]:
  """The summary for people, of an output as it is (inspect): what it holds and whence, then details()."""
  return [f'{summary["output"]} holds {counted(summary["num_examples"], "example")} of '
          f'{counted(summary["num_inputs"], "image")}, {counted(summary["num_classes"], "class", "classes")}, '
          f'converted from {info.input_given() or "an input not recorded"} on {info.created} by beam_pipeline '
          f'{info.version}', *details(summary)]


def details(summary: Mapping[str, Any]) -> List[str]:
  """The summary's lines after its first: splits, shards and classes; rejections, skipped files,
  embeddings, damaged JPEGs, duplicates."""
  result = []
  width = max((len(name) for name in summary['splits']), default=0)
  for name, split in summary['splits'].items():
    shards = split['num_shards']
    sizes = list(dict.fromkeys(binary_size(size) for size in sorted(shard['num_bytes'] for shard in split['shards'])))
    size = sizes[0] + (' each' if shards > 1 else '') if len(sizes) == 1 else f'{sizes[0]} to {sizes[-1]} each'
    result.append(f'  {name:<{width}}  {split["num_examples"]:>9,} {noun(split["num_examples"], "example")} in '
                  f'{counted(shards, "shard")} ({size}){_classes(split["classes"])}')
    if 'objects' in split:
      objects = sum(split["objects"].values())
      result.append(f'  {"":<{width}}  {objects:>9,} {noun(objects, "object")}'
                    f'{_classes(split["objects"], "objects")}')
  if summary['num_errors']:
    reasons = ', '.join(f'{reason} {count:,}' for reason, count in
                        sorted(summary['errors_by_reason'].items(), key=lambda item: (-item[1], item[0])))
    result.append(f'Rejected {counted(summary["num_errors"], "input")}: {reasons}; see {summary["errors_file"]}')
  else:
    result.append('Rejected no inputs.')
  if summary.get('num_skipped'):
    result.append(f'Skipped {counted(summary["num_skipped"], "file")} as no images (system and hidden files, .txt, '
                  f'.json, ...), not errors; see {summary["errors_file"]}')
  if summary.get('num_bad_annotations'):
    result.append(f'{counted(summary["num_bad_annotations"], "annotation")} could not be used (bad_annotation); '
                  f'see {summary["errors_file"]}')
  if 'embedding' in summary:
    embedding = summary['embedding']
    stored = 'beside each image' if embedding['images_stored'] else 'instead of the images (--embedding_only)'
    shape = embedding['output_shape']
    result.append(f'Embeddings shaped {"x".join(map(str, shape))} ({math.prod(shape):,} floats) {stored}, from '
                  f'{embedding["model"]} (sha256 {embedding["sha256"][:12]}...).')
  if summary['num_damaged_jpeg'] and not summary['strict_jpeg']:
    result.append(f'{summary["num_damaged_jpeg"]:,} JPEGs decode only with libjpeg warnings (damaged data) and were '
                  'stored; stricter decoders (NVIDIA DALI) refuse them, --strict_jpeg rejects them.')
  duplicates = summary['duplicates']
  if duplicates['num_groups']:
    what = 'removed' if duplicates['removed'] else 'kept, each group in one split'
    result.append(f'{counted(duplicates["num_extra_copies"], "duplicate copy", "duplicate copies")} in '
                  f'{counted(duplicates["num_groups"], "group")} ({what}).')
  near = summary.get('near_duplicates')
  if near and near['num_groups']:
    what = (f'the best of each kept (undamaged, most pixels, most bytes), {near["num_removed"]:,} removed'
            if near['removed']
            else 'each group in one split')
    conflicts = (f', {counted(near["num_label_conflicts"], "group")} with conflicting labels'
                 if near.get('num_label_conflicts') else '')
    result.append(f'{counted(near["num_images"], "image")} in {counted(near["num_groups"], "group")} of near copies '
                  f'(perceptual hashes within {near["distance"]} bits; {what}{conflicts}); inspect '
                  '--near_duplicates draws them.')
  left = near.get('left_out', {}) if near else {}
  if left.get('uniform_images'):
    result.append(f'{counted(left["uniform_images"], "near-uniform image")} (all one colour, or nearly) '
                  'share a perceptual hash with more than a thousand others and were not grouped as near copies.')
  if left.get('look_alike_images'):
    mostly = (' Most of this collection looks alike (the frames of one camera, products on one background?).'
              if left['look_alike_images'] * 2 > summary['num_inputs'] else '')
    result.append(f'{counted(left["look_alike_images"], "image")} in {counted(left["look_alike_sets"], "set")} of '
                  f'look-alikes (more than {near.get("largest_group", 0):,} images within {near["distance"]} bits of '
                  'one picture) were not kept together, as a set that large would take a split\'s share away: they '
                  f'are split image by image, as unrelated images are.{mostly}')
  partly = left.get('over_cap_hashes', 0) + left.get('cut_short_hashes', 0)
  if partly:
    result.append(f'{counted(partly, "perceptual hash", "perceptual hashes")} were compared only in part (the '
                  'bounds that keep the grouping small); some near copies among them may have been missed '
                  '(near_duplicates.left_out).')
  if summary.get('quality'):
    flags = ', '.join(f'{flag} {count:,}' for flag, count in summary['quality'].items())
    result.append(f'Worth a look, by their data-quality flags: {flags} (stored; inspect lists them by class and split, '
                  '--reject_quality rejects them).')
  if duplicates.get('num_label_conflicts'):
    kept = ('--dedupe kept a copy with the label most copies give, and none where no one label is given most: '
            'label_conflict; the errors file names them' if duplicates['removed']
            else 'each copy kept with its own label: training sees one picture as different classes')
    result.append(f'Conflicting labels in {counted(duplicates["num_label_conflicts"], "group")} of identical files '
                  f'({kept}).')
  return result


def _classes(classes: Mapping[str, int], what: str = 'examples') -> str:
  if not classes:
    return ''
  if len(classes) <= LISTED_CLASSES:
    return ': ' + ', '.join(f'{label} {count:,}' for label, count in classes.items())
  return f': {len(classes)} classes, {min(classes.values()):,}-{max(classes.values()):,} {what} each'
