"""The local Cloud Storage emulator (gcp-storage-emulator) for tests: real HTTP, no mocks, offline.

``running_emulator()`` starts it as a subprocess on a port it binds itself and yields its URL;
``emulator_environment()`` gives the environment the code under test needs to talk to it,
``pointed_at()`` sets it for a block, and ``serving()`` does all three with buckets made;
the rest create buckets and move bytes with the real google-cloud-storage client.

Why a credentials file: Beam's GCS filesystem (apache_beam.io.gcp.gcsio.GcsIO) always
asks ``google.auth.default()`` for credentials, and apache_beam.internal.gcp.auth retries
a failed lookup 4 times with exponential backoff (initial 2 s) before it connects
anonymously: about 25 s in every process. No Beam option changes that (``--no_auth``
only reaches the Dataflow API client). A static-token "authorized_user" file named by
GOOGLE_APPLICATION_CREDENTIALS, the standard ADC variable, makes the lookup succeed at
once and offline: the token is valid until 2999, so it is never refreshed, and the
emulator ignores the Authorization header it travels in. It also keeps a developer's real
credentials away from the tests, and reaches any worker process through the environment.
"""
import contextlib
import json
import os
import random
import selectors
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Dict, Iterable, Iterator, List, Mapping

from google.auth.credentials import AnonymousCredentials
from google.cloud import storage

from helpers import photos

_HOST = '127.0.0.1'
# Loaded by google.auth.default() as google.oauth2.credentials.Credentials (the format
# Credentials.to_json() writes); with a future expiry it never contacts oauth2.googleapis.com.
_STATIC_TOKEN_CREDENTIALS = {
    'type': 'authorized_user',
    'token': 'gcs-emulator',
    'expiry': '2999-01-01T00:00:00Z',
    'refresh_token': 'unused',
    'client_id': 'unused',
    'client_secret': 'unused',
}


# The emulator, serving on a port the kernel picks (port 0) and printing it once it listens:
# a port found free here and handed over could be taken in between (another engineer's
# emulator on a shared machine would then answer for ours).
_SERVE = '''
import logging, signal, sys
from gcp_storage_emulator.server import create_server
logging.getLogger().setLevel(logging.CRITICAL)
server = create_server(sys.argv[1], 0, in_memory=True)
server.start()
print(server._api._httpd.server_address[1], flush=True)
signal.pause()
'''


def answers(url: str, timeout: float = 10) -> bool:
  """Whether a storage emulator at ``url`` answers a bucket listing."""
  try:
    with urllib.request.urlopen(f'{url}/storage/v1/b', timeout=timeout) as response:
      return response.status == 200
  except OSError:
    return False


def _port_line(process: subprocess.Popen, deadline: float) -> str:
  """The first line the emulator prints, or '' if it ends or the deadline passes first."""
  with selectors.DefaultSelector() as selector:
    selector.register(process.stdout, selectors.EVENT_READ)
    while time.monotonic() < deadline:
      if selector.select(timeout=max(0.0, deadline - time.monotonic())):
        return process.stdout.readline().decode().strip()
  return ''


@contextlib.contextmanager
def running_emulator(timeout_secs: float = 60.0) -> Iterator[str]:
  """Starts an in-memory emulator and yields its URL (http://127.0.0.1:<port>)."""
  with tempfile.TemporaryDirectory(prefix='gcs-emulator-') as workdir, \
      open(os.path.join(workdir, 'emulator.log'), 'w+b') as log:
    process = subprocess.Popen([sys.executable, '-c', _SERVE, _HOST], cwd=workdir, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=log)
    try:
      port = _port_line(process, time.monotonic() + timeout_secs)
      url = f'http://{_HOST}:{port}'
      if not port.isdigit() or not answers(url):
        log.seek(0)
        raise RuntimeError(f'the storage emulator did not start (exit code {process.poll()}, said {port!r}): '
                           f'{log.read().decode(errors="replace")[-2000:]}')
      yield url
    finally:
      process.terminate()
      try:
        process.wait(timeout=10)
      except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
      process.stdout.close()


def credentials_environment(directory: str) -> Dict[str, str]:
  """Variables that make google.auth.default() find the static-token credentials, which it
  writes into ``directory``: found at once, offline, and never sent beyond this machine."""
  credentials_file = os.path.join(directory, 'emulator-credentials.json')
  with open(credentials_file, 'w', encoding='utf-8') as f:
    json.dump(_STATIC_TOKEN_CREDENTIALS, f)
  return {
      'GOOGLE_APPLICATION_CREDENTIALS': credentials_file,
      'GOOGLE_CLOUD_PROJECT': 'test',  # spares google.auth a "no project ID" warning
  }


def emulator_environment(url: str, directory: str) -> Dict[str, str]:
  """Variables that point google-cloud-storage, and so Beam's FileSystems, at the emulator."""
  return {'STORAGE_EMULATOR_HOST': url, **credentials_environment(directory)}


@contextlib.contextmanager
def pointed_at(url: str, directory: str) -> Iterator[None]:
  """This process's environment, and so its children's, pointed at the emulator (or a proxy
  in front of it) at ``url`` while the block runs."""
  with environment_set(emulator_environment(url, directory)):
    yield


@contextlib.contextmanager
def environment_set(environment: Mapping[str, str]) -> Iterator[None]:
  """This process's environment, and so its children's, with ``environment`` while the block runs."""
  saved = {name: os.environ.get(name) for name in environment}
  os.environ.update(environment)
  try:
    yield
  finally:
    for name, value in saved.items():
      if value is None:
        os.environ.pop(name, None)
      else:
        os.environ[name] = value


@contextlib.contextmanager
def serving(directory: str, buckets: Iterable[str] = ()) -> Iterator[str]:
  """A running emulator, the environment pointed at it, and ``buckets`` made; yields its URL."""
  with running_emulator() as url, pointed_at(url, directory):
    for bucket in buckets:
      create_bucket(bucket)
    yield url


def client() -> storage.Client:
  """A real client for the emulator (STORAGE_EMULATOR_HOST must be set)."""
  if not os.environ.get('STORAGE_EMULATOR_HOST'):
    raise RuntimeError('STORAGE_EMULATOR_HOST is not set: refusing to talk to real Cloud Storage')
  return storage.Client(project='test', credentials=AnonymousCredentials())


def create_bucket(name: str) -> storage.Bucket:
  return client().create_bucket(name)


def upload(bucket_name: str, files: Mapping[str, bytes]) -> None:
  """Uploads {object name: bytes}."""
  bucket = client().bucket(bucket_name)
  for name, data in files.items():
    bucket.blob(name).upload_from_string(data)


def upload_photo_set(bucket_name: str, prefix: str, labels, per_class: int,
                     extra: Mapping[str, bytes] = None) -> Dict[str, tuple]:
  """Creates the bucket with per_class small JPEGs per label under <prefix><label>/ (plus extra
  objects); returns {uri: (label, bytes)} for the photos."""
  rng = random.Random(bucket_name)
  files, expected = {}, {}
  for label in labels:
    for i in range(per_class):
      name = f'{prefix}{label}/{label}.{i}.jpg'
      files[name] = photos.jpeg(rng.randrange(2**32), rng.randrange(48, 96), rng.randrange(48, 96))
      expected[f'gs://{bucket_name}/{name}'] = (label, files[name])
  create_bucket(bucket_name)
  upload(bucket_name, {**files, **(extra or {})})
  return expected


def list_bucket_names() -> List[str]:
  return sorted(bucket.name for bucket in client().list_buckets())


def list_names(bucket_name: str, prefix: str = '') -> List[str]:
  return sorted(blob.name for blob in client().list_blobs(bucket_name, prefix=prefix))


def download(bucket_name: str, name: str) -> bytes:
  return client().bucket(bucket_name).blob(name).download_as_bytes()
