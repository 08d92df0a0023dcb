"""One run at a time per output (pipeline/output/output_lock.py): the lock's storage, local and gs://.

The gs:// cases run against fake-gcs-server, which, like Cloud Storage, refuses a
create-if-absent of an existing object and a replace of an object changed since it
was read (helpers/fake_gcs.py); the usual emulator would let every racer win.
"""
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Callable, List

import pytest

from beam_pipeline.pipeline.output import output_lock
from beam_pipeline.core.output import output_layout, run_lock
from beam_pipeline.core.rejections import OutputError
from beam_pipeline.core.output.run_lock import LockHolder
from beam_pipeline.core.user_errors import UsageError
from helpers import fake_gcs, gcs_emulator

BUCKET = 'locks'


def race(count: int, attempt: Callable[[int], object]) -> List[object]:
  """Runs ``attempt(i)`` in ``count`` threads released at once; what each returned or raised."""
  start = threading.Barrier(count)
  results: List[object] = [None] * count

  def run(i: int) -> None:
    start.wait()
    try:
      results[i] = attempt(i)
    except Exception as e:  # pylint: disable=broad-except
      results[i] = e
  threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join()
  return results


# --- a local output: flock -----------------------------------------------------------------------


def test_a_second_run_is_refused_while_the_first_holds_a_local_output_and_welcome_after(tmp_path):
  out = str(tmp_path / 'out')
  with output_lock.acquire(out, 'run-a', run_lock.LAUNCHER):
    with pytest.raises(UsageError) as refused:
      output_lock.acquire(out, 'run-b', run_lock.LAUNCHER)
    assert f'--output={out} is in use by another run: run run-a (pid {os.getpid()} on' in str(refused.value)
    output_lock.check_held(out, 'run-a')
    with pytest.raises(OutputError, match='no longer holds the lock'):
      output_lock.check_held(out, 'run-b')
  assert not os.path.exists(output_lock.lock_path(out))
  with output_lock.acquire(out, 'run-b', run_lock.LAUNCHER):
    output_lock.check_held(out, 'run-b')


def test_a_killed_runs_local_lock_is_free_at_once(tmp_path):
  out = tmp_path / 'out'
  holder = subprocess.Popen(
      [sys.executable, '-c', 'import sys, time; from beam_pipeline.pipeline.output import output_lock\n'
       f'output_lock.acquire({str(out)!r}, "killed-run", "launcher"); print("held", flush=True); time.sleep(600)'],
      stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline() == 'held\n'
    with pytest.raises(UsageError, match='run killed-run'):
      output_lock.acquire(str(out), 'next-run', run_lock.LAUNCHER)
  finally:
    holder.send_signal(signal.SIGKILL)
    holder.wait()
  assert LockHolder.from_json((out / output_layout.LOCK).read_text()).run == 'killed-run'  # left behind
  with output_lock.acquire(str(out), 'next-run', run_lock.LAUNCHER):
    assert LockHolder.from_json((out / output_layout.LOCK).read_text()).run == 'next-run'


def test_racing_runs_get_one_local_lock(tmp_path):
  out = str(tmp_path / 'out')
  results = race(8, lambda i: output_lock.acquire(out, f'run-{i}', run_lock.LAUNCHER))
  held = [r for r in results if isinstance(r, output_lock.Held)]
  assert len(held) == 1 and all(isinstance(r, UsageError) for r in results if r not in held), results
  held[0].release()


def test_an_output_that_cannot_be_a_folder_gets_one_line(tmp_path):
  (tmp_path / 'file').write_text('x')
  with pytest.raises(UsageError, match=r'cannot be a folder: .*file is a file'):
    output_lock.acquire(str(tmp_path / 'file' / 'out'), 'run', run_lock.LAUNCHER)


# --- a gs:// output: generation preconditions -----------------------------------------------------


@pytest.fixture(scope='module')
def fake_gcs_server(tmp_path_factory):
  with fake_gcs.serving(tmp_path_factory.mktemp('fake-gcs'), BUCKET) as url:
    yield url


def lock_object(out: str) -> LockHolder:
  name = out[len(f'gs://{BUCKET}/'):] + '/' + output_layout.LOCK
  return LockHolder.from_json(gcs_emulator.download(BUCKET, name).decode())


def put_lock(out: str, holder: LockHolder) -> None:
  gcs_emulator.upload(BUCKET, {out[len(f'gs://{BUCKET}/'):] + '/' + output_layout.LOCK: holder.to_json().encode()})


def other_run(run: str, renewed: float, **changes) -> LockHolder:
  return dataclasses.replace(run_lock.holder_for(run, renewed, run_lock.LEASE_SECONDS), host='another-host', pid=1,
                             **changes)


def test_racing_runs_get_one_gcs_lock_and_the_others_name_it(fake_gcs_server):
  out = f'gs://{BUCKET}/race'
  results = race(6, lambda i: output_lock.acquire(out, f'run-{i}', run_lock.JOB))
  held = [r for r in results if isinstance(r, output_lock.Held)]
  assert len(held) == 1, results
  winner = held[0].run
  for refused in (r for r in results if r not in held):
    assert isinstance(refused, UsageError) and f'run {winner} ' in str(refused), refused
  assert lock_object(out).run == winner
  held[0].release()
  assert output_lock._read_object(output_lock.lock_path(out)) is None  # pylint: disable=protected-access


def test_a_stale_gcs_lease_is_taken_over_by_exactly_one_run_and_a_fresh_one_is_not(fake_gcs_server):
  out = f'gs://{BUCKET}/stale'
  put_lock(out, other_run('fresh-run', time.time() - 10))
  with pytest.raises(UsageError, match='run fresh-run .*renewed 10 s ago'):
    output_lock.acquire(out, 'late-run', run_lock.LAUNCHER)

  put_lock(out, other_run('dead-run', time.time() - run_lock.LEASE_SECONDS - 60))
  results = race(5, lambda i: output_lock.acquire(out, f'taker-{i}', run_lock.LAUNCHER))
  held = [r for r in results if isinstance(r, output_lock.Held)]
  assert len(held) == 1, results
  assert lock_object(out).run == held[0].run
  # The run that lost its lease must not commit, and cannot remove the new holder's lock.
  with pytest.raises(OutputError, match=f'no longer holds the lock .*run {held[0].run} does'):
    output_lock.check_held(out, 'dead-run')
  output_lock.give_up(out, 'dead-run')
  assert lock_object(out).run == held[0].run
  held[0].release()


def test_a_gcs_lease_is_renewed_by_the_runs_processes_and_handed_to_a_job(fake_gcs_server, monkeypatch):
  monkeypatch.setattr(run_lock, 'RENEW_SECONDS', 0.2)
  out = f'gs://{BUCKET}/renewed'
  held = output_lock.acquire(out, 'long-run', run_lock.LAUNCHER)
  first = lock_object(out)
  deadline = time.monotonic() + 20
  while lock_object(out).renewed == first.renewed and time.monotonic() < deadline:
    time.sleep(0.1)
  assert lock_object(out).renewed > first.renewed
  held.hand_over('2027-01-15_00_00_00-77')
  job = lock_object(out)
  assert (job.held_by, job.job, job.stale_after) == (run_lock.JOB, '2027-01-15_00_00_00-77',
                                                     run_lock.JOB_START_SECONDS)
  held.release()  # handed over: the launcher leaves it to the job
  assert lock_object(out).run == 'long-run'
  output_lock.check_held(out, 'long-run')  # the job's commit renews it...
  assert lock_object(out).stale_after == run_lock.LEASE_SECONDS
  output_lock.give_up(out, 'long-run')  # ...and gives it up
  assert output_lock._read_object(output_lock.lock_path(out)) is None  # pylint: disable=protected-access


def test_a_damaged_gcs_lock_is_respected_until_it_is_old(fake_gcs_server):
  out = f'gs://{BUCKET}/damaged'
  gcs_emulator.upload(BUCKET, {f'damaged/{output_layout.LOCK}': b'{"run": '})
  with pytest.raises(UsageError, match='whose lock cannot be read'):
    output_lock.acquire(out, 'run', run_lock.LAUNCHER)
  assert json.loads(gcs_emulator.download(BUCKET, f'damaged/{output_layout.LOCK}') + b'"x"}') == {'run': 'x'}
