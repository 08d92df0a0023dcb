"""The lock's holder and its rules (core/output/run_lock.py), without any storage."""
import dataclasses
import os
import re
import subprocess
import sys

from beam_pipeline.core.output import run_lock
from beam_pipeline.core.output.run_lock import LockHolder

NOW = 1_800_000_000.0


def holder(**changes) -> LockHolder:
  base = run_lock.holder_for('20270115T080000Z-abc123', NOW - 100, stale_after=run_lock.LEASE_SECONDS)
  return dataclasses.replace(base, **changes)


def never_gone(_holder: LockHolder) -> bool:
  return False


def test_a_lease_is_stale_only_once_it_runs_out():
  fresh = holder(renewed=NOW - run_lock.LEASE_SECONDS + 1)
  assert not run_lock.is_stale(fresh, NOW, never_gone)
  assert run_lock.is_stale(holder(renewed=NOW - run_lock.LEASE_SECONDS - 1), NOW, never_gone)
  assert not run_lock.is_stale(holder(renewed=NOW - 10**6, stale_after=0), NOW, never_gone)  # flock: never


def test_a_local_runs_lease_is_stale_at_once_when_its_process_is_gone():
  ended = subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'], capture_output=True, text=True,
                         check=True)
  gone = holder(pid=int(ended.stdout), pid_started=12345, renewed=NOW)
  assert run_lock.is_stale(gone, NOW)
  assert not run_lock.is_stale(holder(renewed=NOW), NOW)  # this process: alive
  reused = holder(pid=os.getpid(), pid_started=run_lock.process_started(os.getpid()) + 1, renewed=NOW)
  assert run_lock.is_stale(reused, NOW), 'a pid reused by another process is not the holder'
  # A job's lease belongs to its workers: its launcher may be gone and the job still running.
  assert not run_lock.is_stale(dataclasses.replace(gone, held_by=run_lock.JOB), NOW)
  assert not run_lock.is_stale(dataclasses.replace(gone, host='another-host'), NOW)


def test_the_record_reads_back_and_damage_reads_as_none():
  held = holder(job='2027-01-15_00_00_00-123')
  assert LockHolder.from_json(held.to_json()) == held
  assert LockHolder.from_json('{"run": "x"') is None
  assert LockHolder.from_json('[]') is None
  assert LockHolder.from_json('{"run": "x"}') is None


def test_run_ids_sort_by_time_and_never_repeat():
  ids = {run_lock.new_run_id(NOW) for _ in range(200)}
  assert len(ids) == 200
  assert all(re.fullmatch(r'20270115T080000Z-[0-9a-f]{6}', run) for run in ids)
  assert run_lock.new_run_id(NOW) < run_lock.new_run_id(NOW + 1)


def test_the_refusal_names_the_holder_and_how_to_clear_a_stale_lock():
  lease = holder(renewed=NOW - 20, host='airflow-worker-3', pid=4242)
  line = run_lock.held_message('gs://b/out', 'gs://b/out/.beam_pipeline-lock', lease, NOW)
  assert '\n' not in line
  assert line.startswith('--output=gs://b/out is in use by another run: run 20270115T080000Z-abc123 '
                         '(pid 4242 on airflow-worker-3, started 2027-01-15 07:58:20 UTC, renewed 20 s ago)')
  assert line.endswith('if it is gone, delete gs://b/out/.beam_pipeline-lock (a lock not renewed for 5 min is '
                       'taken over by the next run)')
  job = dataclasses.replace(lease, held_by=run_lock.JOB, job='2027-01-15_07_58_30-991')
  assert 'Dataflow job 2027-01-15_07_58_30-991' in run_lock.held_message('gs://b/out', 'L', job, NOW)
  local = run_lock.held_message('out', 'out/.beam_pipeline-lock', holder(stale_after=0), NOW)
  assert 'freed the moment its process ends' in local and 'renewed' not in local
  assert 'cannot be read' in run_lock.held_message('out', 'out/.beam_pipeline-lock', None, NOW)
