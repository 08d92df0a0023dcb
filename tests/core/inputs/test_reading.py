"""Reading input files: order and read-ahead, what a rejection holds, growing files, remote ones."""
import io
from concurrent.futures import ThreadPoolExecutor

import pytest

from beam_pipeline.core import rejections
from beam_pipeline.core.inputs import reading
from beam_pipeline.core.rejections import Rejected, RunFailure

from helpers import cyclic_garbage

MiB = 2**20


def test_reads_run_ahead_only_when_any_file_is_remote():
  """A batch that mixes local and gs:// files reads its objects concurrently; an all-local
  batch reads one file at a time."""
  opened = []

  def read(uri):
    opened.append(uri)
    return uri.encode()

  with ThreadPoolExecutor(4) as pool:
    remote = reading.Remote(io.BytesIO, pool, 4)
    mixed = ['/data/cat/1.jpg', 'gs://b/cat/2.jpg']
    assert [item for item, _ in reading.read_files('read', read, mixed, str, remote)] == mixed
    local = list(reading.read_files('read', read, ['/a.jpg', '/b.jpg'], str, remote))
    assert local == [('/a.jpg', b'/a.jpg'), ('/b.jpg', b'/b.jpg')]
    assert list(reading.read_files('read', read, ['/c.jpg'], str, None)) == [('/c.jpg', b'/c.jpg')]


def test_reads_run_ahead_in_order_and_rejections_hold_no_reads():
  """read_files keeps the input order with reads in flight, returns a Rejected in place of
  its result (an internal_error for an unexpected exception), and that Rejected carries no
  traceback whose frames would keep the reads in flight (image bytes) alive in a
  reference cycle."""

  def read(uri):
    i = int(uri.rsplit('/', 1)[1])
    if i % 3 == 0:
      raise Rejected(rejections.UNREADABLE, f'item {i}')
    if i % 4 == 0:
      raise KeyError(i)
    return bytes(20_000)

  uris = [f'gs://b/{i}' for i in range(12)]
  with ThreadPoolExecutor(4) as pool:
    for remote in (None, reading.Remote(io.BytesIO, pool, 4)):
      with cyclic_garbage.collected() as garbage:
        results = list(reading.read_files('read', read, uris, str, remote))
        assert [uri for uri, _ in results] == uris
        assert [r.detail for _, r in results if isinstance(r, Rejected)] == [
            'item 0', 'item 3', 'read: KeyError: 4', 'item 6', 'read: KeyError: 8', 'item 9']
        del results
      assert not [o for o in garbage if isinstance(o, (bytes, Rejected))]


def test_a_file_larger_than_its_reported_size_is_read_whole_up_to_the_limit():
  """/proc files report 0 bytes and then yield more, like a file that grows after it was
  measured. Expected: read whole under the limit; rejected as file_too_large over it."""
  with open('/proc/self/environ', 'rb') as f:
    expected = f.read()
  assert len(expected) > 10
  assert reading.read_file('/proc/self/environ', 100 * MiB) == expected
  with pytest.raises(Rejected) as rejected:
    reading.read_file('/proc/self/environ', len(expected) - 1)
  assert rejected.value.reason == 'file_too_large'


def test_a_remote_file_is_read_through_the_opener_it_is_given():
  assert reading.read_file('gs://b/x.jpg', MiB, lambda uri: io.BytesIO(uri.encode())) == b'gs://b/x.jpg'
  with pytest.raises(Rejected) as rejected:
    reading.read_file('gs://b/x.jpg', 5, lambda uri: io.BytesIO(bytes(6)))
  assert rejected.value.reason == 'file_too_large'


def test_a_process_without_an_opener_refuses_remote_files_instead_of_rejecting_them():
  """A worker process (no Beam) handed a gs:// file is a bug, not a bad image."""
  with pytest.raises(RunFailure, match='no way to read remote files'):
    reading.read_file('gs://b/x.jpg', MiB)
