"""--embedding_model's files, read with Beam's FileSystems (local or gs://): their
fingerprint, and a local copy for the core to load (core/writing/embedding_model.py).

The copy is held once per process, however many DoFns use it: the launcher of a
local run holds it for the whole run, its worker processes load it from there.
"""
import contextlib
import hashlib
import os
import shutil
import tempfile
import threading
from typing import BinaryIO, Dict, Iterator, List, Mapping

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_pipeline.core import uris
from beam_pipeline.core.user_errors import ModelError

_CHUNK_BYTES = 1 << 20
# This process's local copies of remote models: [path, how many hold it], by model.
_copies: Dict[str, List] = {}
_copying = threading.Lock()


def model_files(model: str) -> Dict[str, str]:
  """The model's files by path relative to it ('' for a model that is one file); ModelError if
  there are none. A SavedModel directory is every file under it, on Cloud Storage too."""
  model = model.rstrip('/') or '/'
  under = FileSystems.match([FileSystems.join(model, '**')])[0].metadata_list
  if under:
    start = len(model) + 1
    return {metadata.path[start:]: metadata.path for metadata in under}
  if FileSystems.exists(model):
    return {'': model}
  raise ModelError('does not exist; give a .keras file or a SavedModel directory, local or gs://')


def fingerprint(model: str) -> str:
  """The sha256 that beam_pipeline.json records for the model (files_sha256)."""
  digests = {}
  for path, uri in model_files(model).items():
    digest = hashlib.sha256()
    with _open(uri) as f:
      for chunk in iter(lambda: f.read(_CHUNK_BYTES), b''):
        digest.update(chunk)
    digests[path] = digest.hexdigest()
  return files_sha256(digests)


def files_sha256(digests: Mapping[str, str]) -> str:
  """The sha256 of a model from its files' hex digests by relative path: a single file's own
  digest, or for a directory the digest of what ``sha256sum`` prints for its files in
  path order, so a user can check it: ``find . -type f -printf '%P\\n' | LC_ALL=C sort |
  xargs sha256sum | sha256sum``."""
  if list(digests) == ['']:
    return digests['']
  listing = ''.join(f'{digests[path]}  {path}\n' for path in sorted(digests, key=lambda p: p.encode('utf-8')))
  return hashlib.sha256(listing.encode('utf-8')).hexdigest()


@contextlib.contextmanager
def local_copy(model: str) -> Iterator[str]:
  """A local path of the model: its own if it is local, else a copy, made by the first
  holder in this process and removed when the last lets go."""
  if not uris.is_remote(model):
    yield model
    return
  with _copying:
    if model not in _copies:
      _copies[model] = [_copy(model), 0]
    held = _copies[model]
    held[1] += 1
  try:
    yield held[0]
  finally:
    with _copying:
      held[1] -= 1
      if not held[1]:
        del _copies[model]
        shutil.rmtree(os.path.dirname(held[0]), ignore_errors=True)


def _copy(model: str) -> str:
  directory = tempfile.mkdtemp(prefix='beam_pipeline-model-')
  local = os.path.join(directory, uris.split(model.rstrip('/'))[1])
  try:
    for path, uri in model_files(model).items():
      target = os.path.join(local, path) if path else local
      os.makedirs(os.path.dirname(target), exist_ok=True)
      with _open(uri) as source, open(target, 'wb') as copy:
        shutil.copyfileobj(source, copy, _CHUNK_BYTES)
  except BaseException:
    shutil.rmtree(directory, ignore_errors=True)
    raise
  return local


def _open(uri: str) -> BinaryIO:
  return FileSystems.open(uri, compression_type=CompressionTypes.UNCOMPRESSED)  # a .gz file is bytes too

