"""pipeline/incremental.py's comparison of one uri's listing with its catalog line, as a plain
call: what is kept unread, what is hashed, what is converted again."""
import hashlib
import os
from typing import Any, Dict, List

import apache_beam as beam
import pytest

from beam_pipeline.core.inputs import fingerprints
from beam_pipeline.core.messages import InputItem, Rejection
from beam_pipeline.core.output import catalog_entries, catalog_lookup
from beam_pipeline.core.output.catalog_entries import Entry
from beam_pipeline.pipeline import incremental, tags

MAX_FILE_BYTES = 2**20


def outputs(uri: str, listed: List[InputItem], catalogued: List[Entry] = (), rejected: List[Rejection] = ()
            ) -> Dict[Any, List[Any]]:
  """_compare's outputs by tag (None: the items to convert)."""
  found: Dict[Any, List[Any]] = {}
  sides = {'listed': listed, 'catalogued': [(('train-00000.tfrecord', 'shard-id'), entry) for entry in catalogued],
           'rejected': list(rejected)}
  for value in incremental._compare((uri, sides), MAX_FILE_BYTES):
    tag, value = (value.tag, value.value) if isinstance(value, beam.pvalue.TaggedOutput) else (None, value)
    found.setdefault(tag, []).append(value)
  return found


def item(path: str, fingerprint: str, label: str = 'cat') -> InputItem:
  listed = InputItem(path, label, fingerprint=fingerprint)
  return listed._replace(fingerprint=fingerprints.of_record(listed))


def entry_of(listed: InputItem, data: bytes) -> Entry:
  return Entry(listed.uri, listed.fingerprint, hashlib.sha256(data).hexdigest(), 'train', listed.label, (), (), 10,
               len(data), False, False, False, False)


@pytest.fixture
def photo(tmp_path):
  path = tmp_path / 'a.jpg'
  path.write_bytes(b'the bytes of a photo')
  return str(path)


@pytest.fixture
def unread(monkeypatch):
  monkeypatch.setattr(incremental, 'content_hash', lambda uri, _: pytest.fail(f'{uri} was read'))


def test_an_unchanged_file_is_kept_unread(photo, unread):
  listed = item(photo, 'file:1:2:3:4')
  found = outputs(photo, [listed], [entry_of(listed, b'x')])
  assert found[incremental._CHANGES] == [catalog_entries.UNCHANGED]
  assert found[incremental._KEPT] == [entry_of(listed, b'x')] and None not in found and incremental._DIRTY not in found


def test_an_unchanged_file_rejected_before_is_rejected_again_unread(photo, unread):
  listed = item(photo, 'file:1:2:3:4')
  earlier = Rejection(photo, 'not_image', 'not an image', listed.fingerprint)
  found = outputs(photo, [listed], rejected=[earlier])
  assert found[tags.REJECTED] == [earlier] and None not in found


def test_a_touched_file_of_the_same_bytes_is_kept_with_its_new_fingerprint(photo):
  earlier = item(photo, 'file:20:2:3:4')
  today = item(photo, 'file:20:2:9:5')
  found = outputs(photo, [today], [entry_of(earlier, b'the bytes of a photo')])
  assert found[incremental._CHANGES] == [catalog_entries.TOUCHED] and None not in found
  assert found[incremental._EARLIER] == [(entry_of(earlier, b'the bytes of a photo'), True)]
  assert found[incremental._DIRTY] == [('train-00000.tfrecord', ('train', photo, today.fingerprint, 'shard-id'))]


def test_a_touched_file_of_other_bytes_or_that_cannot_be_read_is_converted_again(photo, tmp_path):
  earlier = item(photo, 'file:20:2:3:4')
  today = item(photo, 'file:20:2:9:5')
  found = outputs(photo, [today], [entry_of(earlier, b'other bytes')])
  assert found[incremental._CHANGES] == [catalog_entries.CHANGED] and found[None] == [today]
  assert found[incremental._DIRTY] == [('train-00000.tfrecord', ('train', photo, None, 'shard-id'))]
  gone = str(tmp_path / 'gone.jpg')
  found = outputs(gone, [item(gone, 'file:20:2:9:5')], [entry_of(item(gone, 'file:20:2:3:4'), b'')])
  assert found[incremental._CHANGES] == [catalog_entries.CHANGED]


def test_a_relabelled_file_is_converted_again_unread_here(photo, unread):
  earlier = item(photo, 'file:20:2:3:4')
  today = item(photo, 'file:20:2:9:5', label='dog')
  found = outputs(photo, [today], [entry_of(earlier, b'the bytes of a photo')])
  assert found[incremental._CHANGES] == [catalog_entries.CHANGED] and found[None] == [today]


def test_an_object_uploaded_again_is_told_by_its_crc32c_and_size_unread(unread):
  uri = 'gs://bucket/a.jpg'
  earlier = item(uri, 'gcs:1:mnG7TA==:20')
  again = outputs(uri, [item(uri, 'gcs:2:mnG7TA==:20')], [entry_of(earlier, b'x')])
  assert again[incremental._CHANGES] == [catalog_entries.TOUCHED]
  other = outputs(uri, [item(uri, 'gcs:3:AAAAAA==:20')], [entry_of(earlier, b'x')])
  assert other[incremental._CHANGES] == [catalog_entries.CHANGED] and len(other[None]) == 1


def test_the_content_hash_is_the_sha256_of_the_bytes_as_validation_takes_it(photo, tmp_path):
  assert incremental.content_hash(photo, MAX_FILE_BYTES) == hashlib.sha256(b'the bytes of a photo').hexdigest()
  os.mkfifo(tmp_path / 'pipe.jpg')  # an open would wait for a writer
  assert incremental.content_hash(str(tmp_path / 'pipe.jpg'), MAX_FILE_BYTES) is None
  assert incremental.content_hash(str(tmp_path / 'gone.jpg'), MAX_FILE_BYTES) is None



def test_items_cross_to_their_slot_gathered_a_bounded_number_at_a_time(monkeypatch):
  """_ItemsBySlot sends a bundle's items of a slot on as one element, never holding more than
  _ITEMS_HELD items, and every item exactly once, to the slot its uri names."""
  monkeypatch.setattr(incremental, '_ITEMS_HELD', 100)
  gather = incremental._ItemsBySlot(8)  # pylint: disable=protected-access
  gather.start_bundle()
  batches = [[InputItem(f'imgs/{batch}-{i}.jpg') for i in range(30)] for batch in range(7)]
  sent = [value for batch in batches for value in gather.process(batch)]
  assert len(sent) <= 2 * 8  # two sends of at most one element a slot: after 120 items, after 210
  sent += [windowed.value for windowed in gather.finish_bundle()]
  items = [(slot, item) for slot, gathered in sent for item in gathered.items]
  assert sorted(item.uri for _, item in items) == sorted(item.uri for batch in batches for item in batch)
  assert all(slot == catalog_lookup.BY_URI.slot(item.uri, 8) for slot, item in items)
  assert len(sent) <= 3 * 8
