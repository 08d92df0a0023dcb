"""Who holds an output: the lock file's holder (LockHolder), when its lease is stale, and how a
refusal names it.

One run at a time writes an output. The lock is a small JSON file beside the dataset
(output_layout.LOCK); the storage side (pipeline/output/output_lock.py) creates it atomically and
keeps it alive. What it holds and how its age is judged live here, as plain values.

Two kinds of lease, by who can keep one alive:
- A local output is locked with the kernel's ``flock``, held by the launching
  process: a killed run's lock is free at once, and nothing goes stale.
- A ``gs://`` output has no such thing, so its lock is a lease renewed every
  RENEW_SECONDS by every process of the run (the launcher while it waits, the
  workers of a job); it is stale LEASE_SECONDS after its last renewal. A job that
  nobody waits for (``--no_wait``, a Flex Template) gets JOB_START_SECONDS at first,
  since Dataflow's workers take minutes to start and renew it. A lease of a local
  run (DirectRunner) whose launching process is gone from this host is stale at once.
"""
import dataclasses
import datetime
import json
import os
import secrets
import socket
from typing import Callable, Optional

LEASE_SECONDS = 300.0
RENEW_SECONDS = 30.0
JOB_START_SECONDS = 1800.0
LAUNCHER = 'launcher'  # a local run: its launching process does all the work or waits for it
JOB = 'job'  # a job that goes on without its launcher (Dataflow), renewed by its workers


@dataclasses.dataclass(frozen=True)
class LockHolder:
  """The lock file's contents: which run holds the output, from where, and how fresh."""
  run: str
  host: str
  pid: int
  pid_started: Optional[int]  # the process's start (clock ticks after boot), so a reused pid is not taken for it
  started: float  # Unix time the run took the lock
  renewed: float  # Unix time of the last renewal
  stale_after: float  # seconds after ``renewed`` at which the lease runs out; 0: never (flock)
  held_by: str = LAUNCHER
  job: Optional[str] = None  # the Dataflow job's id, once submitted

  def to_json(self) -> str:
    return json.dumps(dataclasses.asdict(self), sort_keys=True) + '\n'

  @classmethod
  def from_json(cls, text: str) -> Optional['LockHolder']:
    """The holder, or None for text that is not one (a lock being written, or damaged)."""
    try:
      data = json.loads(text)
      names = {field.name for field in dataclasses.fields(cls)}
      return cls(**{key: value for key, value in data.items() if key in names})
    except (ValueError, TypeError, AttributeError):
      return None

  def renewed_at(self, now: float, lease: float = LEASE_SECONDS) -> 'LockHolder':
    return dataclasses.replace(self, renewed=now, stale_after=lease)


def new_run_id(now: float) -> str:
  """A run's name: when it started, in UTC, and a random part, so that two runs never share one
  (nor their staging folders) and a listing of runs sorts by time."""
  return f'{datetime.datetime.fromtimestamp(now, datetime.timezone.utc):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}'


def holder_for(run: str, now: float, stale_after: float, held_by: str = LAUNCHER) -> LockHolder:
  """The lock of ``run``, held by this process.

  Args:
    run: the run's id (new_run_id).
    now: Unix time the run takes the lock: its start and first renewal.
    stale_after: seconds after a renewal at which the lease runs out; 0 for a flock, which never goes stale.
    held_by: who keeps it alive: LAUNCHER (a local run's launching process) or JOB (a job's workers).
  """
  pid = os.getpid()
  return LockHolder(run=run, host=socket.gethostname(), pid=pid, pid_started=process_started(pid), started=now,
                    renewed=now, stale_after=stale_after, held_by=held_by)


def process_started(pid: int) -> Optional[int]:
  """When process ``pid`` started (clock ticks after boot, from Linux's /proc), or None if it does
  not exist or the system does not say."""
  try:
    with open(f'/proc/{pid}/stat', encoding='utf-8', errors='replace') as f:
      return int(f.read().rsplit(')', 1)[1].split()[19])
  except (OSError, IndexError, ValueError):
    return None


def _holder_gone(holder: LockHolder) -> bool:
  """Whether the launching process of a local run is gone from this host (or its pid reused)."""
  if holder.held_by != LAUNCHER or holder.host != socket.gethostname():
    return False
  started = process_started(holder.pid)
  if started is None:  # no such process, or a system without /proc, which can only ask the pid
    return os.path.exists('/proc/self/stat') or not _pid_exists(holder.pid)
  return holder.pid_started is not None and started != holder.pid_started


def _pid_exists(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


def is_stale(holder: LockHolder, now: float, holder_gone: Callable[[LockHolder], bool] = _holder_gone) -> bool:
  """Whether another run may take over the lease ``holder``: it ran out, or its local run's
  launching process is gone."""
  if holder.stale_after and now - holder.renewed > holder.stale_after:
    return True
  return holder_gone(holder)


def _ago(seconds: float) -> str:
  seconds = max(0, round(seconds))
  return f'{seconds} s ago' if seconds < 120 else f'{seconds // 60} min ago'


def describe(holder: LockHolder, now: float) -> str:
  """The holder as a refusal names it: run, where it runs, since when, how fresh."""
  started = datetime.datetime.fromtimestamp(holder.started, datetime.timezone.utc)
  where = (f'Dataflow job {holder.job}' if holder.job else
           f'pid {holder.pid} on {holder.host}' if holder.held_by == LAUNCHER else f'a job launched from {holder.host}')
  text = f'run {holder.run} ({where}, started {started:%Y-%m-%d %H:%M:%S} UTC'
  if holder.stale_after:
    text += f', renewed {_ago(now - holder.renewed)}'
  return text + ')'


def held_message(output: str, lock_path: str, holder: Optional[LockHolder], now: float) -> str:
  """The one line a second run stops with: who holds ``output`` and how to clear a stale lock.

  Args:
    output: the --output both runs were given.
    lock_path: the lock file, named so that a user can delete a stale one.
    holder: what the lock holds; None where it cannot be read (being written, or damaged).
    now: Unix time now, to say how long ago the holder renewed its lease.
  """
  if holder is None:
    return (f'--output={output} is locked by another run whose lock cannot be read ({lock_path}); wait for it to '
            f'end, or if no run is writing there, delete {lock_path}')
  if not holder.stale_after:
    return (f'--output={output} is in use by another run: {describe(holder, now)}; wait for it to end or stop it '
            '(its lock is freed the moment its process ends)')
  return (f'--output={output} is in use by another run: {describe(holder, now)}; wait for it to end, or if it is '
          f'gone, delete {lock_path} (a lock not renewed for {int(holder.stale_after // 60)} min is taken over by '
          'the next run)')
