"""An output's files for inspect and verify: local ones with plain file calls, remote ones
(gs://) with Beam's FileSystems, which wrote them.

TensorFlow's file layer reaches Cloud Storage by a client of its own, which ignores the
storage emulator's STORAGE_EMULATOR_HOST and takes its own credentials; so a remote shard is
copied to a local file (local_copy) and read there by TensorFlow's TFRecord reader. Beam is
imported only for a remote output: a local ``inspect`` or ``verify`` does not pay for it, and
a local ``inspect`` does not import TensorFlow either.
"""
import contextlib
import glob
import io
import os
import shutil
import tempfile
from typing import IO, Dict, Iterator

from beam_pipeline.core import uris
from beam_pipeline.core.output import output_layout
from beam_pipeline.core.output.run_record import RunRecord

_COPY_CHUNK = 8 * 2**20


def _file_systems():
  """Beam's FileSystems, imported at the first remote path (see the module's docstring)."""
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=import-outside-toplevel
  return FileSystems


def _open_remote(path: str) -> IO[bytes]:
  from apache_beam.io.filesystem import CompressionTypes  # pylint: disable=import-outside-toplevel
  # Uncompressed whatever the name: a .gz shard is read as the bytes TensorFlow's reader inflates.
  return _file_systems().open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def info(output: str) -> RunRecord:
  """beam_pipeline.json; FileNotFoundError for an output that is not complete."""
  if not uris.is_remote(output):
    return RunRecord.read(output)
  return RunRecord.read(output, _file_systems().exists, _open_remote)


def open_text(path: str) -> IO[str]:
  if not uris.is_remote(path):
    return open(path, encoding='utf-8')
  return io.TextIOWrapper(_open_remote(path), encoding='utf-8')


def open_binary(path: str) -> IO[bytes]:
  if not uris.is_remote(path):
    return open(path, 'rb')
  return _open_remote(path)


@contextlib.contextmanager
def local_copy(path: str) -> Iterator[str]:
  """A local path holding the file at ``path``: itself, or for a remote file a temporary copy,
  removed when the block ends (one shard at a time: at most --target_shard_mb on disk each)."""
  if not uris.is_remote(path):
    yield path
    return
  with tempfile.TemporaryDirectory(prefix='beam-pipeline-inspect-') as scratch:
    local = os.path.join(scratch, os.path.basename(path))
    with _open_remote(path) as source, open(local, 'wb') as target:
      shutil.copyfileobj(source, target, _COPY_CHUNK)
    yield local


def shard_sizes(output: str) -> Dict[str, int]:
  """{name: bytes} of every file in ``output`` named like a shard, from one listing: a remote
  output's gives the sizes with the names, so no shard is asked for its own."""
  if uris.is_remote(output):
    matched = _file_systems().match([uris.join(output, output_layout.SHARD_GLOB)])[0]
    sizes = {metadata.path: metadata.size_in_bytes for metadata in matched.metadata_list}
  else:
    sizes = {path: os.path.getsize(path)
             for path in glob.glob(glob.escape(output.rstrip('/') + '/') + output_layout.SHARD_GLOB)}
  return {os.path.basename(path): size for path, size in sorted(sizes.items())
          if path.endswith(output_layout.SHARD_SUFFIXES)}
