"""The output directory: which files are ours, the new dataset staged beside the old one, and the commit.

``beam_pipeline.json`` is the commit marker: a directory that has it holds a
complete dataset, one that lacks it is not to be read. A folder is ours only if it
holds our marker, our staging folder or our lock: anything else that is not empty
is refused, whatever its files are named, and within our folders a shard or errors
file that no record of ours lists is a user's, and refused too.

One run at a time holds the output's lock (output_lock.py). Each run writes
everything (shards, the tf.Transform graph, labels.txt, the errors files) under a
staging folder of its own, ``.beam_pipeline-tmp/RUN/``, so an earlier complete
output stays readable, marker and all, while the run works, and after it fails, and
no run can commit another's files. Only the commit, once all is written, the error
budget holds and the lock is still this run's, replaces it: the earlier marker moves
into the run's staging folder, where it lists what the output held until the commit
ends; the new files move into place; what the earlier records list and this run did
not write goes; the new marker comes last. A run killed within the commit leaves no
marker; rerunning repairs it, reading which files are ours from the records left in
the staging folders. TensorFlow Datasets' own marker, dataset_info.json, goes with
ours: removed first, moved in last but for ours.

Every file goes through Beam's FileSystems, local and gs:// alike, but for the
files the core writes (shards, the tf.Transform graph): those are written to local
disk, by TensorFlow, under the run's staging folder of a local output, or uploaded
there from a local scratch directory for a remote one.
"""
import json
import os
import shutil
import threading
from typing import Iterable, List, Optional, Set, Tuple

from apache_beam.io.filesystem import BeamIOError, CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_pipeline.pipeline.output import output_lock
from beam_pipeline.pipeline.listing import local_files
from beam_pipeline.core import rejections, uris
from beam_pipeline.core.output import output_layout, run_record
from beam_pipeline.core.rejections import DamagedOutput, OutputError
from beam_pipeline.core.output.run_record import RunRecord
from beam_pipeline.core.user_errors import UsageError

_COPY_BUFFER_BYTES = 8 * 2**20


def path(output: str, name: str) -> str:
  return FileSystems.join(output, name)


def run_dir(output: str, run: str) -> str:
  """The staging folder of ``run``: only it writes there, only its commit moves files out."""
  return FileSystems.join(output, output_layout.TEMP_DIR, run)


def size(output: str, name: str) -> Optional[int]:
  """The size of the output's file ``name`` in bytes, None if there is none: one stat, or one
  metadata request."""
  found = path(output, name)
  if not uris.is_remote(output):
    return os.path.getsize(found) if os.path.isfile(found) else None
  try:
    return next((m.size_in_bytes for m in FileSystems.match([found])[0].metadata_list if m.path == found), None)
  except BeamIOError:
    return None


def read_listed(output: str, name: str) -> bytes:
  """The bytes of the output's file ``name``, which its run record lists (a catalog, a lookup
  file); DamagedOutput if it cannot be read."""
  try:
    with FileSystems.open(path(output, name), compression_type=CompressionTypes.UNCOMPRESSED) as f:
      return f.read()
  except (BeamIOError, OSError) as e:
    raise DamagedOutput(f'{name} cannot be read: {rejections.cause(e)}') from e


def temp_path(output: str, run: str, name: str) -> str:
  return FileSystems.join(run_dir(output, run), name)


def _relative_names(output: str) -> List[str]:
  """Every file under ``output``, relative to it; OutputError if it cannot be listed.

  A listing that fails must not pass for an empty directory: the refusal of
  foreign files and the removal of stale shards both rest on it.
  """
  prefix = output.rstrip('/') + '/'
  try:
    if FileSystems.get_scheme(output) is None:  # local: a name like 'out [1]' is no pattern
      if os.path.exists(output) and not os.path.isdir(output):
        raise NotADirectoryError(f'{output} is a file')
      paths = list(local_files.walk_local_files(output)) if local_files.is_local_dir(output) else []
    else:  # a prefix with no objects is an empty list, not an error
      paths = [m.path for m in FileSystems.match([FileSystems.join(output, '**')])[0].metadata_list]
  except Exception as e:  # pylint: disable=broad-except  # Beam wraps the storage's errors in BeamIOError
    raise OutputError(f'--output={output} cannot be listed: {rejections.cause(e)}') from e
  return [p[len(prefix):] for p in paths if p.startswith(prefix)]


def _is_record_of_ours(output: str, name: str) -> bool:
  """Whether ``name`` (TensorFlow Datasets' file name, which 0.1 used for ours) holds our record."""
  try:
    with FileSystems.open(path(output, name), compression_type=CompressionTypes.UNCOMPRESSED) as f:
      return json.loads(f.read().decode('utf-8', 'replace')).get('tool') == run_record.TOOL
  except (OSError, ValueError, AttributeError):
    return False


def _records(output: str, names: Iterable[str]) -> List[RunRecord]:
  """The run records ``output`` holds: its marker, and those in staging folders (a commit's
  journal: the record it replaces, the record it commits); UsageError if one cannot be read."""
  found = []
  for name in names:
    parts = name.split('/')
    journal = (parts[0] == output_layout.TEMP_DIR and len(parts) <= 3 and
               parts[-1] in (output_layout.RUN_RECORD, output_layout.EARLIER_RECORD))
    marker = name == output_layout.RUN_RECORD or (name == output_layout.OLD_RUN_RECORD and
                                                  _is_record_of_ours(output, name))
    if not (journal or marker):
      continue
    try:
      with FileSystems.open(path(output, name), compression_type=CompressionTypes.UNCOMPRESSED) as f:
        found.append(RunRecord.from_json(f.read().decode('utf-8', 'backslashreplace')))
    except Exception as e:  # pylint: disable=broad-except  # a damaged record: ours, but what it listed is lost
      raise UsageError(f'--output={output} holds a record of this tool that cannot be read '
                       f'({name}: {rejections.cause(e)}), so its files cannot be told from others; use a new '
                       'directory, or remove this one') from None
  return found


def listed_files(record: RunRecord) -> Set[str]:
  """The shard, index, catalog, lookup and errors files a run record names."""
  names = {name for split in record.splits.values() for shard in split.shards for name in shard.files}
  lookup = ({name for found in record.catalog_lookup.files + record.catalog_lookup.content_files +
             record.catalog_lookup.index_files() for name in found.files} if record.catalog_lookup else set())
  return names | lookup | set(record.errors_files)


def check_ours(output: str) -> None:
  """Before any work: UsageError unless ``output`` is new, empty, or ours with nothing else in it.

  Only files this tool wrote may be replaced; anything else might be a user's data, so the
  run stops instead of mixing into or wiping it. An earlier complete output stays as it is
  until this run commits.
  """
  if FileSystems.get_scheme(output) is None and os.path.isfile(output):
    raise UsageError(output_lock.unwritable(output, NotADirectoryError()))
  if FileSystems.get_scheme(output) is None and os.path.isdir(output):
    _check_top_level(output)
  try:
    names = _relative_names(output)
  except OutputError as e:
    raise UsageError(str(e)) from None
  if not names:
    return
  ours = (output_layout.RUN_RECORD in names or output_layout.LOCK in names
          or any(name.startswith(output_layout.TEMP_DIR + '/') for name in names)
          or (output_layout.OLD_RUN_RECORD in names and _is_record_of_ours(output, output_layout.OLD_RUN_RECORD)))
  if not ours:
    raise UsageError(f'--output={output} is not empty and holds no output of this tool ({len(names)} file(s), first: '
                     f'{sorted(names)[0]}); use an empty or new directory: nothing is written over files this tool '
                     'did not write')
  listed = set().union(*(listed_files(record) for record in _records(output, names)))
  foreign = sorted(name for name in names
                   if not (output_layout.FIXED_NAME.match(name) or
                           (output_layout.LISTED_NAME.match(name) and name in listed)))
  if foreign:
    raise UsageError(f'--output={output} holds {len(foreign)} file(s) this tool did not write '
                     f'(first: {foreign[0]}); use an empty or new directory')


def _check_top_level(output: str) -> None:
  """UsageError, from the top level of a local directory alone, if it holds entries but none of
  this tool's markers (a home folder, /): it is no output of ours, and walking its whole tree to
  say so could take minutes."""
  with os.scandir(output) as entries:
    names = sorted(entry.name for entry in entries)
  markers = {output_layout.RUN_RECORD, output_layout.LOCK, output_layout.TEMP_DIR, output_layout.OLD_RUN_RECORD}
  if names and not markers & set(names):
    raise UsageError(f'--output={output} is not empty and holds no output of this tool ({len(names):,} entries at its '
                     f'top, first: {names[0]}); use an empty or new directory: nothing is written over files this '
                     'tool did not write')


def earlier_record(output: str) -> Optional[RunRecord]:
  """The run record of the complete output in ``output``; None if it holds none."""
  try:
    return RunRecord.read(output, FileSystems.exists, FileSystems.open)
  except FileNotFoundError:
    return None


def claim(output: str, run: str, held_by: str) -> output_lock.Held:
  """Makes ``output`` this run's, before any work: checks it is ours (check_ours), takes its lock,
  checks again under the lock, and clears what dead runs staged (all but their records, which
  say which files are ours after a killed commit). UsageError if any of it fails."""
  check_ours(output)
  held = output_lock.acquire(output, run, held_by)
  try:
    check_ours(output)  # another run may have changed it before we held the lock
    _clear_dead_runs(output, run)
  except UsageError:
    held.release()
    raise
  except Exception as e:  # pylint: disable=broad-except
    held.release()
    raise UsageError(f'--output={output} cannot be prepared: {rejections.cause(e)}') from None
  return held


def _clear_dead_runs(output: str, run: str) -> None:
  names = [name for name in _relative_names(output) if name.startswith(output_layout.TEMP_DIR + '/')]
  own = f'{output_layout.TEMP_DIR}/{run}/'
  dead = [name for name in names if not name.startswith(own) and name.split('/')[-1] not in (output_layout.RUN_RECORD,
                                                                                            output_layout.EARLIER_RECORD)]
  if dead:
    _remove([path(output, name) for name in dead])


def staging(output: str, run: str, name: str, scratch: str) -> str:
  """The local path a worker writes ``name`` to: under the run's staging folder for a local
  output, under ``scratch`` for a remote one (stage then uploads it).

  Args:
    output: the run's output.
    run: the run's id, whose staging folder a local output's file is written in.
    name: the file's or directory's name in the output.
    scratch: a local directory of the worker's, for a remote output's files.
  """
  return os.path.join(scratch, name) if uris.is_remote(output) else temp_path(output, run, name)


def stage(output: str, run: str, name: str, staged: str) -> None:
  """Puts a complete local file or directory under the run's staging folder, for the commit to
  move into place: a remote output's is uploaded, a local one's renamed there (if it is not
  there already).

  Args:
    output: the run's output.
    run: the run's id, whose staging folder it goes to.
    name: its name in the output.
    staged: the local path it was written to (staging); a remote output's copy is removed once uploaded.
  """
  if not uris.is_remote(output):
    destination = temp_path(output, run, name)
    if staged != destination:
      if os.path.isdir(destination):
        shutil.rmtree(destination)  # a retried task's
      os.makedirs(os.path.dirname(destination), exist_ok=True)
      os.rename(staged, destination)
    return
  local_files = ([staged] if os.path.isfile(staged) else
                 [os.path.join(directory, file_name) for directory, _, names in os.walk(staged) for file_name in names])
  for local in local_files:
    relative = os.path.relpath(local, staged).split(os.sep) if local != staged else []
    _upload(local, FileSystems.join(temp_path(output, run, name), *relative))
  if os.path.isdir(staged):
    shutil.rmtree(staged)
  else:
    os.remove(staged)


def _upload(local: str, remote: str) -> None:
  try:
    with open(local, 'rb') as source, FileSystems.create(remote, compression_type=CompressionTypes.UNCOMPRESSED) as f:
      shutil.copyfileobj(source, f, _COPY_BUFFER_BYTES)
  except Exception as e:  # pylint: disable=broad-except  # the storage client's own retries are spent
    raise OutputError(f'cannot upload {remote}: {rejections.cause(e)}') from e


def download(remote: str, local: str) -> None:
  """Copies the output's file ``remote`` to the ``local`` path (a worker's scratch folder)."""
  os.makedirs(os.path.dirname(local), exist_ok=True)
  try:
    with FileSystems.open(remote, compression_type=CompressionTypes.UNCOMPRESSED) as source, open(local, 'wb') as f:
      shutil.copyfileobj(source, f, _COPY_BUFFER_BYTES)
  except Exception as e:  # pylint: disable=broad-except  # the storage client's own retries are spent
    raise OutputError(f'cannot download {remote}: {rejections.cause(e)}') from e


def stage_text(output: str, run: str, name: str, text: str) -> None:
  """Writes a small file whole under the run's staging folder, for the commit to move.

  Args:
    output: the run's output.
    run: the run's id, whose staging folder the file goes to.
    name: the file's name in the output.
    text: all the file holds, written as UTF-8 (output_layout.encoded).
  """
  stage_bytes(output, run, name, output_layout.encoded(text))


def stage_bytes(output: str, run: str, name: str, data: bytes) -> None:
  """Writes a small file whole under the run's staging folder, for the commit to move: stage_text's
  for bytes already encoded.

  Args:
    output: the run's output.
    run: the run's id, whose staging folder the file goes to.
    name: the file's name in the output.
    data: all the file holds.
  """
  try:
    with FileSystems.create(temp_path(output, run, name), compression_type=CompressionTypes.UNCOMPRESSED) as f:
      f.write(data)
  except Exception as e:  # pylint: disable=broad-except
    raise OutputError(f'cannot write {temp_path(output, run, name)}: {rejections.cause(e)}') from e


class CommitGate:
  """Lets an interrupt (Ctrl-C) stop this process's run before its commit begins, never while it
  runs: cli/interrupts.py asks it, the commit passes through it."""

  def __init__(self) -> None:
    self._lock = threading.RLock()  # re-entrant: the interrupt's handler may run in the committing thread
    self._committing = False
    self._stopped = False

  def reset(self) -> None:
    with self._lock:
      self._committing = self._stopped = False

  def interrupt(self) -> bool:
    """Whether the interrupt may stop the run: yes, unless a commit is under way (then it is let
    finish); a commit not yet begun will not begin."""
    with self._lock:
      self._stopped = not self._committing
      return self._stopped

  def enter(self) -> None:
    with self._lock:
      if self._stopped:
        raise OutputError('the run was interrupted before its commit')
      self._committing = True

  def leave(self) -> None:
    with self._lock:
      self._committing = False


COMMIT_GATE = CommitGate()


def commit(output: str, run: str, written: Iterable[str], written_dirs: Iterable[str], run_record_json: str,
           last: Iterable[str] = (), moves: Iterable[Tuple[str, str]] = ()) -> None:
  """Replaces the output with what ``run`` staged, if it still holds the lock: the earlier marker
  moves into the run's staging folder, the staged files and directories move into place, files
  of the output move as ``moves`` say, what the records list and this run did not write goes,
  the staged files ``last`` follow, the new marker comes last, and the lock is given up.
  OutputError if the lock is another run's, or the storage fails it: a rerun completes it.

  Args:
    output: the output directory.
    run: the run's id: its staging folder holds what is committed.
    written: the staged files to move into place, by their names in the output.
    written_dirs: the staged directories to move into place whole (the tf.Transform graph's), replacing earlier ones.
    run_record_json: the new marker's text (beam_pipeline.json): the files its record lists stay.
    last: staged files moved into place after the others, before the marker: another reader's marker
      (TensorFlow Datasets' dataset_info.json).
    moves: (from, to) names of the output's files to rename (an update closing the gaps in its shards' numbers).
  """
  output_lock.check_held(output, run)
  COMMIT_GATE.enter()
  try:
    _commit(output, run, list(written), list(written_dirs), run_record_json, list(last), list(moves))
  except OutputError:
    raise
  except Exception as e:  # pylint: disable=broad-except  # Beam's BeamIOError, the storage client's errors
    raise OutputError(f'committing --output={output} failed: {rejections.cause(e)}') from e
  finally:
    COMMIT_GATE.leave()
  output_lock.give_up(output, run)


def discard(output: str, run: str) -> None:
  """Leaves the output as it is, marker and all, if ``run`` still holds the lock: what it staged
  goes, and the lock is given up (an --incremental run that found nothing changed)."""
  output_lock.check_held(output, run)
  staged = FileSystems.join(output_layout.TEMP_DIR, run)
  _delete(output, [name for name in _relative_names(output) if name.startswith(staged + '/')],
          [staged, output_layout.TEMP_DIR])
  output_lock.give_up(output, run)


def _commit(output: str, run: str, written: List[str], written_dirs: List[str], run_record_json: str,
            last: List[str], moves: List[Tuple[str, str]]) -> None:
  """commit's moves and deletions, once the lock is checked and the commit gate entered.

  Args:
    output: the output directory.
    run: the run's id: its staging folder holds what is committed.
    written: the staged files to move into place.
    written_dirs: the staged directories to move into place whole.
    run_record_json: the new marker's text.
    last: the staged files moved in just before the marker.
    moves: (from, to) names of the output's files to rename.
  """
  stage_text(output, run, output_layout.RUN_RECORD, run_record_json)
  # The earlier marker (ours, of this layout or 0.1's) becomes the journal of what the output held.
  names = _relative_names(output)
  for marker in (output_layout.RUN_RECORD, output_layout.OLD_RUN_RECORD):
    if marker in names and (marker == output_layout.RUN_RECORD or _is_record_of_ours(output, marker)):
      FileSystems.rename([path(output, marker)], [temp_path(output, run, output_layout.EARLIER_RECORD)])
      break
  if output_layout.TFDS_DATASET_INFO in _relative_names(output):  # TFDS's marker: what it describes is going
    _remove([path(output, output_layout.TFDS_DATASET_INFO)])
  if written:
    if not uris.is_remote(output):  # an object store has no folders to make
      for folder in {os.path.dirname(name) for name in written} - {''}:
        os.makedirs(path(output, folder), exist_ok=True)
    FileSystems.rename([temp_path(output, run, name) for name in written], [path(output, name) for name in written])
  for directory in written_dirs:
    _move_tree(output, run, directory)
  if moves:
    FileSystems.rename([path(output, source) for source, _ in moves], [path(output, target) for _, target in moves])
  # What the new record lists stays: an --incremental run's record lists the shards it kept.
  keep = set(written) | set(last) | {output_layout.RUN_RECORD} | listed_files(RunRecord.from_json(run_record_json))
  kept_dirs = tuple(directory + '/' for directory in written_dirs)
  names = _relative_names(output)
  listed = set().union(*(listed_files(record) for record in _records(output, names)))
  stale = [name for name in names
           if name not in keep and not name.startswith(output_layout.TEMP_DIR + '/') and name != output_layout.LOCK
           and ((output_layout.LISTED_NAME.match(name) and name in listed) or
                (output_layout.FIXED_NAME.match(name) and
                 (not name.startswith(kept_dirs) or output_layout.TF_TEMP_NAME.search(name))))]
  # A catalog, and its lookups' folders, that an update or a plain rerun left empty go too.
  _delete(output, stale, [d for d in output_layout.TRANSFORM_DIRECTORIES if d + '/' not in kept_dirs] +
          [output_layout.LOOKUP_DIR, output_layout.CONTENT_LOOKUP_DIR, output_layout.NEAR_INDEX_DIR,
           output_layout.CATALOG_DIR])
  if last:
    FileSystems.rename([temp_path(output, run, name) for name in last], [path(output, name) for name in last])
  FileSystems.rename([temp_path(output, run, output_layout.RUN_RECORD)], [path(output, output_layout.RUN_RECORD)])
  # Every staging folder, this run's and dead runs' (the lock says no other is alive).
  leftovers = [name for name in _relative_names(output) if name.startswith(output_layout.TEMP_DIR + '/')]
  _delete(output, leftovers, [output_layout.TEMP_DIR])


def _move_tree(output: str, run: str, directory: str) -> None:
  """Moves the staged directory ``directory`` into place, replacing an earlier run's."""
  staged, destination = temp_path(output, run, directory), path(output, directory)
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
