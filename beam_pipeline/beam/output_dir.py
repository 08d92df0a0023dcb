"""The output directory: which files are ours, files moved or uploaded into place, and the commit.

``dataset_info.json`` is the commit marker: it is removed before a run starts and
written only after every shard, labels.txt and the errors file are final, so a
directory that has it is complete, and one that lacks it is not to be read.

Every file goes through Beam's FileSystems, local and gs:// alike, but for the
files the core writes (shards, the tf.Transform graph): those are written to local
disk, by TensorFlow, and this module moves them into a local output or uploads
them into a remote one.
"""
import os
import re
import shutil
from typing import Iterable, List

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_pipeline.beam import inputs
from beam_pipeline.core import dataset_info, uris
from beam_pipeline.core.records import TransformGraph
from beam_pipeline.core.usage import UsageError

DATASET_INFO = dataset_info.FILE_NAME
LABELS_TXT = 'labels.txt'
ERRORS_FILE = 'errors-00000-of-00001.jsonl'
TEMP_DIR = '.beam_pipeline-tmp'
_COPY_BUFFER_BYTES = 8 * 2**20

# Only the exact files tf.Transform writes are ours: a user's file in a directory
# named metadata/ must stop the run, not be deleted with it.
_OWN_NAME = re.compile(
    r'^(?:[a-z][a-z0-9_]*-\d{5}-of-\d{5}\.tfrecord(?:\.gz)?'
    r'|errors-\d{5}-of-\d{5}\.jsonl'
    rf'|{re.escape(LABELS_TXT)}|{re.escape(DATASET_INFO)}'
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


def staging(output: str, name: str, scratch: str) -> str:
  """The local path a worker writes ``name`` to, before it is published: under the output's
  temporary directory for a local output, under the local ``scratch`` directory for a remote one."""
  return os.path.join(scratch, name) if uris.is_remote(output) else temp_path(output, name)


def publish(output: str, name: str, staged: str) -> None:
  """Puts the complete local file ``staged`` (from staging) in place as ``name``.

  A local one is renamed; a remote one is uploaded straight to its name, as an
  object appears only once its upload completes.
  """
  if not uris.is_remote(output):
    FileSystems.rename([staged], [path(output, name)])
    return
  _upload(staged, path(output, name))
  os.remove(staged)


def publish_tree(output: str, name: str, staged: str) -> None:
  """Puts the local directory ``staged`` (from staging) in place as ``name``, replacing an earlier run's."""
  destination = path(output, name)
  if not uris.is_remote(output):
    if os.path.isdir(destination):
      shutil.rmtree(destination)
    FileSystems.rename([staged], [destination])
    return
  # An object store has no directories: every object goes on its own.
  earlier = [m.path for m in FileSystems.match([FileSystems.join(destination, '**')])[0].metadata_list]
  if earlier:
    FileSystems.delete(earlier)
  for directory, _, names in os.walk(staged):
    for file_name in names:
      local = os.path.join(directory, file_name)
      _upload(local, FileSystems.join(destination, *os.path.relpath(local, staged).split(os.sep)))
  shutil.rmtree(staged)


def _upload(local: str, remote: str) -> None:
  with open(local, 'rb') as source, FileSystems.create(remote, compression_type=CompressionTypes.UNCOMPRESSED) as f:
    shutil.copyfileobj(source, f, _COPY_BUFFER_BYTES)


def write_text(output: str, name: str, text: str) -> None:
  """Writes a small file whole: temporary name first, so readers never see half of it."""
  with FileSystems.create(temp_path(output, name), compression_type=CompressionTypes.UNCOMPRESSED) as f:
    # A file name that is not UTF-8 reaches our JSON files as lone surrogates;
    # backslashreplace turns them into valid JSON \\uXXXX escapes.
    f.write(text.encode('utf-8', 'backslashreplace'))
  FileSystems.rename([temp_path(output, name)], [path(output, name)])


def commit(output: str, written: Iterable[str], written_dirs: Iterable[str], dataset_info_json: str) -> None:
  """Removes what this run did not write (stale shards, directories), then the marker goes last."""
  keep = set(written) | {DATASET_INFO}
  kept_dirs = tuple(directory + '/' for directory in written_dirs)
  stale = [name for name in _relative_names(output)
           if _OWN_NAME.match(name) and name not in keep
           and (not name.startswith(kept_dirs) or _TF_TEMP_NAME.search(name))]
  _delete(output, stale, [d for d in TransformGraph.DIRECTORIES if d + '/' not in kept_dirs])
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
