"""--embedding_model's files, and the steps that run it, without importing TensorFlow.

The launcher of a local run checks the model in a worker process and hands the
write step to its workers by naming functions of this module; like
core/steps.py, they import TensorFlow (and Beam's model handler) where they run.
"""
import contextlib
import hashlib
import os
import shutil
import tempfile
from typing import BinaryIO, Dict, Mapping, Iterator, List, Optional, Tuple

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_pipeline.core import quiet_import, uris
from beam_pipeline.core.usage import ModelError
from beam_pipeline.core.reading import Remote
from beam_pipeline.core.records import ShardPlan, ShardWritten
from beam_pipeline.core.settings import EmbeddingSpec, Settings

_CHUNK_BYTES = 1 << 20


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
  """A local path of the model: its own if it is local, else a copy, removed on exit
  (a loaded model needs its files no more)."""
  if not uris.is_remote(model):
    yield model
    return
  directory = tempfile.mkdtemp(prefix='beam_pipeline-model-')
  try:
    local = os.path.join(directory, uris.split(model.rstrip('/'))[1])
    for path, uri in model_files(model).items():
      target = os.path.join(local, path) if path else local
      os.makedirs(os.path.dirname(target), exist_ok=True)
      with _open(uri) as source, open(target, 'wb') as copy:
        shutil.copyfileobj(source, copy, _CHUNK_BYTES)
    yield local
  finally:
    shutil.rmtree(directory, ignore_errors=True)


def _open(uri: str) -> BinaryIO:
  return FileSystems.open(uri, compression_type=CompressionTypes.UNCOMPRESSED)  # a .gz file is bytes too


def check(spec: EmbeddingSpec) -> Tuple[int, ...]:
  """The shape of one embedding; ModelError unless the model embeds images (model_handler.check)."""
  quiet_import.tensorflow()
  from beam_pipeline.beam import model_handler  # pylint: disable=import-outside-toplevel
  return model_handler.check(spec)


def write_shard(plan: ShardPlan, file_path: str, settings: Settings, class_names: List[str],
                remote: Optional[Remote] = None) -> ShardWritten:
  """core.steps.write_shard, with each record's embedding (model_handler.embedder)."""
  quiet_import.tensorflow()
  from beam_pipeline.beam import model_handler  # pylint: disable=import-outside-toplevel
  from beam_pipeline.core import shard_writer  # pylint: disable=import-outside-toplevel
  return shard_writer.write_shard(plan, file_path, settings, class_names, remote,
                                  embed=model_handler.embedder(settings.embedding))
