"""The output directory: which files are ours, the new dataset staged beside the old one, and the commit.

``beam_pipeline.json`` is the commit marker: a directory that has it holds a
complete dataset, one that lacks it is not to be read. A run writes everything
(shards, the tf.Transform graph, labels.txt, the errors file) under the output's
temporary directory first, so an earlier complete output stays readable, marker
and all, while the run works, and after it fails. Only the commit, once all is
written and the error budget holds, replaces it: the earlier marker goes, the new
files move into place, what this run did not write goes, and the new marker comes
last. A run killed within the commit leaves no marker; rerunning repairs it.
TensorFlow Datasets' own marker, dataset_info.json, goes with ours: removed first,
moved in last but for ours.

Every file goes through Beam's FileSystems, local and gs:// alike, but for the
files the core writes (shards, the tf.Transform graph): those are written to local
disk, by TensorFlow, under the temporary directory of a local output, or uploaded
there from a local scratch directory for a remote one.
"""
import os
import re
import shutil
from typing import Iterable, List

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_pipeline.beam import local_files
from beam_pipeline.core import rejections, run_record, schemas, shard_name, tfds_metadata, uris
from beam_pipeline.core.records import TransformGraph
from beam_pipeline.core.rejections import OutputError
from beam_pipeline.core.user_errors import UsageError

DATASET_INFO = run_record.FILE_NAME
LABELS_TXT = 'labels.txt'
LABEL_MAP = 'label_map.pbtxt'  # with --annotations
TEMP_DIR = '.beam_pipeline-tmp'
_COPY_BUFFER_BYTES = 8 * 2**20

# Only the exact files tf.Transform writes are ours: a user's file in a directory
# named metadata/ must stop the run, not be deleted with it.
_OWN_NAME = re.compile(
    rf'^(?:{shard_name.PATTERN}'
    r'|errors-\d{5}-of-\d{5}\.jsonl'
    rf'|{re.escape(LABELS_TXT)}|{re.escape(LABEL_MAP)}|{re.escape(DATASET_INFO)}|{re.escape(run_record.OLD_FILE_NAME)}'
    rf'|{re.escape(tfds_metadata.DATASET_INFO)}|{re.escape(tfds_metadata.FEATURES)}'
    rf'|{"|".join(re.escape(tfds_metadata.label_names_file(schema)) for schema in schemas.SCHEMAS)}'
    r'|transform_fn/(?:saved_model\.pb|fingerprint\.pb|assets/class_labels\.txt'
    r'|variables/variables\.(?:index|data-\d{5}-of-\d{5}))'
    r'|(?:transformed_metadata|metadata)/schema\.pbtxt(?:\.tmp[0-9a-f]{32})?'
    rf'|{re.escape(TEMP_DIR)}/.*)$')


# TensorFlow's atomic writes (schema.pbtxt) stage under this name; a kill leaves it behind.
_TF_TEMP_NAME = re.compile(r'\.tmp[0-9a-f]{32}$')


def path(output: str, name: str) -> str:
  return FileSystems.join(output, name)


def temp_path(output: str, name: str) -> str:
  return FileSystems.join(output, TEMP_DIR, name)


def _relative_names(output: str) -> List[str]:
  """Every file under ``output``, relative to it; OutputError if it cannot be listed.

  A listing that fails must not pass for an empty directory: the refusal of
  foreign files and the removal of stale shards both rest on it.
  """
  prefix = output.rstrip('/') + '/'
  try:
    if FileSystems.get_scheme(output) is None:  # local: a name like 'out [1]' is no pattern
      paths = list(local_files.walk_local_files(output)) if local_files.is_local_dir(output) else []
    else:  # a prefix with no objects is an empty list, not an error
      paths = [m.path for m in FileSystems.match([FileSystems.join(output, '**')])[0].metadata_list]
  except Exception as e:  # pylint: disable=broad-except  # Beam wraps the storage's errors in BeamIOError
    raise OutputError(f'--output={output} cannot be listed: {_cause(e)}') from e
  return [p[len(prefix):] for p in paths if p.startswith(prefix)]


def _cause(error: BaseException) -> str:
  """The first line of what went wrong, from inside Beam's BeamIOErrors if they wrap it."""
  details = getattr(error, 'exception_details', None)
  while isinstance(details, dict) and details:
    error = next(iter(details.values()))
    details = getattr(error, 'exception_details', None)
  return f'{type(error).__name__}: {rejections.first_line(error, 300)}'


def prepare(output: str) -> None:
  """Before any work: refuse a directory holding foreign files, or one that cannot be listed.

  Only files this tool writes may be replaced; anything else there might be a
  user's data, so the run stops instead of mixing into or wiping it. An earlier
  complete output stays as it is until this run commits.
  """
  try:
    names = _relative_names(output)
  except OutputError as e:
    raise UsageError(str(e)) from None
  foreign = sorted(name for name in names if not _OWN_NAME.match(name))
  if foreign:
    raise UsageError(f'--output={output} holds {len(foreign)} file(s) this tool did not write '
                     f'(first: {foreign[0]}); use an empty or new directory')


def staging(output: str, name: str, scratch: str) -> str:
  """The local path a worker writes ``name`` to: under the output's temporary directory for a
  local output, under the local ``scratch`` directory for a remote one (stage then uploads it)."""
  return os.path.join(scratch, name) if uris.is_remote(output) else temp_path(output, name)


def stage(output: str, name: str, staged: str) -> None:
  """Puts the complete local file or directory ``staged`` (from staging) under the output's
  temporary directory as ``name``, for the commit to move into place: a remote output's is
  uploaded, a local one's renamed there (if it is not there already)."""
  if not uris.is_remote(output):
    destination = temp_path(output, name)
    if staged != destination:
      if os.path.isdir(destination):
        shutil.rmtree(destination)  # a killed run's
      os.rename(staged, destination)
    return
  local_files = ([staged] if os.path.isfile(staged) else
                 [os.path.join(directory, file_name) for directory, _, names in os.walk(staged) for file_name in names])
  for local in local_files:
    relative = os.path.relpath(local, staged).split(os.sep) if local != staged else []
    _upload(local, FileSystems.join(temp_path(output, name), *relative))
  if os.path.isdir(staged):
    shutil.rmtree(staged)
  else:
    os.remove(staged)


def _upload(local: str, remote: str) -> None:
  try:
    with open(local, 'rb') as source, FileSystems.create(remote, compression_type=CompressionTypes.UNCOMPRESSED) as f:
      shutil.copyfileobj(source, f, _COPY_BUFFER_BYTES)
  except Exception as e:  # pylint: disable=broad-except  # the storage client's own retries are spent
    raise OutputError(f'cannot upload {remote}: {_cause(e)}') from e


def stage_text(output: str, name: str, text: str) -> None:
  """Writes a small file whole under the output's temporary directory, for the commit to move."""
  try:
    with FileSystems.create(temp_path(output, name), compression_type=CompressionTypes.UNCOMPRESSED) as f:
      # A file name that is not UTF-8 reaches our JSON files as lone surrogates;
      # backslashreplace turns them into valid JSON \\uXXXX escapes.
      f.write(text.encode('utf-8', 'backslashreplace'))
  except Exception as e:  # pylint: disable=broad-except
    raise OutputError(f'cannot write {temp_path(output, name)}: {_cause(e)}') from e


def commit(output: str, written: Iterable[str], written_dirs: Iterable[str], run_record_json: str,
           last: Iterable[str] = ()) -> None:
  """Replaces the output with what this run staged: the earlier markers go, the staged files and
  directories move into place, what this run did not write goes, the staged files ``last``
  (another reader's marker) follow, and the new marker comes last. OutputError if the
  storage fails it: a rerun completes it."""
  try:
    _commit(output, list(written), list(written_dirs), run_record_json, list(last))
  except OutputError:
    raise
  except Exception as e:  # pylint: disable=broad-except  # Beam's BeamIOError, the storage client's errors
    raise OutputError(f'committing --output={output} failed: {_cause(e)}') from e


def _commit(output: str, written: List[str], written_dirs: List[str], run_record_json: str,
            last: List[str]) -> None:
  stage_text(output, DATASET_INFO, run_record_json)
  # TFDS's marker, or this tool's own of an output before 0.2: both name a complete output.
  markers = [path(output, name) for name in (DATASET_INFO, run_record.OLD_FILE_NAME)]
  _remove([marker for marker in markers if FileSystems.exists(marker)])
  if written:
    FileSystems.rename([temp_path(output, name) for name in written], [path(output, name) for name in written])
  for directory in written_dirs:
    _move_tree(output, directory)
  keep = set(written) | set(last) | {DATASET_INFO}
  kept_dirs = tuple(directory + '/' for directory in written_dirs)
  stale = [name for name in _relative_names(output)
           if _OWN_NAME.match(name) and name not in keep and not name.startswith(TEMP_DIR + '/')
           and (not name.startswith(kept_dirs) or _TF_TEMP_NAME.search(name))]
  _delete(output, stale, [d for d in TransformGraph.DIRECTORIES if d + '/' not in kept_dirs])
  if last:
    FileSystems.rename([temp_path(output, name) for name in last], [path(output, name) for name in last])
  FileSystems.rename([temp_path(output, DATASET_INFO)], [path(output, DATASET_INFO)])
  leftovers = [name for name in _relative_names(output) if name.startswith(TEMP_DIR + '/')]
  _delete(output, leftovers, [TEMP_DIR])


def _move_tree(output: str, directory: str) -> None:
  """Moves the staged directory ``directory`` into place, replacing an earlier run's."""
  staged, destination = temp_path(output, directory), path(output, directory)
  if not uris.is_remote(output):
    if os.path.isdir(destination):
      shutil.rmtree(destination)
    FileSystems.rename([staged], [destination])
    return
  # An object store has no directories: every object moves on its own.
  earlier = [m.path for m in FileSystems.match([FileSystems.join(destination, '**')])[0].metadata_list]
  if earlier:
    FileSystems.delete(earlier)
  moving = [m.path for m in FileSystems.match([FileSystems.join(staged, '**')])[0].metadata_list]
  FileSystems.rename(moving, [destination + m[len(staged):] for m in moving])


def _remove(paths: List[str]) -> None:
  """Deletes files and directories; local ones directly, since Beam's local delete
  reads each path as a pattern (a directory named 'out [1]' matches nothing)."""
  local = [p for p in paths if FileSystems.get_scheme(p) is None]
  for local_path in local:
    if os.path.isdir(local_path) and not os.path.islink(local_path):
      shutil.rmtree(local_path)
    else:
      os.remove(local_path)
  remote = [p for p in paths if FileSystems.get_scheme(p) is not None]
  if remote:
    FileSystems.delete(remote)


def _delete(output: str, names: List[str], directories: Iterable[str]) -> None:
  """Deletes files, then the directories left empty (local ones remain after their files go)."""
  if names:
    _remove([path(output, name) for name in names])
  remaining = _relative_names(output)
  empty = [path(output, d) for d in directories
           if FileSystems.exists(path(output, d)) and not any(n.startswith(d + '/') for n in remaining)]
  if empty:
    _remove(empty)
