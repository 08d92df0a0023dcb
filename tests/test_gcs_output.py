"""A gs:// output through the fault proxy: reruns into it, and listings, uploads and deletes
that fail.

Every request of the run goes through ``fault_proxy`` to the storage emulator; the
faults are real HTTP answers. Expected throughout: a listing that fails stops the
run before any work; uploads that keep failing stop it with the output's cause and
leave an earlier complete output as it was; a commit the storage breaks off is
completed by a rerun; a rerun with other options equals a fresh run.
"""
import pytest

from beam_pipeline import cli
from helpers import fault_proxy, gcs_emulator
from helpers.commands import error_line
from helpers.dataset_reader import assert_same_dataset, bucket_files
from helpers.gcs_retries import shorten_gcs_retries
from beam_pipeline.core.output import output_layout

BUCKET = 'outputs'
TEMP = output_layout.TEMP_DIR
# Two option sets: other shard counts, compression and splits.
FIRST = ('--target_shard_mb=0.005', '--compression=gzip')
SECOND = ('--target_shard_mb=1', '--splits=train=0.5,validation=0.5')


@pytest.fixture(scope='module')
def images(proxy):  # pylint: disable=unused-argument  # the proxy points the environment at the emulator
  return gcs_emulator.upload_photo_set(BUCKET, 'imgs/', ('cat', 'dog'), 6)


def convert(out: str, *extra: str) -> int:
  return cli.main([f'--input=gs://{BUCKET}/imgs', f'--output=gs://{BUCKET}/{out}', '--runner=DirectRunner',
                   '--skip_transform', *extra])


@pytest.fixture(scope='module')
def fresh(images, proxy):  # pylint: disable=unused-argument
  """Runs into new outputs, with the first and with the second options, that the tests compare
  theirs with: 'fresh-first' and 'fresh-second', made without faults and never changed."""
  proxy.plan.reset()
  assert convert('fresh-first', *FIRST) == 0
  assert convert('fresh-second', *SECOND) == 0
  return 'fresh-first', 'fresh-second'


def listing(prefix: str):
  """``when`` for object listings under ``prefix`` (GET .../o?prefix=...)."""
  return lambda request: (request.method == 'GET' and request.path.endswith('/o')
                          and request.query.get('prefix', [''])[0].startswith(prefix))


def deletes_of(suffix: str):
  """``when`` for deletes of objects named ``...suffix``: single ones, and the batch requests
  google-cloud-storage sends them in."""
  return lambda request: ((request.method == 'DELETE' and (request.object_name or '').endswith(suffix))
                          or (request.path.startswith('/batch/') and suffix.encode() in request.body))


def committed(out: str) -> dict:
  return {name: data for name, data in bucket_files(BUCKET, out).items() if not name.startswith(TEMP + '/')}


@pytest.mark.usefixtures('images', 'plan')
def test_a_rerun_into_a_gs_output_with_other_options_equals_a_fresh_run(fresh):
  fresh_first, fresh_second = fresh
  assert len([name for name in bucket_files(BUCKET, fresh_first) if name.endswith('.tfrecord.gz')]) >= 3
  assert convert('rerun', *FIRST) == 0
  assert convert('rerun', *SECOND) == 0
  assert_same_dataset(bucket_files(BUCKET, 'rerun'), bucket_files(BUCKET, fresh_second))
  assert convert('rerun', *FIRST) == 0
  assert_same_dataset(bucket_files(BUCKET, 'rerun'), bucket_files(BUCKET, fresh_first))


@pytest.mark.parametrize('flag, prefix', [('--output', 'unlistable/'), ('--input', 'imgs/')])
@pytest.mark.usefixtures('images')
def test_a_path_that_cannot_be_listed_stops_the_run_before_any_work(flag, prefix, plan, capsys):
  """A listing the storage refuses says so, with its cause: an input that cannot be listed
  (permissions, an outage) is not called missing."""
  rule = plan.add(fault_proxy.Fault(status=403), when=listing(prefix))
  capsys.readouterr()
  assert convert('unlistable') == 2
  err = capsys.readouterr().err
  assert err.startswith(f'error: {flag}=gs://{BUCKET}/{prefix.rstrip("/")} cannot be listed: Forbidden: ')
  assert err.count('\n') == 1 and rule.fired == 1
  assert plan.requests(lambda entry: entry.media) == []  # no image was read


@pytest.mark.usefixtures('images')
def test_uploads_that_keep_failing_stop_the_rerun_and_keep_the_earlier_output(plan, monkeypatch, capsys):
  assert convert('kept') == 0
  earlier = committed('kept')
  shorten_gcs_retries(monkeypatch, timeout=0.3)
  # Every upload of the run's files fails; its lock is taken as usual (a lock that cannot be taken
  # stops a run before any work: tests/pipeline/test_output_lock.py).
  plan.fail_every_nth(1, status=503, when=lambda request: fault_proxy.is_upload(request) and
                      output_layout.LOCK.encode() not in request.body)
  capsys.readouterr()
  assert convert('kept', *SECOND) == 1
  stderr = capsys.readouterr().err
  assert error_line(stderr).startswith(f'error: the output could not be written: cannot upload gs://{BUCKET}/kept/')
  assert (f'Nothing was committed: --output=gs://{BUCKET}/kept still holds its earlier complete dataset, '
          'unchanged.') in stderr
  log = stderr.strip().splitlines()[-1].split(': ', 1)[1]
  assert not log.startswith('gs://') and 'OutputError' in open(log, encoding='utf-8').read()  # the output refused it
  plan.reset()
  assert committed('kept') == earlier


@pytest.mark.usefixtures('images')
def test_a_commit_the_storage_breaks_off_is_completed_by_a_rerun(fresh, plan, monkeypatch, capsys):
  """An earlier output of many gzip shards; the rerun's commit moves its own shards in, and then
  cannot delete the stale ones. Expected: exit 1 naming the commit, no marker (the earlier one
  went first), and the same rerun without faults equals a fresh run."""
  assert convert('broken-off', *FIRST) == 0
  shorten_gcs_retries(monkeypatch, timeout=0.3)
  plan.fail_every_nth(1, status=503, when=deletes_of('.tfrecord.gz'))
  capsys.readouterr()
  assert convert('broken-off', *SECOND) == 1
  stderr = capsys.readouterr().err
  assert error_line(stderr).startswith(f'error: the output could not be written: committing --output=gs://{BUCKET}/'
                                       'broken-off failed')
  assert f'Nothing was committed: --output=gs://{BUCKET}/broken-off holds no complete dataset.' in stderr
  plan.reset()
  assert output_layout.RUN_RECORD not in committed('broken-off')
  assert convert('broken-off', *SECOND) == 0
  assert_same_dataset(bucket_files(BUCKET, 'broken-off'), bucket_files(BUCKET, fresh[1]))


@pytest.mark.usefixtures('images')
def test_a_lock_the_storage_will_not_delete_is_left_to_lapse_and_the_runs_outcome_stands(plan, monkeypatch, capsys):
  """Deleting the lock object keeps failing at the end of a run: a finished run still exits 0
  with its dataset committed, a failed one still says its own error, and one line warns that
  the lock lapses by itself (its lease is no longer renewed)."""
  shorten_gcs_retries(monkeypatch, timeout=0.3)
  plan.fail_every_nth(1, status=503, when=deletes_of(output_layout.LOCK))
  capsys.readouterr()
  assert convert('lock-left') == 0
  stderr = capsys.readouterr().err
  warnings = [line for line in stderr.splitlines() if line.startswith('warning: ')]
  assert len(warnings) == 1 and f'gs://{BUCKET}/lock-left/{output_layout.LOCK}' in warnings[0], stderr[-3000:]
  assert 'lapses within 5 minutes' in warnings[0]
  assert output_layout.LOCK in bucket_files(BUCKET, 'lock-left') and 'beam_pipeline.json' in committed('lock-left')

  plan.fail_every_nth(1, status=503, when=lambda request: fault_proxy.is_upload(request) and
                      output_layout.LOCK.encode() not in request.body)
  assert convert('lock-failed') == 1
  stderr = capsys.readouterr().err
  assert error_line(stderr).startswith(f'error: the output could not be written: cannot upload gs://{BUCKET}/lock-failed/')
  assert [line for line in stderr.splitlines() if line.startswith('warning: could not remove the lock')]
