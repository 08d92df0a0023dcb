"""The catalog's lookups by uri and by content: which file an entry is in, how many files a
dataset gets, their lines, and a file written again and checked."""
import dataclasses
import random
import zlib

import pytest

from beam_pipeline.core.output import catalog_lookup, catalog_entries, output_layout
from beam_pipeline.core.output.run_record import LookupFile
from beam_pipeline.core.rejections import DamagedOutput

# Uris as listings give them: quotes, backslashes, tabs, non-ASCII, and a name that is not UTF-8
# (a lone surrogate, as os.fsdecode gives it).
ODD_URIS = ['imgs/cat/a.jpg', 'imgs/"quoted", \\back\\.jpg', 'imgs/tab\there.jpg', 'imgs/Çà/日本.jpg',
            'imgs/latin1-\udce9.jpg', 'gs://bucket/x/y.png']


BY_URI, BY_CONTENT = catalog_lookup.BY_URI, catalog_lookup.BY_CONTENT


def entry(uri: str, fingerprint: str = 'file:1:2:3:4', sha: str = 'ab' * 32) -> catalog_entries.Entry:
  return catalog_entries.Entry(uri, fingerprint, sha, 'train', 'cat', (), ('box',), 48, 1500, False, False, False,
                                   False, ('dark',), 'f' * 16)


def test_a_uri_goes_to_the_file_its_crc32_names_the_same_in_every_process():
  assert BY_URI.slot('imgs/cat/a.jpg', 1) == 0
  assert BY_URI.slot('imgs/cat/a.jpg', 16) == zlib.crc32(b'imgs/cat/a.jpg') % 16
  slots = [BY_URI.slot(f'imgs/{i}.jpg', 64) for i in range(6400)]
  assert set(slots) == set(range(64))
  assert max(slots.count(s) for s in range(64)) < 150  # about 100 each


def test_a_content_hash_goes_to_the_file_of_its_range():
  assert [BY_CONTENT.slot(prefix + '0' * 56, 16) for prefix in ('00000000', '0fffffff', '10000000', 'ffffffff')
          ] == [0, 0, 1, 15]
  assert BY_CONTENT.slot_of(entry('a.jpg', sha='8' + '0' * 63), 4) == 2
  assert BY_URI.slot_of(entry('a.jpg', sha='8' + '0' * 63), 4) == BY_URI.slot('a.jpg', 4)
  assert BY_CONTENT.file_name(3, 16) == 'catalog/by_content/00003-of-00016.jsonl'


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
def test_a_line_gives_back_its_shard_and_entry_and_its_identity_unparsed(uri):
  for shard in ('0123456789abcdef', 'train-00003.tfrecord'):  # an id, and a shard of a record from before ids
    for by, identity in ((BY_URI, uri), (BY_CONTENT, ('ab' * 32, uri))):
      line = by.line(shard, entry(uri))
      assert line.endswith('\n') and line.count('\n') == 1
      assert by.parse(line) == (shard, entry(uri))
      assert by.identity(line) == by.identity_of(entry(uri)) == identity


def test_a_file_written_again_loses_the_dropped_takes_the_added_and_copies_the_rest_sorted():
  lines = [BY_URI.line('s1', entry(uri)) for uri in ODD_URIS]
  text = ''.join(reversed(lines))
  replaced = BY_URI.line('s2', entry('imgs/cat/a.jpg', 'file:9:9:9:9'))
  added = BY_URI.line('s2', entry('imgs/new.jpg'))
  updated = BY_URI.updated(text, {'imgs/tab\there.jpg', 'imgs/never-there.jpg'}, [replaced, added])
  expected = {uri: line for uri, line in zip(ODD_URIS, lines) if uri != 'imgs/tab\there.jpg'}
  expected.update({'imgs/cat/a.jpg': replaced, 'imgs/new.jpg': added})
  assert updated == ''.join(expected[uri] for uri in sorted(expected))
  assert BY_URI.updated('', set(), []) == ''
  assert BY_URI.updated(updated, set(expected), []) == ''


def test_a_content_file_keeps_copies_of_one_picture_together_and_drops_one_by_its_uri():
  shas = ['cd' * 32, 'ab' * 32, 'cd' * 32, 'ef' * 32]
  lines = [BY_CONTENT.line('s1', entry(uri, sha=sha)) for uri, sha in zip(ODD_URIS, shas)]
  updated = BY_CONTENT.updated(''.join(lines), {('cd' * 32, ODD_URIS[0]), ('cd' * 32, 'not-there.jpg')}, [])
  assert [BY_CONTENT.identity(line) for line in updated.splitlines()] == [
      ('ab' * 32, ODD_URIS[1]), ('cd' * 32, ODD_URIS[2]), ('ef' * 32, ODD_URIS[3])]


def _written(text: str) -> LookupFile:
  data = text.encode('utf-8', 'backslashreplace')  # as output_dir.stage_text writes it
  return LookupFile(slot=3, file=BY_URI.file_name(3, 16), num_entries=text.count('\n'),
                    sha256=catalog_lookup.checksum(data))


def test_a_lookup_file_is_read_back_as_written_even_with_names_that_are_not_utf8():
  text = BY_URI.updated('', set(), [BY_URI.line('s1', entry(uri)) for uri in ODD_URIS])
  found = _written(text)
  assert found.file == 'catalog/by_uri/00003-of-00016.jsonl'
  data = text.encode('utf-8', 'backslashreplace')
  assert sorted(catalog_lookup.checked(found, data)) == sorted(('s1', entry(uri)) for uri in ODD_URIS)
  again = BY_URI.updated(data.decode('utf-8', 'surrogateescape'), {'imgs/cat/a.jpg'}, [])
  assert [value.uri for _, value in catalog_lookup.checked(_written(again), again.encode('utf-8', 'backslashreplace'))
          ] == sorted(set(ODD_URIS) - {'imgs/cat/a.jpg'})


def test_a_lookup_file_that_is_not_what_the_record_says_is_named():
  text = ''.join(BY_URI.line('s1', entry(uri)) for uri in sorted(ODD_URIS))
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


@pytest.mark.parametrize('uri', ODD_URIS + ['imgs/[brackets], "and" quotes].jpg'])
@pytest.mark.parametrize('quality', [(), ('dark',), ('blurry', 'dark', 'grayscale_as_rgb', 'light', 'low_information')])
def test_a_content_line_gives_what_near_copies_need_from_its_end_as_its_parse_does(uri, quality):
  """near_fields reads a line's content hash, perceptual hash, colour and rank fields from its
  end, equal to what parsing it gives, whatever its uri, labels and flags hold; a line of an
  older catalog (without colour, hash or flags) gives None, to be parsed."""
  value = entry(uri)._replace(labels=('a[b]', '"c"'), objects=('[', ']'), quality=quality, damaged=True,
                              longer_side=4032, stored_bytes=12_345_678, phash='0123456789abcdef' * 2,
                              colour='00ff00ff00ff00ff')
  text = BY_CONTENT.line('shard-id', value)
  _, parsed = BY_CONTENT.parse(text)
  assert BY_CONTENT.near_fields(text) == (parsed.source_sha256, parsed.phash, parsed.colour, parsed.damaged,
                                          parsed.longer_side, parsed.stored_bytes)
  assert BY_CONTENT.near_fields(BY_CONTENT.line('s', value._replace(phash='', colour=''))) == (
      value.source_sha256, '', '', True, 4032, 12_345_678)
  for fields in (13, 14, 15):  # up to damaged, to the quality flags, to the perceptual hash
    older = '["' + value.source_sha256 + '",' + catalog_lookup._dumps(  # pylint: disable=protected-access
        [value.uri, value.fingerprint, 'shard-id', *value[2:fields]])[1:]
    assert BY_CONTENT.near_fields(older) is None
    assert BY_CONTENT.parse(older)[1][:fields] == value[:fields]


@pytest.mark.parametrize('seed', range(20))
def test_a_sorted_file_written_again_by_its_changes_alone_is_what_updated_writes(seed):
  """updated_sorted, which reads the identities of the lines a change reaches and copies the
  rest as bytes, gives the bytes of what updated gives, whatever is dropped, added, replaced or
  absent (names that are not UTF-8 too), by uri and by content (where one picture's copies
  share a content hash)."""
  rng = random.Random(seed)
  uris = ODD_URIS + [f'imgs/{rng.randrange(10**6):06d}.jpg' for _ in range(rng.randrange(0, 60))]
  for lookup in (BY_URI, BY_CONTENT):
    earlier = lookup.updated('', set(), [lookup.line('s1', entry(uri, sha=rng.choice(['ab', 'cd']) * 32))
                                         for uri in rng.sample(uris, rng.randrange(len(uris) + 1))])
    identities = [lookup.identity(line) for line in earlier.splitlines(keepends=True)]
    dropped = set(rng.sample(identities, rng.randrange(len(identities) + 1)))
    dropped |= {('ef' * 32, 'gone.jpg') if lookup.by_content else 'gone.jpg'}
    added = [lookup.line('s2', entry(uri, 'file:9:9:9:9', sha=rng.choice(['ab', 'cd', 'ef']) * 32))
             for uri in rng.sample(uris + ['imgs/new.jpg'], rng.randrange(8))]
    assert lookup.updated_sorted(output_layout.encoded(earlier), dropped, added) == output_layout.encoded(
        lookup.updated(earlier, dropped, added))


@pytest.mark.parametrize('share', [0.001, 0.02, 0.125, 0.5])
def test_a_large_file_takes_its_changes_as_updated_writes_them_however_dense(share):
  """The changes' places are searched from the last one's (Lookup._place): a file of 3,000 lines
  with a share of them dropped, replaced or added, spread or bunched, gives what updated gives,
  by uri and by content (one content hash in three shared by three files)."""
  rng = random.Random(int(share * 1000))
  uris = [f'imgs/{index:06d}.jpg' for index in range(3000)]
  shas = {uri: f'{rng.randrange(1000) if index % 3 else index:064x}' for index, uri in enumerate(uris)}
  for lookup in (BY_URI, BY_CONTENT):
    earlier = lookup.updated('', set(), [lookup.line('s1', entry(uri, sha=shas[uri])) for uri in uris])
    changed = rng.sample(uris, int(len(uris) * share)) + uris[1000:1000 + int(100 * share)]
    dropped = {lookup.identity(lookup.line('s1', entry(uri, sha=shas[uri]))) for uri in changed[::2]}
    added = [lookup.line('s2', entry(uri, 'file:9:9:9:9', sha=shas[uri])) for uri in changed[1::2]]
    added += [lookup.line('s2', entry(f'imgs/{index:06d}a.jpg', sha=shas[uris[index]]))
              for index in rng.sample(range(3000), len(added))]
    assert lookup.updated_sorted(output_layout.encoded(earlier), dropped, added) == output_layout.encoded(
        lookup.updated(earlier, dropped, added))


@pytest.mark.parametrize('uri', ODD_URIS)
def test_a_line_head_gives_what_its_parse_gives_and_nothing_for_a_record_without_a_label(uri):
  """Lookup.head splits a line without escapes at its '","' and scans one with them: the same
  fields either way, and None where the record has no label (an image of --annotations)."""
  for label in ('cat', 'a","b', '', None):
    value = entry(uri, fingerprint=random.choice(['', 'file:1:2:3:4']))._replace(label=label)
    line = BY_URI.line('0123456789abcdef', value)
    assert BY_URI.head(line) == ((uri, value.fingerprint, '0123456789abcdef', 'train', label) if label else None)


@pytest.mark.parametrize('seed', range(20))
def test_a_delta_holds_the_changes_a_file_written_again_would_take(seed):
  """A lookup file's delta (the changes since it was written: lines added or replaced, and
  identities dropped) gives, made on the file, the bytes updated_sorted gives of the file and
  the same changes; and its lines come back as those changes."""
  rng = random.Random(seed)
  uris = ODD_URIS + [f'imgs/{rng.randrange(10**6):06d}.jpg' for _ in range(rng.randrange(0, 60))]
  for lookup in (BY_URI, BY_CONTENT):
    earlier = output_layout.encoded(lookup.updated('', set(), [
        lookup.line('s1', entry(uri, sha=rng.choice(['ab', 'cd']) * 32)) for uri in rng.sample(uris, len(uris) // 2)]))
    identities = [lookup.identity(line) for line in earlier.decode('utf-8').splitlines(keepends=True)]
    changes = dict.fromkeys(rng.sample(identities, rng.randrange(len(identities) + 1)))
    changes.update((lookup.identity(line), line) for line in (
        lookup.line('s2', entry(uri, 'file:9:9:9:9', sha=rng.choice(['ab', 'ef']) * 32))
        for uri in rng.sample(uris + ['imgs/new.jpg'], rng.randrange(8))))
    delta = lookup.delta(changes)
    assert delta.count(b'\n') == len(changes)
    parsed = {identity: line and lookup.parse(line) for identity, line in changes.items()}
    assert {identity: line and lookup.parse(line)  # a lone surrogate comes back as its JSON escape
            for identity, line in lookup.delta_changes(delta.decode('utf-8')).items()} == parsed
    assert lookup.with_changes(earlier, lookup.delta_changes(delta.decode('utf-8'))) == lookup.updated_sorted(
        earlier, set(changes), [line for line in changes.values() if line is not None])


def test_a_delta_that_is_not_what_the_record_says_is_named():
  delta = BY_URI.delta({'a.jpg': None, 'b.jpg': BY_URI.line('s1', entry('b.jpg'))})
  found = LookupFile(slot=0, file=BY_URI.file_name(0, 1), num_entries=9, sha256='', delta_entries=2,
                     delta_sha256=catalog_lookup.checksum(delta))
  assert found.files == ['catalog/by_uri/00000-of-00001.jsonl', 'catalog/by_uri/00000-of-00001.delta.jsonl']
  catalog_lookup.check_delta(found, delta)
  with pytest.raises(DamagedOutput, match='^catalog/by_uri/00000-of-00001.delta.jsonl is not the lookup file'):
    catalog_lookup.check_delta(found, delta[:-3])
  with pytest.raises(DamagedOutput, match='lists 2 entries where the run record says 3'):
    catalog_lookup.check_delta(dataclasses.replace(found, delta_entries=3), delta)
