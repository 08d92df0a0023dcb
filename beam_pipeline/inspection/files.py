"""An output's files for inspect and verify: local ones with plain file calls, remote ones
(gs://) with TensorFlow's file systems, which the records are read with anyway.

Neither command imports Beam, and a local ``inspect`` does not import TensorFlow.
"""
import glob
import os
from typing import IO, List

from beam_pipeline.core import uris
from beam_pipeline.core.console import quiet_import
from beam_pipeline.core.output import output_layout
from beam_pipeline.core.output.run_record import RunRecord


def info(output: str) -> RunRecord:
  """beam_pipeline.json; FileNotFoundError for an output that is not complete."""
  if not uris.is_remote(output):
    return RunRecord.read(output)
  tf = quiet_import.tensorflow()
  return RunRecord.read(output, tf.io.gfile.exists, tf.io.gfile.GFile)


def open_text(path: str) -> IO[str]:
  if not uris.is_remote(path):
    return open(path, encoding='utf-8')
  tf = quiet_import.tensorflow()
  return tf.io.gfile.GFile(path)


def open_binary(path: str) -> IO[bytes]:
  if not uris.is_remote(path):
    return open(path, 'rb')
  tf = quiet_import.tensorflow()
  return tf.io.gfile.GFile(path, 'rb')


def shard_names(output: str) -> List[str]:
  """The names of every file in ``output`` named like a shard."""
  pattern = uris.join(output, output_layout.SHARD_GLOB)
  if uris.is_remote(output):
    tf = quiet_import.tensorflow()
    paths = tf.io.gfile.glob(pattern)
  else:
    paths = glob.glob(glob.escape(output.rstrip('/') + '/') + output_layout.SHARD_GLOB)
  return sorted(os.path.basename(path) for path in paths if path.endswith(output_layout.SHARD_SUFFIXES))


def size(path: str) -> int:
  if not uris.is_remote(path):
    return os.path.getsize(path)
  tf = quiet_import.tensorflow()
  return tf.io.gfile.stat(path).length
