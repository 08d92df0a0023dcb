"""Fingerprints as the listing takes them (--incremental): equal for an input listed twice,
different once a file or its manifest row changed, '' without the flag; Cloud Storage through
the local emulator."""
import json
import os

import pytest
from apache_beam.io.filesystem import FileMetadata, MatchResult
from apache_beam.io.filesystems import FileSystems

from beam_pipeline.pipeline.listing import inputs, parts
from beam_pipeline.core import settings
from beam_pipeline.core.inputs import fingerprints
from beam_pipeline.core.messages import InputItem, Rejection

from helpers import gcs_emulator, photos


def listed(spec, with_fingerprints=True):
  """{uri: fingerprint} of an input's items, part after part, as the pipeline's workers list them."""
  items = [item for part in parts.input_parts(spec)
           for item in parts.list_part(part, fingerprints=with_fingerprints)]
  assert all(isinstance(item, (InputItem, Rejection)) for item in items)
  return {item.uri: item.fingerprint for item in items if isinstance(item, InputItem)}


def object_listings(proxy):
  """How many object listings went through the proxy; GcsIO's bucket look-ups come and go with its
  client's state."""
  return len([request for request in proxy.plan.requests() if request.path.endswith('/o')])


@pytest.fixture
def folder(tmp_path):
  photos.write_files(tmp_path / 'in', {f'{label}/{i}.jpg': photos.jpeg(seed=i, width=8, height=8)
                                       for label in ('cat', 'dog') for i in range(2)})
  return tmp_path / 'in'


def test_a_folder_listed_twice_gives_the_same_fingerprints_each_its_file_s_size_and_time(folder):
  spec = inputs.resolve_input(str(folder))
  first = listed(spec)
  assert first == listed(spec) and len(first) == 4
  stat = os.stat(folder / 'cat/0.jpg')
  assert first[str(folder / 'cat/0.jpg')] == fingerprints.of_stat(stat)


def test_a_rewritten_file_changes_its_fingerprint_alone_new_content_or_only_a_new_time(folder):
  spec = inputs.resolve_input(str(folder))
  first = listed(spec)
  cat, dog = str(folder / 'cat/0.jpg'), str(folder / 'dog/1.jpg')
  stat = os.stat(cat)
  (folder / 'cat/0.jpg').write_bytes(photos.jpeg(seed=99, width=8, height=8))
  os.utime(cat, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))  # even within the clock's resolution
  os.utime(dog, ns=(stat.st_atime_ns, os.stat(dog).st_mtime_ns + 1_000_000_000))
  second = listed(spec)
  assert {uri for uri in first if first[uri] != second[uri]} == {cat, dog}


def test_a_glob_and_a_link_give_the_fingerprint_of_the_file_read(folder, tmp_path):
  (folder / 'cat/link.jpg').symlink_to(folder / 'dog/0.jpg')
  (folder / 'cat/dangling.jpg').symlink_to(folder / 'gone.jpg')
  by_glob = listed(inputs.resolve_input(str(folder / 'cat/*.jpg')))
  assert by_glob[str(folder / 'cat/link.jpg')] == listed(inputs.resolve_input(str(folder)))[str(folder / 'dog/0.jpg')]
  assert by_glob[str(folder / 'cat/dangling.jpg')] == ''  # unknown: counted as changed
  assert by_glob[str(folder / 'cat/0.jpg')].startswith('file:')


def test_without_the_flag_no_item_has_a_fingerprint_and_no_file_is_looked_at(folder, monkeypatch):
  manifest = folder.parent / 'm.csv'
  manifest.write_text(f'{folder}/cat/0.jpg,cat\n')
  stats = []
  monkeypatch.setattr(fingerprints, 'of_local_file', stats.append)
  for given in (str(folder), str(folder / '*/*.jpg'), str(manifest)):
    assert set(listed(inputs.resolve_input(given), with_fingerprints=False).values()) == {''}
  assert not stats


def test_a_relabelled_manifest_row_changes_its_fingerprint_though_its_file_did_not(folder):
  manifest = folder.parent / 'm.csv'
  rows = [f'{folder}/cat/0.jpg,cat', f'{folder}/cat/1.jpg,cat', f'TEST,{folder}/dog/0.jpg,dog']
  manifest.write_text('\n'.join(rows) + '\n')
  spec = inputs.resolve_input(str(manifest))
  first = listed(spec)
  assert first == listed(spec)
  stat = os.stat(folder / 'cat/0.jpg')
  assert first[str(folder / 'cat/0.jpg')].startswith(fingerprints.of_stat(stat) + '|row:')
  manifest.write_text('\n'.join([rows[0].replace(',cat', ',dog'), rows[1], rows[2].replace('TEST', 'TRAIN')]) + '\n')
  second = listed(spec)
  assert {uri for uri in first if first[uri] != second[uri]} == {str(folder / 'cat/0.jpg'), str(folder / 'dog/0.jpg')}
  # a row moved below another keeps its fingerprint: its number is not what it says
  manifest.write_text('\n'.join(['', rows[1], rows[0].replace(',cat', ',dog'), rows[2].replace('TEST', 'TRAIN')]))
  assert listed(spec) == second


def test_a_jsonl_row_changes_with_its_extras_and_with_its_file(folder):
  manifest = folder.parent / 'm.jsonl'
  line = {'uri': 'cat/0.jpg', 'label': 'cat', 'source': 'web'}
  manifest.write_text(json.dumps(line) + '\n')
  (folder.parent / 'cat').symlink_to(folder / 'cat')  # relative to the manifest's folder
  spec = inputs.resolve_input(str(manifest))
  first = listed(spec)
  manifest.write_text(json.dumps({**line, 'source': 'lab'}) + '\n')
  second = listed(spec)
  os.utime(folder / 'cat/0.jpg', ns=(1, 1))
  third = listed(spec)
  assert len({*first.values(), *second.values(), *third.values()}) == 3 and '' not in first.values()


def test_other_remote_files_take_their_size_and_time_from_the_one_match_of_the_listing(monkeypatch):
  """A pattern of a file system Beam matches whole (not gs://): the metadata it gives anyway."""
  matched = []

  def match(patterns):
    matched.append(patterns)
    return [MatchResult(patterns[0], [FileMetadata('s3://b/in/a.jpg', 5, 1700000000.25),
                                      FileMetadata('s3://b/in/b.jpg', 7, 0.0)])]

  monkeypatch.setattr(FileSystems, 'match', match)
  spec = settings.InputSpec(settings.GLOB, 's3://b/in/*.jpg')
  assert listed(spec) == {'s3://b/in/a.jpg': 'meta:5:1700000000.25', 's3://b/in/b.jpg': ''}
  assert listed(spec, with_fingerprints=False) == {'s3://b/in/a.jpg': '', 's3://b/in/b.jpg': ''}
  assert matched == [['s3://b/in/*.jpg']] * 2


def test_cloud_storage_objects_change_their_fingerprint_when_overwritten(proxy, tmp_path):
  """Generation, CRC32C and size come with the listing (a pattern) or one metadata request (a
  manifest row): no object is read."""
  bucket = 'fingerprints'
  gcs_emulator.create_bucket(bucket)
  gcs_emulator.upload(bucket, {f'in/{label}/{i}.jpg': photos.jpeg(seed=i, width=8, height=8)
                               for label in ('cat', 'dog') for i in range(2)})
  manifest = tmp_path / 'm.csv'
  manifest.write_text(f'gs://{bucket}/in/cat/0.jpg,cat\ngs://{bucket}/in/dog/1.jpg,dog\n')
  specs = [settings.InputSpec(settings.DIRECTORY, f'gs://{bucket}/in/**'),
           settings.InputSpec(settings.GLOB, f'gs://{bucket}/in/*/0.jpg'), inputs.resolve_input(str(manifest))]
  proxy.plan.reset()
  first = [listed(spec) for spec in specs]
  assert not [request for request in proxy.plan.requests() if request.media]  # nothing read
  assert first == [listed(spec) for spec in specs]
  assert len(first[0]) == 4 and all(value.startswith('gcs:') for value in first[0].values())
  assert first[1] == {uri: value for uri, value in first[0].items() if uri.endswith('/0.jpg')}
  assert all(value.startswith('meta:') and '|row:' in value for value in first[2].values())

  for spec in specs[:2]:  # the same listing requests as without fingerprints
    proxy.plan.reset()
    assert set(listed(spec, with_fingerprints=False).values()) == {''}
    without = object_listings(proxy)
    proxy.plan.reset()
    listed(spec)
    assert object_listings(proxy) == without

  gcs_emulator.upload(bucket, {'in/cat/0.jpg': gcs_emulator.download(bucket, 'in/cat/0.jpg')})  # same bytes
  second = [listed(spec) for spec in specs]
  changed = [{uri for uri in before if before[uri] != after[uri]} for before, after in zip(first, second)]
  assert changed == [{f'gs://{bucket}/in/cat/0.jpg'}] * 3
