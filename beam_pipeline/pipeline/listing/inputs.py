"""What --input names: a glob, a directory or a manifest, checked at launch (something to list,
a manifest that names an image), and the splits its folders or first row say.

Listing happens inside the pipeline (parts.py), from a single pattern or manifest path,
so a million-file input never travels in the job graph; at launch we only check that
there is something to list.
"""
import csv
import json
import os
from typing import Dict, Iterable, List, Optional

from apache_beam.io.filesystems import FileSystems

from beam_pipeline.pipeline.listing import local_files, manifest_files, object_listing
from beam_pipeline.core import rejections, split_names
from beam_pipeline.core.inputs import manifest_rows, manifest_text, skipped_files
from beam_pipeline.core.output import output_layout, run_record
from beam_pipeline.core.rejections import InputFileError
from beam_pipeline.core.settings import CSV, DIRECTORY, GLOB, JSONL, InputSpec
from beam_pipeline.core.user_errors import UsageError

_MANIFEST_SUFFIXES = {'.csv': CSV, '.csv.gz': CSV, '.jsonl': JSONL, '.jsonl.gz': JSONL,
                      '.ndjson': JSONL, '.json': JSONL}


def resolve_input(value: str) -> InputSpec:
  """Classifies --input and fails fast, in one line, if it names nothing."""
  if not value:
    raise UsageError('--input is required: a glob, a directory or a .csv/.jsonl manifest')
  lower = value.lower()
  if local_files.is_local_dir(value):  # before glob characters: 'Photos [2023]' is a directory
    if next(local_files.walk_local_files(value), None) is None:
      raise UsageError(f'--input={value} is an empty directory; give a glob, a directory of images or a manifest')
    spec = InputSpec(DIRECTORY, value.rstrip('/') + '/**')
    _check_not_all_skipped(value, spec, local_files.walk_local_files(value))
    return spec
  for suffix, kind in _MANIFEST_SUFFIXES.items():
    if lower.endswith(suffix):
      if not FileSystems.exists(value):
        raise UsageError(f'--input={value}: manifest not found')
      _check_names_images(value, kind)
      return InputSpec(kind, value)
  if any(c in value for c in '*?['):
    if not _has_match(value, value):
      raise UsageError(f'--input={value}: the pattern matches no files')
    spec = InputSpec(GLOB, value)
    if local_files.is_local(value):
      _check_not_all_skipped(value, spec, local_files.match_local_glob(value))
    return spec
  pattern = value.rstrip('/') + '/**'
  if _has_match(value, pattern):
    return InputSpec(DIRECTORY, pattern)
  if not value.endswith('/') and _has_match(value, value):
    return InputSpec(GLOB, value)  # a single file
  raise UsageError(f'--input={value} does not exist; give a glob, a directory of images or a manifest')


def listed_below(spec: InputSpec) -> Optional[str]:
  """Where the names a folder or glob input lists begin, which the skip rule reads (the folder,
  or the folder a glob starts in, with its '/'; '' for a glob in the current folder); None for a
  glob without a wildcard, which names its one file."""
  if spec.kind == DIRECTORY:
    return spec.path[:-len('**')]
  prefix = object_listing.fixed_prefix(spec.path)
  if prefix == spec.path:
    return None
  return prefix[:prefix.rfind('/') + 1]


def skip_reason(spec: InputSpec, path: str) -> Optional[str]:
  """Why listing ``spec`` skips the file ``path`` as no image (skipped_files, or a file of an
  output of this tool's that lies in a local input), or None."""
  below = listed_below(spec)
  if below is None or not path.startswith(below):
    return None
  output = _output_of_ours(os.path.dirname(path), below.rstrip('/')) if local_files.is_local(path) else None
  if output:
    return f'a file of {output}, an output of beam_pipeline (its shards, graph and reports)'
  return skipped_files.skip_reason(path[len(below):])


def _output_of_ours(directory: str, top: str) -> Optional[str]:
  """The folder at or above ``directory``, below ``top`` (the folder listed), that holds a run
  record of this tool's, or None. Each folder is looked at once (_OUTPUT_OF, a bounded cache):
  a folder's files, and its subfolders, share the answer, however deep the tree."""
  visited, found = [], None
  while len(directory) > len(top) and directory != os.path.dirname(directory):
    if directory in _OUTPUT_OF:
      found = _OUTPUT_OF[directory]
      break
    visited.append(directory)
    if _is_record_of_ours(os.path.join(directory, output_layout.RUN_RECORD)):
      found = directory
      break
    directory = os.path.dirname(directory)
  if len(_OUTPUT_OF) > _CACHED_FOLDERS:
    _OUTPUT_OF.clear()
  _OUTPUT_OF.update(dict.fromkeys(visited, found))
  return found


_OUTPUT_OF: Dict[str, Optional[str]] = {}
_CACHED_FOLDERS = 100_000


def _is_record_of_ours(path: str) -> bool:
  try:
    with open(path, encoding='utf-8') as f:
      return json.load(f).get('tool') == run_record.TOOL
  except (OSError, ValueError, AttributeError):
    return False


def _check_not_all_skipped(value: str, spec: InputSpec, paths: Iterable[str]) -> None:
  """Fails fast, in one line, if every file of a local folder or glob is skipped as no image,
  reading only up to its first image."""
  skipped = []
  for path in paths:
    reason = skip_reason(spec, path)
    if reason is None:
      return
    skipped.append(f'{path}: {reason}')
  if skipped:
    raise UsageError(f'--input={value} holds no image: its {len(skipped):,} file(s) are all skipped as no images '
                     f'(first: {skipped[0]}); give the folder or glob of the images')


def _check_names_images(path: str, kind: str) -> None:
  """Fails fast, in one line, if the manifest names no image (or its gzip data is damaged
  from the start), reading only its first rows."""
  try:
    with manifest_files.open_text(path) as text:
      empty = manifest_text.emptiness(text, kind == CSV)
  except InputFileError as e:
    raise UsageError(str(e)) from None
  if empty:
    raise UsageError(f'--input={path} {empty}: it names no image; give a manifest with a row per image')


def _has_match(value: str, pattern: str) -> bool:
  """Whether ``pattern`` matches a file. A storage that cannot be listed is no missing input:
  UsageError with its cause (a bucket that does not exist is missing)."""
  if local_files.is_local(pattern):
    try:
      return next(local_files.match_local_glob(pattern), None) is not None
    except Exception:  # pylint: disable=broad-except  # an unreadable directory: nothing to list there
      return False
  try:
    return bool(FileSystems.match([pattern], limits=[1])[0].metadata_list)
  except Exception as e:  # pylint: disable=broad-except  # Beam wraps the storage's errors in BeamIOError
    if getattr(rejections.innermost(e), 'code', None) == 404:  # google.api_core's NotFound: no such bucket
      return False
    raise UsageError(f'--input={value} cannot be listed: {rejections.cause(e)}') from None


def split_folders(spec: InputSpec) -> List[str]:
  """The top-level folders of a directory input that name a split (train/, val/, ...): one
  directory read, or one delimiter listing on Cloud Storage."""
  if spec.kind != DIRECTORY:
    return []
  root = spec.path[:-len('/**')]
  if local_files.is_local(root):
    names = sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
  else:
    names = [folder.rstrip('/').rsplit('/', 1)[-1] for folder in object_listing.subfolders(root + '/')]
  return [name for name in names if split_names.usual(name)]


def split_folder(root: str, path: str) -> Optional[str]:
  """The split a top-level folder names (root/train/cat/1.jpg, root/val/cat/2.jpg), if any."""
  parts = path[len(root):].split('/') if path.startswith(root) else []
  return split_names.usual(parts[0]) if len(parts) > 2 else None


def is_detection_csv(spec: InputSpec) -> bool:
  """Whether a CSV manifest is in AutoML Vision's object-detection layout, as its first row is;
  under --multi_label its rows' extra cells are labels instead. Asked at launch, where a .gz
  manifest damaged from its start is said in one line (UsageError)."""
  if spec.kind != CSV or spec.multi_label:
    return False
  try:
    if manifest_files.csv_header(spec.path):
      return False
    with manifest_files.open_text(spec.path) as text:
      try:
        first = next((row for row in csv.reader(text, skipinitialspace=True) if any(cell.strip() for cell in row)),
                     [])
      except (csv.Error, UnicodeError):  # the reader rejects that row
        return False
  except InputFileError as e:
    raise UsageError(str(e)) from None
  return manifest_rows.is_detection_row(first)
