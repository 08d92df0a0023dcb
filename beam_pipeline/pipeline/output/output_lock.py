"""One run at a time per output: its lock, taken before any work, kept alive, checked by the
commit and given up after it (the holder and its rules: core/output/run_lock.py).

A local output's lock is a file held with the kernel's ``flock`` by the launching
process. A ``gs://`` output's is an object created only if absent and replaced only if
unchanged since read, by Cloud Storage's generation preconditions
(``ifGenerationMatch``): Beam's FileSystems has no conditional writes, so this module
talks to the storage client Beam's own GCS filesystem is built on
(``gcsio.GcsIO().client``), with its credentials and retries.
"""
import dataclasses
import fcntl
import os
import random
import sys
import threading
import time
from typing import Dict, NamedTuple, Optional, Set, Tuple

from beam_pipeline.core import rejections, uris
from beam_pipeline.core.output import output_layout, run_lock
from beam_pipeline.core.rejections import LockLost, OutputError
from beam_pipeline.core.output.run_lock import LockHolder
from beam_pipeline.core.user_errors import UsageError

_ATTEMPTS = 5
_lock = threading.Lock()
_beats: Dict[Tuple[str, str], threading.Event] = {}  # (lock uri, run) -> stops this process's renewals
_left: Set[Tuple[str, str]] = set()  # (lock uri, run) of the locks this process could not remove


def lock_path(output: str) -> str:
  return uris.join(output, output_layout.LOCK)


def _is_gcs(output: str) -> bool:
  return output.strip().startswith('gs://')


class Held:
  """The lock a run holds on its output, until released (or handed over to its job)."""

  def __init__(self, output: str, run: str, release):
    self.output, self.run = output, run
    self._release = release

  def hand_over(self, job: Optional[str]) -> None:
    """The launcher leaves and the job goes on: the lease is left to the job's workers, with
    time for them to start (run_lock.JOB_START_SECONDS); the job's commit gives it up."""
    self._release = None
    _stop_renewing(self.output, self.run)
    if _is_gcs(self.output):
      _rewrite_own(lock_path(self.output), self.run, lambda holder: _with_job(holder, job))

  def release(self) -> None:
    """Gives the lock up if this run still holds it (the commit may have done so already)."""
    release, self._release = self._release, None
    if release:
      release()

  def __enter__(self) -> 'Held':
    return self

  def __exit__(self, *_) -> None:
    self.release()


def _with_job(holder: LockHolder, job: Optional[str]) -> LockHolder:
  return dataclasses.replace(holder.renewed_at(time.time(), run_lock.JOB_START_SECONDS), held_by=run_lock.JOB,
                             job=job)


def acquire(output: str, run: str, held_by: str) -> Held:
  """Takes ``output``'s lock for ``run``, before any work; UsageError naming the holder if
  another run holds it, or if the output cannot be locked at all."""
  if _is_gcs(output):
    return _acquire_object(output, run, held_by)
  if uris.is_remote(output):  # storage without an atomic create: nothing to lock with
    return Held(output, run, None)
  return _acquire_file(output, run)


# ---------------------------------------------------------------------------------------------
# A local output: flock


def _acquire_file(output: str, run: str) -> Held:
  path = lock_path(output)
  created = not os.path.isdir(output)
  try:
    os.makedirs(output, exist_ok=True)
  except OSError as e:
    raise UsageError(unwritable(output, e)) from None
  for _ in range(_ATTEMPTS):
    try:
      fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
      raise UsageError(unwritable(output, e)) from None
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = LockHolder.from_json(os.pread(fd, 1 << 16, 0).decode('utf-8', 'replace'))
      os.close(fd)
      raise UsageError(run_lock.held_message(output, path, holder, time.time())) from None
    try:  # the holder before us may have removed the file between our open and our flock
      same = os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
      same = False
    if not same:
      os.close(fd)
      continue
    data = run_lock.holder_for(run, time.time(), stale_after=0).to_json().encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    return Held(output, run, lambda: _release_file(path, run, fd, output if created else None))  # noqa: B023 (returns)
  raise UsageError(f'--output={output}: its lock kept changing hands; try again')


def _read_file(path: str) -> Optional[LockHolder]:
  try:
    with open(path, encoding='utf-8', errors='replace') as f:
      return LockHolder.from_json(f.read())
  except FileNotFoundError:
    return None


def _release_file(path: str, run: str, fd: int, created: Optional[str]) -> None:
  """Removes the lock file while still holding it, if it is this run's; the flock goes with the
  descriptor. The folder ``created`` for the lock goes too if nothing else came into it (a
  run refused before any work leaves no trace).

  Args:
    path: the lock file.
    run: the run's id: a lock file that names another run stays.
    fd: the descriptor that holds the flock, closed here.
    created: the output folder, if taking the lock made it; None if it was there before.
  """
  try:
    holder = _read_file(path)
    if holder is not None and holder.run == run:
      os.unlink(path)
  finally:
    os.close(fd)
  if created:
    try:
      os.rmdir(created)
    except OSError:  # the run wrote something there
      pass


# ---------------------------------------------------------------------------------------------
# A gs:// output: an object with generation preconditions


def _blob(uri: str):
  """The lock object, through a client made as Beam's GCS filesystem makes one for each operation
  (a lock is touched about twice a minute)."""
  from apache_beam.io.gcp import gcsio  # pylint: disable=import-outside-toplevel  # only for gs:// outputs
  bucket, name = gcsio.parse_gcs_path(uri)
  return gcsio.GcsIO().client.bucket(bucket).blob(name)


def _retry():
  """The retries Beam's GCS filesystem makes (and counts as throttling), looked up at each call as
  Beam does."""
  from apache_beam.io.gcp import gcsio_retry  # pylint: disable=import-outside-toplevel
  return gcsio_retry.DEFAULT_RETRY_WITH_THROTTLING_COUNTER


class _Found(NamedTuple):
  holder: Optional[LockHolder]  # None: the lock cannot be parsed
  generation: Optional[int]
  updated: Optional[float]  # Unix time, by the storage's clock


def _read_object(uri: str) -> Optional[_Found]:
  """The lock as it is now, or None if there is none."""
  from google.api_core import exceptions  # pylint: disable=import-outside-toplevel
  blob = _blob(uri)
  for _ in range(_ATTEMPTS):
    found = blob.bucket.get_blob(blob.name, retry=_retry())
    if found is None:
      return None
    try:
      data = found.download_as_bytes(if_generation_match=found.generation, retry=_retry())
    except (exceptions.NotFound, exceptions.PreconditionFailed):
      continue  # replaced or removed between the two requests
    return _Found(LockHolder.from_json(data.decode('utf-8', 'replace')), found.generation,
                  found.updated.timestamp() if found.updated else None)
  raise OutputError(f'{uri} kept changing while it was read')


def _holder(found: Optional[_Found]) -> Optional[LockHolder]:
  return found.holder if found else None


def _write_object(uri: str, holder: LockHolder, generation: Optional[int]) -> None:
  """Writes ``holder`` if the lock's generation is still ``generation`` (0: if there is none;
  None: a storage that gives none, as some emulators);
  google.api_core.exceptions.PreconditionFailed if not."""
  _blob(uri).upload_from_string(holder.to_json(), content_type='application/json', if_generation_match=generation,
                                retry=_retry())


def _acquire_object(output: str, run: str, held_by: str) -> Held:
  from google.api_core import exceptions  # pylint: disable=import-outside-toplevel
  uri = lock_path(output)
  lease = run_lock.LEASE_SECONDS if held_by == run_lock.LAUNCHER else run_lock.JOB_START_SECONDS
  try:
    for _ in range(_ATTEMPTS):
      found = _read_object(uri)
      now = time.time()
      if found and found.holder is not None and found.holder.run == run:
        break  # our own create, whose answer was lost and retried
      if found:
        holder = found.holder
        damaged_but_fresh = holder is None and (found.updated is None or now - found.updated <= run_lock.LEASE_SECONDS)
        if damaged_but_fresh or (holder is not None and not run_lock.is_stale(holder, now)):
          raise UsageError(run_lock.held_message(output, uri, holder, now))
      mine = run_lock.holder_for(run, now, stale_after=lease, held_by=held_by)
      try:
        _write_object(uri, mine, found.generation if found else 0)
      except exceptions.PreconditionFailed:
        continue  # another run took or renewed it meanwhile: look again
      break
    else:
      raise UsageError(f'--output={output}: its lock kept changing hands; try again')
  except UsageError:
    raise
  except Exception as e:  # pylint: disable=broad-except  # the storage's errors, after its client's retries
    raise UsageError(f'--output={output}: its lock {uri} cannot be taken: {type(e).__name__}: '
                     f'{rejections.first_line(e, 300)}') from None
  keep_alive(output, run, lease)
  return Held(output, run, lambda: _release_object(output, run))


def _rewrite_own(uri: str, run: str, change) -> bool:
  """Replaces the lock by ``change(holder)`` if it is still ``run``'s; whether it was."""
  from google.api_core import exceptions  # pylint: disable=import-outside-toplevel
  for _ in range(_ATTEMPTS):
    found = _read_object(uri)
    if not found or found.holder is None or found.holder.run != run:
      return False
    try:
      _write_object(uri, change(found.holder), found.generation)
      return True
    except exceptions.PreconditionFailed:
      continue
  return False


def _release_object(output: str, run: str) -> None:
  """Deletes ``run``'s lock object. One the storage keeps refusing to delete (its requests failing
  past their retries) is left to lapse with its lease, which is no longer renewed: the run's own
  outcome stands, a failure's error included, and the console says what was left."""
  import requests  # pylint: disable=import-outside-toplevel
  from google.api_core import exceptions  # pylint: disable=import-outside-toplevel
  _stop_renewing(output, run)
  uri = lock_path(output)
  if (uri, run) in _left:  # the commit's release said so already
    return
  try:
    _delete_own(uri, run)
  except (exceptions.GoogleAPIError, requests.exceptions.RequestException) as error:
    _left.add((uri, run))
    print(f'warning: could not remove the lock {uri} ({type(error).__name__}: {rejections.first_line(error, 300)}); '
          f'it lapses within {run_lock.LEASE_SECONDS / 60:g} minutes, and the next run into the output can then '
          'take it', file=sys.stderr, flush=True)


def _delete_own(uri: str, run: str) -> None:
  from google.api_core import exceptions  # pylint: disable=import-outside-toplevel
  for _ in range(_ATTEMPTS):
    found = _read_object(uri)
    if not found or found.holder is None or found.holder.run != run:
      return
    try:
      _blob(uri).delete(if_generation_match=found.generation, retry=_retry())
      return
    except (exceptions.PreconditionFailed, exceptions.NotFound):
      continue


def keep_alive(output: str, run: str, lease: float = run_lock.LEASE_SECONDS) -> None:
  """Renews a ``gs://`` output's lease from this process while ``run`` holds it: every process of
  a run calls it (the launcher, each worker), and each renews only when no other did lately,
  so the object is written about once every run_lock.RENEW_SECONDS however many workers run."""
  if not _is_gcs(output) or not run:
    return
  key = (lock_path(output), run)
  with _lock:
    if key in _beats:
      return
    stop = _beats[key] = threading.Event()
  threading.Thread(target=_renew, args=(key[0], run, lease, stop), name='beam_pipeline-lock', daemon=True).start()


def _stop_renewing(output: str, run: str) -> None:
  with _lock:
    stop = _beats.pop((lock_path(output), run), None)
  if stop:
    stop.set()


def _renew(uri: str, run: str, lease: float, stop: threading.Event) -> None:
  """Renews the lease every 0.8 to 1 run_lock.RENEW_SECONDS, at random so that a job's processes
  do not all renew at once, unless another did lately; until ``stop`` is set or the lock is no
  longer ``run``'s.

  Args:
    uri: the lock object's gs:// uri.
    run: the run's id, whose lock it renews.
    lease: the seconds after its last renewal at which the lock is stale.
    stop: set when this process is to renew no more (_stop_renewing).
  """
  while not stop.wait(run_lock.RENEW_SECONDS * random.uniform(0.8, 1.0)):
    try:
      holder = _holder(_read_object(uri))
      if holder is None or holder.run != run:
        return  # given up by the commit, or taken over: nothing more to renew
      if time.time() - holder.renewed < run_lock.RENEW_SECONDS / 2:
        continue  # another process of the run renewed it
      _rewrite_own(uri, run, lambda current: current.renewed_at(time.time(), lease))
    except Exception:  # pylint: disable=broad-except  # retried at the next beat: the lease outlasts ten
      continue


def check_held(output: str, run: str) -> None:
  """Before the commit touches the output: LockLost unless ``run`` still holds its lock (a run
  whose lease ran out, and was taken over, must not commit over the other run's work). A
  ``gs://`` lease is renewed here, so the commit starts with all of it."""
  if _is_gcs(output):
    renewed = _rewrite_own(lock_path(output), run, lambda holder: holder.renewed_at(time.time()))
    holder = None if renewed else _holder(_read_object(lock_path(output)))
  elif uris.is_remote(output):
    return
  else:
    holder = _read_file(lock_path(output))
    renewed = holder is not None and holder.run == run
  if not renewed:
    other = f'run {holder.run}' if holder else 'no run'
    raise LockLost(f'this run ({run}) no longer holds the lock of --output={output} ({other} does: its lease ran '
                      'out, or the lock was removed); nothing was committed, so as not to mix two runs')


def give_up(output: str, run: str) -> None:
  """After the commit: the lock goes, if ``run`` still holds it."""
  if _is_gcs(output):
    _release_object(output, run)
  elif not uris.is_remote(output):
    holder = _read_file(lock_path(output))
    if holder is not None and holder.run == run:
      os.unlink(lock_path(output))


def unwritable(output: str, error: OSError) -> str:
  """Why a local --output cannot be used, and what to do, in one line."""
  if isinstance(error, NotADirectoryError) or os.path.isfile(output):
    here = output if os.path.isfile(output) else next(
        (p for p in _parents(output) if os.path.isfile(p)), output)
    return f'--output={output} cannot be a folder: {here} is a file; name a folder (new, empty or an earlier output)'
  if isinstance(error, PermissionError) or getattr(error, 'errno', None) == 30:  # EROFS
    return f'--output={output} is not writable ({error.strerror}); choose a folder you can write to'
  return f'--output={output} cannot be used: {error.strerror or error}; choose another folder'


def _parents(path: str):
  path = os.path.abspath(path)
  while True:
    parent = os.path.dirname(path)
    if parent == path:
      return
    yield parent
    path = parent
