"""The catalog's lookup by uri: which file a uri's entry is in, how many files a dataset gets,
its lines, and a file written again and checked."""
import dataclasses
import zlib

import pytest

from beam_pipeline.core.output import catalog_lookup, incremental_catalog
from beam_pipeline.core.output.run_record import LookupFile
from beam_pipeline.core.rejections import DamagedOutput

# Uris as listings give them: quotes, backslashes, tabs, non-ASCII, and a name that is not UTF-8
# (a lone surrogate, as os.fsdecode gives it).
ODD_URIS = ['imgs/cat/a.jpg', 'imgs/"quoted", \\back\\.jpg', 'imgs/tab\there.jpg', 'imgs/Çà/日本.jpg',
            'imgs/latin1-\udce9.jpg', 'gs://bucket/x/y.png']


def entry(uri: str, fingerprint: str = 'file:1:2:3:4') -> incremental_catalog.Entry:
  return incremental_catalog.Entry(uri, fingerprint, 'ab' * 32, 'train', 'cat', (), (), 48, 1500, False, False, False,
                                   False, ('dark',), 'f' * 16)


def test_a_uri_goes_to_the_file_its_crc32_names_the_same_in_every_process():
  assert catalog_lookup.slot('imgs/cat/a.jpg', 1) == 0
  assert catalog_lookup.slot('imgs/cat/a.jpg', 16) == zlib.crc32(b'imgs/cat/a.jpg') % 16
  slots = [catalog_lookup.slot(f'imgs/{i}.jpg', 64) for i in range(6400)]
  assert set(slots) == set(range(64))
  assert max(slots.count(s) for s in range(64)) < 150  # about 100 each


@pytest.mark.parametrize('records, count', [(0, 1), (1, 1), (20_000, 1), (20_001, 2), (1_000_000, 64),
                                            (100_000_000, 8192)])
def test_a_dataset_gets_a_power_of_two_of_files_of_at_most_about_twenty_thousand_entries(records, count):
  assert catalog_lookup.count_for(records) == count
  assert catalog_lookup.fits(count, records)


def test_a_lookup_fits_until_the_dataset_is_four_times_larger_or_smaller_than_its_count_suits():
  assert catalog_lookup.fits(16, 16 * 20_000 * 4)
  assert not catalog_lookup.fits(16, 16 * 20_000 * 4 + 1)
  assert catalog_lookup.fits(16, 16 * 20_000 // 4)
  assert not catalog_lookup.fits(16, 16 * 20_000 // 8)
  assert catalog_lookup.fits(1, 0)


@pytest.mark.parametrize('uri', ODD_URIS)
def test_a_line_gives_back_its_shard_and_entry_and_its_uri_unparsed(uri):
  for shard in ('0123456789abcdef', 'train-00003.tfrecord'):  # an id, and a shard of a record from before ids
    line = catalog_lookup.line(shard, entry(uri))
    assert line.endswith('\n') and line.count('\n') == 1
    assert catalog_lookup.parse(line) == (shard, entry(uri))
    assert catalog_lookup.uri_of(line) == uri


def test_a_file_written_again_loses_the_dropped_takes_the_added_and_copies_the_rest_sorted():
  lines = [catalog_lookup.line('s1', entry(uri)) for uri in ODD_URIS]
  text = ''.join(reversed(lines))
  replaced = catalog_lookup.line('s2', entry('imgs/cat/a.jpg', 'file:9:9:9:9'))
  added = catalog_lookup.line('s2', entry('imgs/new.jpg'))
  updated = catalog_lookup.updated(text, {'imgs/tab\there.jpg', 'imgs/never-there.jpg'}, [replaced, added])
  expected = {uri: line for uri, line in zip(ODD_URIS, lines) if uri != 'imgs/tab\there.jpg'}
  expected.update({'imgs/cat/a.jpg': replaced, 'imgs/new.jpg': added})
  assert updated == ''.join(expected[uri] for uri in sorted(expected))
  assert catalog_lookup.updated('', set(), []) == ''
  assert catalog_lookup.updated(updated, set(expected), []) == ''


def _written(text: str) -> LookupFile:
  data = text.encode('utf-8', 'backslashreplace')  # as output_dir.stage_text writes it
  return LookupFile(slot=3, file=catalog_lookup.file_name(3, 16), num_entries=text.count('\n'),
                    sha256=catalog_lookup.checksum(data))


def test_a_lookup_file_is_read_back_as_written_even_with_names_that_are_not_utf8():
  text = catalog_lookup.updated('', set(), [catalog_lookup.line('s1', entry(uri)) for uri in ODD_URIS])
  found = _written(text)
  assert found.file == 'catalog/by_uri/00003-of-00016.jsonl'
  data = text.encode('utf-8', 'backslashreplace')
  assert sorted(catalog_lookup.checked(found, data)) == sorted(('s1', entry(uri)) for uri in ODD_URIS)
  again = catalog_lookup.updated(data.decode('utf-8', 'surrogateescape'), {'imgs/cat/a.jpg'}, [])
  assert [value.uri for _, value in catalog_lookup.checked(_written(again), again.encode('utf-8', 'backslashreplace'))
          ] == sorted(set(ODD_URIS) - {'imgs/cat/a.jpg'})


def test_a_lookup_file_that_is_not_what_the_record_says_is_named():
  text = ''.join(catalog_lookup.line('s1', entry(uri)) for uri in sorted(ODD_URIS))
  found = _written(text)
  data = text.encode('utf-8', 'backslashreplace')
  with pytest.raises(DamagedOutput, match='^catalog/by_uri/00003-of-00016.jsonl is not the lookup file the run '
                                          'wrote: its checksum differs$'):
    catalog_lookup.checked(found, data[:-10])
  short = dataclasses.replace(found, num_entries=found.num_entries + 1)
  with pytest.raises(DamagedOutput, match='lists 6 entries where the run record says 7$'):
    catalog_lookup.check(short, data)
  broken = b'["s1",\n'
  with pytest.raises(DamagedOutput, match='^catalog/by_uri/00003-of-00016.jsonl: '):
    catalog_lookup.checked(LookupFile(slot=3, file=found.file, num_entries=1, sha256=catalog_lookup.checksum(broken)),
                           broken)
