"""Where a record's label comes from, and how labels become class ids."""
import functools
import json
import re
from typing import Iterable, List, Optional, Tuple

from beam_pipeline.core import rejections, uris
from beam_pipeline.core.inputs import class_names
from beam_pipeline.core.rejections import Rejected
from beam_pipeline.core.settings import LabelSource
from beam_pipeline.core.user_errors import UsageError

PARENT_DIR = 'parent_dir'
NONE = 'none'
REGEX = 'regex'
MANIFEST = 'manifest'


def is_label_mode(value: str) -> bool:
  return value in (PARENT_DIR, NONE, MANIFEST) or value.startswith(REGEX + ':')


def parse_label_source(value: Optional[str], from_manifest: bool) -> LabelSource:
  """Parses --label_source; the default is the manifest's column, else the parent directory."""
  if value is None:
    return LabelSource(MANIFEST if from_manifest else PARENT_DIR)
  if value in (PARENT_DIR, NONE):
    return LabelSource(value)
  if value == MANIFEST:
    if not from_manifest:
      raise UsageError('--label_source=manifest needs a CSV or JSONL manifest as --input; '
                       'use parent_dir, none or regex:<pattern> for globs and directories')
    return LabelSource(MANIFEST)
  if value.startswith(REGEX + ':'):
    pattern = value[len(REGEX) + 1:]
    try:
      groups = re.compile(pattern).groups
    except re.error as e:
      raise UsageError(f'--label_source=regex:{pattern} is not a valid regular expression ({e})') from None
    if groups != 1:
      raise UsageError(f'--label_source=regex:{pattern} must have exactly one capture group, '
                       f'it has {groups}; for example regex:^([a-z]+)\\.')
    return LabelSource(REGEX, pattern)
  raise UsageError(f'--label_source={value} is not one of parent_dir, none, manifest, regex:<pattern>')


def label_for(uri: str, manifest_label: Optional[str], source: LabelSource) -> Optional[str]:
  """The class name of one input (class_names.class_name: stripped, one line of text), or None
  for an unlabeled dataset. A manifest's empty label ('') is no label: an image of a labelled
  manifest without a class would be written with none."""
  if source.kind == NONE:
    return None
  if source.kind == MANIFEST:
    if manifest_label == '':
      raise Rejected(rejections.NO_LABEL, 'its manifest row gives an empty label (for an unlabelled dataset, use '
                                          '--label_source=none)')
    label = manifest_label
  else:
    directory, _, name = uri.rpartition('/')
    if not directory:  # 'x.jpg', '/x.jpg': the file system knows what the parent is
      directory, name = uris.split(uri)
    if source.kind == PARENT_DIR:
      label = _folder_name(directory)
      if not label:
        raise Rejected(rejections.NO_LABEL, 'file has no parent directory to take a label from')
    else:
      match = re.search(source.pattern, name)
      if not match or not match.group(1):
        raise Rejected(rejections.NO_LABEL,
                       f'file name {name!r} does not match --label_source=regex:{source.pattern}')
      label = match.group(1)
  if label is None:
    return None
  try:
    return class_names.class_name(label)
  except class_names.BadClassName as e:
    raise Rejected(rejections.NO_LABEL, f'label {label!r} {e}') from None


def labels_for(uri: str, manifest_labels: Tuple[str, ...], source: LabelSource) -> Tuple[str, ...]:
  """Every label text of one --multi_label input, each checked as label_for checks one; none
  unless they come from the manifest."""
  if source.kind != MANIFEST:
    return ()
  return tuple(label_for(uri, label, source) for label in manifest_labels)


@functools.lru_cache(maxsize=4096)
def _folder_name(directory: str) -> str:
  """The last component of a directory. Cached: the files of a class share it, and
  the split costs a getcwd each time."""
  return uris.split(directory)[1]


def sorted_labels(labels: Iterable[str]) -> List[str]:
  """Class order: numerically when every label is an integer ('2' before '10'), else by text."""
  unique = set(labels)
  if unique and all(_is_int(label) for label in unique):
    return sorted(unique, key=int)
  return sorted(unique)


def extended_labels(earlier: List[str], labels: Iterable[str]) -> List[str]:
  """An --incremental output's classes: the earlier ones with their ids, then the new ones in
  class order (sorted_labels), so that no record written before changes its meaning."""
  known = set(earlier)
  return list(earlier) + sorted_labels(label for label in labels if label not in known)


def labels_txt(labels: List[str]) -> str:
  """One label per line; the line number (from 0) is the class id."""
  return ''.join(label + '\n' for label in labels)


def label_map_pbtxt(labels: List[str]) -> str:
  """The Object Detection API's label map of labels.txt: ids 1-based (0 is the background).
  Written as text here: its proto (StringIntLabelMap) ships only with the Object Detection
  API, which this package does not depend on; json.dumps quotes names as text format reads them."""
  return ''.join(f'item {{\n  id: {number}\n  name: {json.dumps(label, ensure_ascii=False)}\n}}\n'
                 for number, label in enumerate(labels, start=1))


def _is_int(text: str) -> bool:
  try:
    int(text)
    return True
  except ValueError:
    return False
