"""Transient storage faults are retried, never recorded as bad images; really bad files are rejected once.

Faults are injected for real: the code under test talks HTTP to ``fault_proxy``, which
forwards to the Cloud Storage emulator and fails the requests its plan selects
(STORAGE_EMULATOR_HOST points at the proxy). Two retry layers are exercised:

- google-cloud-storage's own retry (Beam's GcsIO passes its DEFAULT_RETRY, or a copy
  that counts throttled seconds): 429/5xx/connection errors are retried with
  exponential backoff, sleeping uniform(0, d) with d = 1, 2, 4, ... 60 s, until a
  120 s deadline; a retry whose sleep would end past the deadline is not made, so a
  persistent 503 gives up after roughly 10 attempts and 60-120 s, raising RetryError.
  Beam has no pipeline option for these numbers (``--no_gcsio_throttling_counter``
  only picks which of the two Retry objects is used), so tests that need a fast
  give-up replace Beam's module-level Retry objects (``shorten_gcs_retries``).
- beam_pipeline.core.inputs.reading.read_file's own READ_ATTEMPTS with exponential backoff, after
  which TransientReadError fails the job.
"""
import gzip
import os
import re
import time
import types

import pytest
from google.api_core import exceptions as google_exceptions

from beam_pipeline import cli
from beam_pipeline.pipeline.pooled_steps import open_image
from beam_pipeline.core import rejections
from beam_pipeline.core.inputs import reading
from beam_pipeline.core.output import output_layout
from helpers.commands import error_line
from beam_pipeline.core.rejections import Rejected

from helpers import dataset_reader, fault_proxy, gcs_emulator
from helpers.gcs_retries import shorten_gcs_retries

BUCKET = 'faults'
LABELS = ('cat', 'dog')
PER_CLASS = 5
IMAGES = 'imgs/'
MISSING = f'{IMAGES}cat/never-uploaded.jpg'


@pytest.fixture(scope='module')
def photos(proxy) -> dict:  # pylint: disable=redefined-outer-name,unused-argument
  """PER_CLASS small JPEGs per label under imgs/<label>/; returns {uri: (label, bytes)}."""
  return gcs_emulator.upload_photo_set(BUCKET, IMAGES, LABELS, PER_CLASS)


def _images(request) -> bool:
  return (request.object_name or '').startswith(IMAGES)


def image_downloads(request) -> bool:
  """Media downloads of the input images (not of the output the CLI reads back for its summary)."""
  return fault_proxy.is_media_download(request) and _images(request)


def _metadata_gets(plan, name=None) -> list:
  """Object metadata GETs (BeamBlobReader's blob.reload(): one per opened read) of images, or of ``name``."""
  return plan.requests(lambda e: e.method == 'GET' and not e.media and e.object_name is not None
                       and '/o/' in e.path and (e.object_name == name if name else e.object_name.startswith(IMAGES)))


def _downloads(plan, name=None, outcome=None) -> list:
  return plan.requests(lambda e: e.media and (e.object_name == name if name else e.object_name.startswith(IMAGES))
                       and (outcome is None or e.outcome == outcome))


def _run(argv) -> int:
  # tf.Transform writes through tf.io.gfile, which cannot reach the emulator.
  return cli.main(argv + ['--runner=DirectRunner', '--skip_transform'])


def _read_output(out: str, local_dir) -> tuple:
  """Downloads gs://BUCKET/<out>/ (through the proxy) and reads it back with TensorFlow."""
  names = gcs_emulator.list_names(BUCKET, out + '/')
  assert not [n for n in names if n.startswith(f'{out}/{output_layout.TEMP_DIR}/')], names
  for name in names:
    local = os.path.join(local_dir, os.path.relpath(name, out))
    os.makedirs(os.path.dirname(local), exist_ok=True)
    with open(local, 'wb') as f:
      f.write(gcs_emulator.download(BUCKET, name))
  info, records = dataset_reader.read_output(str(local_dir))
  return info, records, dataset_reader.read_errors(str(local_dir))


def _check_written_once(info, records, expected: dict) -> None:
  written = [record for split in records.values() for record in split]
  uris = [record['image/filename'].decode() for record in written]
  assert sorted(uris) == sorted(expected), 'every image exactly once'
  for record in written:
    label, data = expected[record['image/filename'].decode()]
    assert record['image/encoded'] == data
    assert record['image/class/text'] == label.encode()
  assert info['num_examples'] == len(expected)


# --- a. transient faults in a pipeline run are retried -----------------------------------------

@pytest.mark.parametrize('status', [503, 429])
def test_transient_download_faults_are_retried(status, photos, plan, tmp_path, capsys):
  """Every 3rd image download fails; google-cloud-storage's default retry (real backoff) absorbs it."""
  rule = plan.fail_every_nth(3, status=status, when=image_downloads)
  out = f'out-every3rd-{status}'
  code = _run([f'--input=gs://{BUCKET}/imgs', f'--output=gs://{BUCKET}/{out}'])
  assert code == 0, capsys.readouterr().err
  # Validate and WriteShard each download every image once successfully: 20 downloads got
  # through, and the rule counts every attempt. Every 3rd of the m attempts fails and the
  # last one succeeds, so m - m // 3 == 20 with m % 3 != 0: m == 29, 9 of them failed.
  failed = _downloads(plan, outcome='failed')
  assert rule.matched == 29 and rule.fired == len(failed) == 9
  assert {e.status for e in failed} == {status}
  assert len(_downloads(plan, outcome='forwarded')) == 2 * len(photos)
  # Each opened read costs one metadata GET: 2 per image, so read_file itself never had to retry.
  assert len(_metadata_gets(plan)) == 2 * len(photos)

  plan.reset()  # reading the output back must not be disturbed
  info, records, errors = _read_output(out, tmp_path)
  _check_written_once(info, records, photos)
  assert errors == [] and info['num_errors'] == 0 and info['errors_by_reason'] == {}


def test_transient_faults_reach_read_file_and_are_retried_there(photos, plan, monkeypatch, tmp_path, capsys):
  """With google-cloud-storage making a single attempt, every 503 surfaces in read_file, which retries."""
  shorten_gcs_retries(monkeypatch, timeout=0)
  monkeypatch.setattr(reading, 'BACKOFF_SECONDS', 0.01)
  rule = plan.fail_every_nth(3, status=503, when=image_downloads)
  out = 'out-read-file-retries'
  code = _run([f'--input=gs://{BUCKET}/imgs', f'--output=gs://{BUCKET}/{out}'])
  assert code == 0, capsys.readouterr().err
  failed = _downloads(plan, outcome='failed')
  assert rule.matched == 29 and rule.fired == len(failed) == 9  # as in the test above
  assert len(_downloads(plan, outcome='forwarded')) == 2 * len(photos)
  # Every failed download cost read_file one more attempt, which opens the object again.
  assert len(_metadata_gets(plan)) == 2 * len(photos) + len(failed)
  for entry in failed:  # and each object failed was then read successfully
    assert _downloads(plan, entry.object_name, outcome='forwarded')

  plan.reset()
  info, records, errors = _read_output(out, tmp_path)
  _check_written_once(info, records, photos)
  assert errors == [] and info['num_errors'] == 0


# --- b. a persistently failing object fails the job --------------------------------------------

@pytest.mark.parametrize('scope', ['media', 'metadata'])
def test_persistent_transient_failure_fails_the_job(scope, photos, plan, monkeypatch, capsys):
  """Always 503 for one object: no rejection, no dataset; the CLI stops with exit 1, its error line
  naming the cause, the details in a log file in the output's temporary directory."""
  victim = f'{IMAGES}dog/dog.3.jpg'
  shorten_gcs_retries(monkeypatch, timeout=0.3, metadata_too=scope == 'metadata')
  monkeypatch.setattr(reading, 'BACKOFF_SECONDS', 0.01)
  when = fault_proxy.is_media_download if scope == 'media' else fault_proxy.is_object_get
  rule = plan.fail_object(victim, status=503, when=when)
  attempts = []  # read_file's attempts at each uri (each one costs a storage call and its retries)
  read_once = reading._read_once  # pylint: disable=protected-access
  monkeypatch.setattr(reading, '_read_once', lambda uri, *args: attempts.append(uri) or read_once(uri, *args))
  out = f'out-persistent-{scope}'
  code = _run([f'--input=gs://{BUCKET}/imgs', f'--output=gs://{BUCKET}/{out}', '--max_error_fraction=0.5'])
  assert code == 1
  stderr = capsys.readouterr().err
  message = error_line(stderr)
  assert message.startswith('error: storage kept failing, so the run stopped (no image was rejected for it)')
  details = stderr.strip().splitlines()[-1]
  log = re.fullmatch(rf'  Details \(the traceback and the log of the run\): '
                     rf'gs://{BUCKET}/({out}/\.beam_pipeline-tmp/[^/]+/failed-run\.log)', details)
  assert log, details
  # The storage client's own retry gave up (RetryError), so read_file does not multiply the wait.
  assert f'gs://{BUCKET}/{victim}: reading failed after {reading.READ_ATTEMPTS} attempt(s)' in message
  assert 'last with RetryError: Timeout of 0.3s' in message
  # read_file opened the object READ_ATTEMPTS times (one metadata GET each, unless that
  # GET is what fails), and google-cloud-storage retried each attempt several times.
  if scope == 'media':
    assert len(_metadata_gets(plan, victim)) == reading.READ_ATTEMPTS
    assert len(_downloads(plan, victim)) == rule.fired
  else:
    assert len(_metadata_gets(plan, victim)) == rule.fired
    assert _downloads(plan, victim) == []
  assert rule.fired >= 2 * reading.READ_ATTEMPTS
  # The work the failure cost, not the time it took: READ_ATTEMPTS attempts at the victim, no
  # more (neither read_file nor a retried bundle multiplied the storage client's retries).
  assert attempts.count(f'gs://{BUCKET}/{victim}') == reading.READ_ATTEMPTS
  # Nothing was committed: nothing but the run's temporary directory, which holds the log.
  plan.reset()
  names = gcs_emulator.list_names(BUCKET, out + '/')
  assert all(name.startswith(f'{out}/.beam_pipeline-tmp/') for name in names), names  # and no lock
  assert b'TransientReadError' in gcs_emulator.download(BUCKET, log.group(1))


# --- c. a missing object is rejected exactly once ----------------------------------------------

@pytest.mark.parametrize('manifest_kind', ['csv', 'jsonl'])
def test_missing_object_is_rejected_once(manifest_kind, photos, plan, tmp_path, capsys):
  missing_uri = f'gs://{BUCKET}/{MISSING}'
  rows = [(uri, label) for uri, (label, _) in sorted(photos.items())]
  rows.insert(3, (missing_uri, 'cat'))
  manifest = tmp_path / f'manifest.{manifest_kind}'
  if manifest_kind == 'csv':
    manifest.write_text('uri,label\n' + ''.join(f'{uri},{label}\n' for uri, label in rows))
  else:
    manifest.write_text(''.join(f'{{"uri": "{uri}", "label": "{label}"}}\n' for uri, label in rows))
  out = f'out-missing-{manifest_kind}'
  code = _run([f'--input={manifest}', f'--output=gs://{BUCKET}/{out}', '--max_error_fraction=0.5'])
  assert code == 0, capsys.readouterr().err
  assert 'Rejected 1 input: unreadable 1' in capsys.readouterr().out
  # Read once (one metadata GET answered 404, never retried by either layer) and never downloaded.
  assert [e.status for e in _metadata_gets(plan, MISSING)] == [404]
  assert _downloads(plan, MISSING) == []
  assert plan.faulted == 0

  local = tmp_path / 'output'
  info, records, errors = _read_output(out, local)
  _check_written_once(info, records, photos)
  assert [(e['uri'], e['reason']) for e in errors] == [(missing_uri, rejections.UNREADABLE)]
  assert '404' in errors[0]['detail'], errors[0]
  assert info['num_errors'] == 1 and info['errors_by_reason'] == {rejections.UNREADABLE: 1}


# --- d. read_file on its own -------------------------------------------------------------------

URI = f'gs://{BUCKET}/{IMAGES}cat/cat.0.jpg'
NAME = URI[len(f'gs://{BUCKET}/'):]


@pytest.mark.parametrize('status', [503, 429])
def test_read_file_survives_failures_absorbed_by_the_storage_client(status, photos, plan):
  """Default retries: google-cloud-storage retries the download itself; read_file opens once."""
  rule = plan.fail_first(2, status=status, when=fault_proxy.is_media_download)
  assert reading.read_file(URI, 10**6, open_image) == photos[URI][1]
  assert rule.fired == 2
  assert [e.status for e in _downloads(plan, NAME)] == [status, status, 206]
  assert len(_metadata_gets(plan, NAME)) == 1


def test_read_file_retries_with_backoff(photos, plan, monkeypatch):
  """One attempt per storage call: read_file's own backoff retries (3 opens, 3 downloads)."""
  shorten_gcs_retries(monkeypatch, timeout=0)
  backoff = 0.1
  monkeypatch.setattr(reading, 'BACKOFF_SECONDS', backoff)
  plan.fail_first(2, status=503, when=fault_proxy.is_media_download)
  slept = []  # read_file's backoff sleeps, recorded (and not slept)
  monkeypatch.setattr(reading, 'time', types.SimpleNamespace(monotonic=time.monotonic, sleep=slept.append))
  assert reading.read_file(URI, 10**6, open_image) == photos[URI][1]
  assert [e.status for e in _downloads(plan, NAME)] == [503, 503, 206]
  assert len(_metadata_gets(plan, NAME)) == 3
  # Two backoff sleeps of BACKOFF_SECONDS * 2**attempt * uniform(0.5, 1.0).
  assert len(slept) == 2, slept
  assert backoff * 0.5 <= slept[0] <= backoff and backoff <= slept[1] <= 2 * backoff, slept


@pytest.mark.parametrize('status', [503, 429, 500])
def test_read_file_gives_up_with_transient_read_error(status, photos, plan, monkeypatch):  # pylint: disable=unused-argument
  shorten_gcs_retries(monkeypatch, timeout=0.2)
  monkeypatch.setattr(reading, 'BACKOFF_SECONDS', 0.01)
  rule = plan.fail_object(NAME, status=status, when=fault_proxy.is_media_download)
  with pytest.raises(reading.TransientReadError) as raised:
    reading.read_file(URI, 10**6, open_image)
  assert f'reading failed after {reading.READ_ATTEMPTS} attempt(s)' in str(raised.value)
  assert 'last with RetryError' in str(raised.value)
  assert isinstance(raised.value.__cause__, google_exceptions.RetryError)
  assert len(_metadata_gets(plan, NAME)) == reading.READ_ATTEMPTS
  assert rule.fired == len(_downloads(plan, NAME)) >= 2 * reading.READ_ATTEMPTS
  assert {e.status for e in _downloads(plan, NAME)} == {status}


def test_read_file_stops_retrying_past_its_deadline(photos, plan, monkeypatch):  # pylint: disable=unused-argument
  """Once the storage client's own retries took longer than RETRY_DEADLINE_SECONDS
  (120 s by default against 60), more attempts would only multiply the wait."""
  shorten_gcs_retries(monkeypatch, timeout=0.2)
  monkeypatch.setattr(reading, 'RETRY_DEADLINE_SECONDS', 0.1)
  plan.fail_object(NAME, status=503, when=fault_proxy.is_media_download)
  with pytest.raises(reading.TransientReadError) as raised:
    reading.read_file(URI, 10**6, open_image)
  assert 'reading failed after 1 attempt(s)' in str(raised.value)
  assert len(_metadata_gets(plan, NAME)) == 1


def test_read_file_rejects_a_missing_object_once(photos, plan):  # pylint: disable=unused-argument
  with pytest.raises(Rejected) as raised:
    reading.read_file(f'gs://{BUCKET}/{MISSING}', 10**6, open_image)
  assert raised.value.reason == rejections.UNREADABLE
  assert [e.status for e in _metadata_gets(plan, MISSING)] == [404]
  assert _downloads(plan, MISSING) == []


@pytest.mark.parametrize('fault', ['drop', 'truncate', 'slow'])
def test_read_file_survives_connection_faults(fault, photos, plan):
  """A dropped connection or a body cut short is retried; a partial body is never returned."""
  if fault == 'slow':
    rule = plan.slow(0.3, when=fault_proxy.is_media_download, first=1)
  else:
    rule = getattr(plan, fault)(when=fault_proxy.is_media_download, first=1)
  assert reading.read_file(URI, 10**6, open_image) == photos[URI][1]
  assert rule.fired == 1
  downloads = _downloads(plan, NAME)
  if fault == 'slow':  # delayed, and still answered in full: the client waited for it
    assert [(e.outcome, e.fault) for e in downloads] == [('forwarded', 'delay 0.3s')]
  else:
    assert [e.outcome for e in downloads] == [{'drop': 'dropped', 'truncate': 'truncated'}[fault], 'forwarded']


# --- failures that are the input's own: rejected once, never retried as transient ----------

def _manifest(tmp_path, photos: dict, extra_uri: str):
  rows = [(uri, label) for uri, (label, _) in sorted(photos.items())][:4] + [(extra_uri, 'cat')]
  manifest = tmp_path / 'manifest.csv'
  manifest.write_text('uri,label\n' + ''.join(f'{uri},{label}\n' for uri, label in rows))
  return manifest, {uri: photos[uri] for uri, _ in rows[:-1]}


@pytest.mark.parametrize('bad_uri', [f'gs://{BUCKET}', 'https://example.invalid/cat.jpg'])
def test_unaddressable_manifest_uri_is_rejected_once(bad_uri, photos, plan, monkeypatch, tmp_path, capsys):
  monkeypatch.setattr(reading, 'BACKOFF_SECONDS', 0.01)
  manifest, expected = _manifest(tmp_path, photos, bad_uri)
  out = 'out-bad-uri-' + ''.join(c for c in bad_uri if c.isalnum())
  code = _run([f'--input={manifest}', f'--output=gs://{BUCKET}/{out}', '--max_error_fraction=0.5'])
  assert code == 0, capsys.readouterr().err
  info, records, errors = _read_output(out, tmp_path / 'output')
  _check_written_once(info, records, expected)
  assert [e['uri'] for e in errors] == [bad_uri]
  assert errors[0]['reason'] in (rejections.UNREADABLE, rejections.BAD_MANIFEST_ROW)
  assert plan.faulted == 0


DOUBLY_COMPRESSED = 'elsewhere/backup.tar.gz'


def test_doubly_compressed_object_is_rejected_once(photos, plan, monkeypatch, tmp_path, capsys):
  blob = gcs_emulator.client().bucket(BUCKET).blob(DOUBLY_COMPRESSED)
  blob.content_encoding = 'gzip'
  blob.upload_from_string(gzip.compress(b'not an image' * 100), content_type='application/gzip')
  plan.reset()
  monkeypatch.setattr(reading, 'BACKOFF_SECONDS', 0.01)
  manifest, expected = _manifest(tmp_path, photos, f'gs://{BUCKET}/{DOUBLY_COMPRESSED}')
  code = _run([f'--input={manifest}', f'--output=gs://{BUCKET}/out-doubly-compressed',
               '--max_error_fraction=0.5'])
  assert code == 0, capsys.readouterr().err
  info, records, errors = _read_output('out-doubly-compressed', tmp_path / 'output')
  _check_written_once(info, records, expected)
  assert [(e['uri'], e['reason']) for e in errors] == [(f'gs://{BUCKET}/{DOUBLY_COMPRESSED}', rejections.UNREADABLE)]


def test_read_file_rejects_a_bad_request_once(photos, plan, monkeypatch):  # pylint: disable=unused-argument
  monkeypatch.setattr(reading, 'BACKOFF_SECONDS', 0.01)
  plan.fail_object(NAME, status=400)
  with pytest.raises(Rejected) as raised:
    reading.read_file(URI, 10**6, open_image)
  assert raised.value.reason == rejections.UNREADABLE
  # A 400 is the request's own fault: one request, answered once, never retried by either layer.
  assert [e.status for e in _metadata_gets(plan, NAME)] == [400]
  assert _downloads(plan, NAME) == []
