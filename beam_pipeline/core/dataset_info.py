"""dataset_info.json: what a completed run wrote, for readers, inspection and audits.

It is the commit marker too: written last, so an output without it is not to be read.
"""
import datetime
import json
import os
from typing import IO, Any, Callable, Dict, Iterable, List, Mapping

from beam_pipeline import __version__
from beam_pipeline.core import uris

FILE_NAME = 'dataset_info.json'


def read(output: str, exists: Callable[[str], bool] = os.path.exists,
         open_file: Callable[[str], IO] = open) -> Dict[str, Any]:
  """The dataset_info.json of a completed run; FileNotFoundError for any other directory.

  ``exists`` and ``open_file`` reach the file: the built-ins for a local output, Beam's
  FileSystems or tf.io.gfile for any, from the caller that has them.
  """
  path = uris.join(output, FILE_NAME)
  if not exists(path):
    raise FileNotFoundError(f'{path} does not exist: {output} is not a completed conversion (it is still '
                            'running, was interrupted or failed, or is not an output of beam_pipeline)')
  with open_file(path) as f:
    return json.load(f)


def summary(info: Mapping[str, Any], output: str) -> List[str]:
  """A few human-readable lines about a completed output."""
  splits = ', '.join(f'{name}: {split["num_examples"]} in {len(split["shards"])} shard(s)'
                     for name, split in info['splits'].items())
  lines = [f'{info["num_examples"]} examples ({splits or "none"}), {info["num_classes"]} classes, in {output}']
  if info['num_errors']:
    reasons = ', '.join(f'{reason}: {count}' for reason, count in info['errors_by_reason'].items())
    lines.append(f'Rejected {info["num_errors"]} inputs ({reasons}); see '
                 f'{uris.join(output, info["errors_file"])}')
  else:
    lines.append('Rejected no inputs.')
  duplicates = info.get('duplicates', {})
  if duplicates.get('num_groups'):
    what = 'removed' if duplicates['removed'] else 'kept, each group in one split'
    lines.append(f'{duplicates["num_extra_copies"]} duplicate copies in {duplicates["num_groups"]} groups ({what}).')
  return lines


MAX_LISTED_DUPLICATE_GROUPS = 1000


def build(*, shards: Iterable[Mapping[str, Any]], labels: List[str], errors_by_reason: Mapping[str, int],
          errors_file: str, duplicates: List[List[str]], dedupe: bool, settings: Mapping[str, Any],
          runner: str) -> Dict[str, Any]:
  """Counts per split come from the shards as written, so they match the files."""
  splits: Dict[str, Dict[str, Any]] = {}
  for shard in sorted(shards, key=lambda s: s['file']):
    split = splits.setdefault(shard['split'], {'num_examples': 0, 'num_bytes': 0, 'shards': []})
    split['num_examples'] += shard['num_examples']
    split['num_bytes'] += shard['num_bytes']
    split['shards'].append({k: shard[k] for k in ('file', 'num_examples', 'num_bytes')})
  return {
      'tool': 'beam_pipeline',
      'version': __version__,
      'created': datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
      'num_examples': sum(split['num_examples'] for split in splits.values()),
      'splits': dict(sorted(splits.items())),
      'labels': labels,
      'num_classes': len(labels),
      'num_errors': sum(errors_by_reason.values()),
      'errors_by_reason': dict(sorted(errors_by_reason.items())),
      'errors_file': errors_file,
      'duplicates': {
          'num_groups': len(duplicates),
          'num_extra_copies': sum(len(group) - 1 for group in duplicates),
          'removed': dedupe,
          'groups': sorted(duplicates)[:MAX_LISTED_DUPLICATE_GROUPS],
      },
      'compression': settings['compression'],
      'schema': settings['schema'],
      'options': dict(settings, runner=runner),
  }


class ErrorBudgetExceeded(RuntimeError):
  """Too much of the input was rejected; the message is meant for the user as is."""

  PREFIX = 'error budget exceeded: '


def check_error_budget(num_written: int, errors_by_reason: Mapping[str, int], max_fraction: float,
                       errors_path: str) -> None:
  """Raises ErrorBudgetExceeded naming the top reasons if too large a share was rejected."""
  rejected = sum(errors_by_reason.values())
  total = num_written + rejected
  if not total or rejected / total <= max_fraction:
    return
  top = sorted(errors_by_reason.items(), key=lambda item: (-item[1], item[0]))[:3]
  reasons = ', '.join(f'{reason} {count}' for reason, count in top)
  raise ErrorBudgetExceeded(
      f'{ErrorBudgetExceeded.PREFIX}{rejected} of {total} inputs ({rejected / total:.1%}) were rejected, '
      f'more than --max_error_fraction={max_fraction:g}; top reasons: {reasons}; see {errors_path}')


def dumps(info: Mapping[str, Any]) -> str:
  return json.dumps(info, indent=2, sort_keys=False, ensure_ascii=False) + '\n'
