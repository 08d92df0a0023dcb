"""The output directory: which files are ours, shard files written whole, and the commit.

``dataset_info.json`` is the commit marker: it is removed before a run starts and
written only after every shard, labels.txt and the errors file are final, so a
directory that has it is complete, and one that lacks it is not to be read.
"""
import os
import re
import shutil
from typing import Iterable, List

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.tfrecordio import _TFRecordUtil

from beam_pipeline import dataset_info, inputs
from beam_pipeline.usage import UsageError

DATASET_INFO = dataset_info.FILE_NAME
LABELS_TXT = 'labels.txt'
ERRORS_FILE = 'errors-00000-of-00001.jsonl'
TEMP_DIR = '.beam_pipeline-tmp'
# The tf.Transform graph (transform.py); transform_tmp/ is where tf.Transform's own
# writer, which earlier versions used, staged them.
TRANSFORM_DIRS = ('transform_fn', 'transformed_metadata', 'metadata')

# Only the exact files tf.Transform writes are ours: a user's file in a directory
# named metadata/ must stop the run, not be deleted with it.
_OWN_NAME = re.compile(
    r'^(?:[a-z][a-z0-9_]*-\d{5}-of-\d{5}\.tfrecord(?:\.gz)?'
    r'|errors-\d{5}-of-\d{5}\.jsonl'
    rf'|{re.escape(LABELS_TXT)}|{re.escape(DATASET_INFO)}'
    r'|transform_fn/(?:saved_model\.pb|fingerprint\.pb|assets/class_labels\.txt'
    r'|variables/variables\.(?:index|data-\d{5}-of-\d{5}))'
    r'|(?:transformed_metadata|metadata)/schema\.pbtxt(?:\.tmp[0-9a-f]{32})?'
    r'|transform_tmp/.*'
    rf'|{re.escape(TEMP_DIR)}/.*)$')


# TensorFlow's atomic writes (schema.pbtxt) stage under this name; a kill leaves it behind.
_TF_TEMP_NAME = re.compile(r'\.tmp[0-9a-f]{32}$')


def path(output: str, name: str) -> str:
  return FileSystems.join(output, name)


def temp_path(output: str, name: str) -> str:
  return FileSystems.join(output, TEMP_DIR, name)


def _relative_names(output: str) -> List[str]:
  prefix = output.rstrip('/') + '/'
  if FileSystems.get_scheme(output) is None:  # local: a name like 'out [1]' is no pattern
    paths = list(inputs.walk_local_files(output)) if inputs.is_local_dir(output) else []
  else:
    try:
      paths = [m.path for m in FileSystems.match([FileSystems.join(output, '**')])[0].metadata_list]
    except Exception:  # pylint: disable=broad-except  # Beam raises BeamIOError for a missing prefix
      paths = []
  return [p[len(prefix):] for p in paths if p.startswith(prefix)]


def prepare(output: str) -> None:
  """Before any work: refuse a directory holding foreign files, uncommit an old result.

  Only files this tool writes may be replaced; anything else there might be a
  user's data, so the run stops instead of mixing into or wiping it.
  """
  names = _relative_names(output)
  foreign = sorted(name for name in names if not _OWN_NAME.match(name))
  if foreign:
    raise UsageError(f'--output={output} holds {len(foreign)} file(s) this tool did not write '
                     f'(first: {foreign[0]}); use an empty or new directory')
  if DATASET_INFO in names:
    _remove([path(output, DATASET_INFO)])


class ShardFileWriter:
  """Writes one TFRecord file to Cloud Storage: Beam's TFRecord framing (length,
  masked CRC32C, data, CRC) over a FileSystems stream, as tf.io.gfile cannot
  reach a storage emulator. Local shards are written with TensorFlow's own
  writer by worker processes, which do not import Beam (shard_writer.py)."""

  def __init__(self, file_path: str, compression: str):
    self._path = file_path
    kind = CompressionTypes.GZIP if compression == 'gzip' else CompressionTypes.UNCOMPRESSED
    self._file = FileSystems.create(file_path, compression_type=kind)

  def write(self, record: bytes) -> None:
    _TFRecordUtil.write_record(self._file, record)

  def close(self) -> int:
    """Completes the file and returns its size in bytes."""
    self._file.close()
    return FileSystems.match([self._path])[0].metadata_list[0].size_in_bytes


def publish(output: str, name: str) -> None:
  """Moves a complete file from its temporary name into place."""
  FileSystems.rename([temp_path(output, name)], [path(output, name)])


def publish_tree(output: str, staged: str, name: str) -> None:
  """Moves the directory ``staged`` (under the temporary directory) to ``name``, replacing an earlier run's."""
  source, destination = temp_path(output, staged), path(output, name)
  if FileSystems.get_scheme(output) is None:
    if os.path.isdir(destination):
      shutil.rmtree(destination)
    FileSystems.rename([source], [destination])
    return
  # An object store has no directories: every object moves on its own.
  earlier = [m.path for m in FileSystems.match([FileSystems.join(destination, '**')])[0].metadata_list]
  if earlier:
    FileSystems.delete(earlier)
  staged_files = [m.path for m in FileSystems.match([FileSystems.join(source, '**')])[0].metadata_list]
  FileSystems.rename(staged_files, [destination + p[len(source):] for p in staged_files])


def write_text(output: str, name: str, text: str) -> None:
  """Writes a small file whole: temporary name first, so readers never see half of it."""
  with FileSystems.create(temp_path(output, name), compression_type=CompressionTypes.UNCOMPRESSED) as f:
    # A file name that is not UTF-8 reaches our JSON files as lone surrogates;
    # backslashreplace turns them into valid JSON \\uXXXX escapes.
    f.write(text.encode('utf-8', 'backslashreplace'))
  FileSystems.rename([temp_path(output, name)], [path(output, name)])


def temp_dir(output: str) -> str:
  return FileSystems.join(output, TEMP_DIR)


def commit(output: str, written: Iterable[str], written_dirs: Iterable[str], dataset_info_json: str) -> None:
  """Removes what this run did not write (stale shards, directories), then the marker goes last."""
  keep = set(written) | {DATASET_INFO}
  kept_dirs = tuple(directory + '/' for directory in written_dirs)
  stale = [name for name in _relative_names(output)
           if _OWN_NAME.match(name) and name not in keep
           and (not name.startswith(kept_dirs) or _TF_TEMP_NAME.search(name))]
  _delete(output, stale, [d for d in TRANSFORM_DIRS + ('transform_tmp',) if d + '/' not in kept_dirs])
  write_text(output, DATASET_INFO, dataset_info_json)
  leftovers = [name for name in _relative_names(output) if name.startswith(TEMP_DIR + '/')]
  _delete(output, leftovers, [TEMP_DIR])


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
