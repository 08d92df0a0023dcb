"""The CLI end to end against the local Cloud Storage emulator: gs:// in, gs:// out, no mocks."""
import hashlib
import json
import os
import subprocess

import google.auth
import pytest
import tensorflow as tf
from apache_beam.internal.gcp import auth as gcp_auth
from apache_beam.io.filesystems import FileSystems
from tensorflow.core.example import example_pb2

from beam_pipeline import cli
from beam_pipeline.pipeline.listing import parts as listing_parts
from beam_pipeline.core import settings
from beam_pipeline.core.output import output_layout

from helpers import gcs_emulator, photos
from helpers.commands import TIMEOUT, command, user_environment

LABELS = ('cat', 'dog')
PER_CLASS = 6
GARBAGE = 'imgs/dog/broken.jpg'
OUTPUT_FILES = {output_layout.RUN_RECORD, output_layout.LABELS_TXT, output_layout.errors_file(0, 1),
                output_layout.TFDS_DATASET_INFO,
                'features.json', 'image.class.label.labels.txt'}


@pytest.fixture(scope='module', autouse=True)
def emulator(proxy):  # pylint: disable=redefined-outer-name
  """One emulator for the module, behind the fault proxy (conftest.py), which counts the requests
  and faults none unless a test's plan says so; its environment is set only while the module runs."""
  return proxy.url


def _photo_set(bucket: str) -> dict:
  """Uploads PER_CLASS small JPEGs per label and one garbage .jpg; returns {uri: (label, bytes)}."""
  return gcs_emulator.upload_photo_set(
      bucket, 'imgs/', LABELS, PER_CLASS,
      extra={GARBAGE: b'<!DOCTYPE html><html><body>404 Not Found</body></html>'})


def _run(argv):
  # tf.Transform publishes through tf.io.gfile, which cannot reach the emulator (it
  # always calls the real endpoint); everything else goes through Beam's FileSystems.
  return cli.main(argv + ['--skip_transform', '--max_error_fraction=0.5'])


def _read_records(data: bytes, directory) -> list:
  """Parses TFRecord bytes with TensorFlow's own reader (checks the CRCs), from a local copy."""
  path = os.path.join(directory, 'shard.tfrecord')
  with open(path, 'wb') as f:
    f.write(data)
  return [example_pb2.Example.FromString(record.numpy()) for record in tf.data.TFRecordDataset(path)]


def _check_output(bucket: str, out: str, expected: dict, tmp_path) -> dict:
  """Every good image written exactly once with its label, the garbage file rejected, no leftovers."""
  names = gcs_emulator.list_names(bucket, out + '/')
  assert not [n for n in names if n.startswith(f'{out}/{output_layout.TEMP_DIR}/')], names
  info = json.loads(gcs_emulator.download(bucket, f'{out}/{output_layout.RUN_RECORD}'))
  shards = [shard['file'] for shard in info['splits']['train']['shards']]
  assert sorted(names) == sorted(f'{out}/{name}' for name in OUTPUT_FILES | set(shards))
  assert info['labels'] == list(LABELS)
  assert gcs_emulator.download(bucket, f'{out}/{output_layout.LABELS_TXT}') == b'cat\ndog\n'

  written = []
  for shard in shards:
    examples = _read_records(gcs_emulator.download(bucket, f'{out}/{shard}'), tmp_path)
    assert len(examples) == next(s['num_examples'] for s in info['splits']['train']['shards']
                                 if s['file'] == shard)
    written += examples
  seen = {}
  for example in written:
    feature = example.features.feature
    uri = feature['image/filename'].bytes_list.value[0].decode()
    assert uri not in seen, f'{uri} written twice'
    seen[uri] = example
    label, data = expected[uri]
    assert feature['image/class/text'].bytes_list.value == [label.encode()]
    assert feature['image/class/label'].int64_list.value == [LABELS.index(label)]
    assert feature['image/encoded'].bytes_list.value == [data]
    assert feature['image/key/sha256'].bytes_list.value == [hashlib.sha256(data).hexdigest().encode()]
  assert sorted(seen) == sorted(expected)
  assert info['num_examples'] == len(expected)

  errors = [json.loads(line) for line in
            gcs_emulator.download(bucket, f'{out}/{output_layout.errors_file(0, 1)}').decode().splitlines()]
  assert [(e['uri'], e['reason']) for e in errors] == [(f'gs://{bucket}/{GARBAGE}', 'not_image')]
  assert info['num_errors'] == 1
  return info


def test_directory_input_to_gcs_output(tmp_path, capsys):
  expected = _photo_set('photos-dir')
  code = _run(['--input=gs://photos-dir/imgs', '--output=gs://photos-dir/out',
                  '--runner=DirectRunner'])
  assert code == 0, capsys.readouterr().err
  info = _check_output('photos-dir', 'out', expected, tmp_path)
  assert info['options']['input_kind'] == 'directory'
  assert f'Wrote {len(expected)} examples' in capsys.readouterr().out


def test_verify_and_inspect_read_a_gs_output_through_beams_file_systems(tmp_path, capsys):
  """TensorFlow's file layer would call the real Cloud Storage, not the emulator: both commands
  read the run record, errors file and shards as the conversion wrote them, and verify still
  finds a shard cut short."""
  expected = _photo_set('photos-verify')
  out = 'gs://photos-verify/out'
  assert _run(['--input=gs://photos-verify/imgs', f'--output={out}', '--runner=DirectRunner', '--index_files']) == 0
  capsys.readouterr()
  assert cli.main(['verify', out]) == 0, capsys.readouterr().err
  said = capsys.readouterr().out
  assert f'{len(expected)} records' in said, said
  sheet = tmp_path / 'sheet.png'
  assert cli.main(['inspect', out, '--errors', f'--contact_sheet={sheet}']) == 0, capsys.readouterr().err
  assert f'gs://photos-verify/{GARBAGE}' in capsys.readouterr().out
  assert sheet.stat().st_size > 1000

  info = json.loads(gcs_emulator.download('photos-verify', f'out/{output_layout.RUN_RECORD}'))
  shard = info['splits']['train']['shards'][0]['file']
  data = gcs_emulator.download('photos-verify', f'out/{shard}')
  gcs_emulator.upload('photos-verify', {f'out/{shard}': data[:len(data) // 2]})
  assert cli.main(['verify', out]) == 1
  said = capsys.readouterr()
  assert shard in said.out + said.err and 'beam_pipeline.json says' in said.out + said.err


def test_glob_input(tmp_path, capsys):
  expected = _photo_set('photos-glob')
  gcs_emulator.upload('photos-glob', {'imgs/cat/notes.txt': b'not matched by *.jpg'})
  code = _run(['--input=gs://photos-glob/imgs/**/*.jpg', '--output=gs://photos-glob/out',
                  '--runner=DirectRunner'])
  assert code == 0, capsys.readouterr().err
  info = _check_output('photos-glob', 'out', expected, tmp_path)  # notes.txt neither written nor rejected
  assert info['options']['input_kind'] == 'glob'


@pytest.mark.parametrize('source', ['gs://no-such-bucket/imgs', 'gs://{bucket}/no-such-prefix',
                                    'gs://no-such-bucket/imgs/**/*.jpg', 'gs://{bucket}/imgs/*.png'])
def test_missing_input_fails_fast(source, plan, monkeypatch, capsys):
  bucket = 'exists-but-empty'
  if bucket not in gcs_emulator.list_bucket_names():
    gcs_emulator.create_bucket(bucket)
    gcs_emulator.upload(bucket, {'imgs/cat/a.jpg': b'x'})
  lookups = []
  default = google.auth.default

  def counted(*args, **kwargs):  # Beam retries a failed lookup 4 times, 2 s apart and more
    try:
      lookups.append(default(*args, **kwargs))
      return lookups[-1]
    except Exception as e:
      lookups.append(e)
      raise

  monkeypatch.setattr(google.auth, 'default', counted)
  monkeypatch.setattr(gcp_auth._Credentials, '_credentials_init', False)  # pylint: disable=protected-access  # looked up anew
  plan.reset()
  code = _run([f'--input={source.format(bucket=bucket)}', f'--output=gs://{bucket}/out', '--runner=DirectRunner'])
  err = capsys.readouterr().err.strip()
  assert code == 2
  assert err.startswith('error: --input=') and '\n' not in err, err
  assert err.endswith(('does not exist; give a glob, a directory of images or a manifest',
                       'the pattern matches no files')), err  # missing, not unlistable
  # Checked at launch, by looking: a few reads of the bucket, nothing written, no pipeline
  # (which would read the input's objects), and no credential lookup that failed (and so waited).
  seen = plan.requests()
  assert 1 <= len(seen) <= 8 and {e.method for e in seen} == {'GET'}, seen
  assert not [e for e in seen if e.media], seen
  assert lookups and not [e for e in lookups if isinstance(e, Exception)], lookups
  assert gcs_emulator.list_names(bucket, 'out/') == []


@pytest.mark.parametrize('pattern', ['gs://parts/lib/**', 'gs://parts/lib/**/*.jpg', 'gs://parts/lib/*.jpg',
                                     'gs://parts/lib/c*', 'gs://parts/lib/cat/1.jpg', 'gs://parts/li*/**'])
def test_a_gcs_pattern_is_listed_one_subfolder_per_part_and_lists_what_beam_matches(pattern):
  """The folder a pattern starts in is listed with a delimiter; each subfolder is one part
  that a worker lists: together they list exactly what Beam's FileSystems.match does."""
  if 'parts' not in gcs_emulator.list_bucket_names():
    gcs_emulator.create_bucket('parts')
    gcs_emulator.upload('parts', {name: b'x' for name in [
        'lib/a.jpg', 'lib/b.png', 'lib/cat/1.jpg', 'lib/cat/deep/2.jpg', 'lib/cats/3.jpg', 'lib/dog/4.jpg',
        'lib/dog/notes.txt', 'libx/5.jpg', 'other/6.jpg']})
  kind = settings.DIRECTORY if pattern.endswith('/**') else settings.GLOB
  spec = settings.InputSpec(kind, pattern)
  parts = list(listing_parts.input_parts(spec))
  listed = [item.uri for part in parts for item in listing_parts.list_part(part)]
  assert sorted(listed) == sorted(m.path for m in FileSystems.match([pattern])[0].metadata_list)
  assert len(listed) == len(set(listed))
  expected_parts = {'gs://parts/lib/**': 4, 'gs://parts/lib/**/*.jpg': 4, 'gs://parts/lib/*.jpg': 1,
                    'gs://parts/lib/c*': 1, 'gs://parts/lib/cat/1.jpg': 1, 'gs://parts/li*/**': 3}
  assert len(parts) == expected_parts[pattern]


@pytest.mark.parametrize('flag', ['--input', '--output', '--temp_location'])
def test_a_gs_path_without_credentials_fails_at_once_naming_the_cause_and_the_fix(flag, proxy, tmp_path):
  """The emulator is there, the credentials are not: Beam's client would retry its credential
  lookup for minutes and then call the input missing. The command says why, in one line,
  before any request (the metadata server, which google.auth asks last, is a closed port)."""
  photos.write_files(tmp_path / 'in', {'cat/1.jpg': photos.jpeg()})
  paths = {'--input': str(tmp_path / 'in'), '--output': str(tmp_path / 'out')}
  paths[flag] = 'gs://some-bucket/path'
  environment = {name: value for name, value in user_environment().items()
                 if name not in ('GOOGLE_APPLICATION_CREDENTIALS', 'CLOUDSDK_CONFIG')}
  environment.update(HOME=str(tmp_path), GCE_METADATA_HOST='127.0.0.1:9', GCE_METADATA_IP='127.0.0.1:9')
  done = subprocess.run(command(*[f'{name}={value}' for name, value in paths.items()]), cwd=tmp_path,
                        env=environment, capture_output=True, text=True, timeout=TIMEOUT, check=False)
  assert (done.returncode, done.stderr.splitlines()) == (2, [
      f'error: {flag}=gs://some-bucket/path is on Cloud Storage, and no Google credentials were found: run '
      '`gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS to a service account key '
      'file'])
  # Of its bucket: a request of an earlier test in this file may still finish meanwhile.
  assert proxy.plan.requests(lambda entry: 'some-bucket' in entry.path) == []
