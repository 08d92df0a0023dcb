"""--incremental: a run converts only what changed since the output's run, leaves every other
shard as it was, and the output stays the one dataset a fresh conversion would make.

Every test works in a folder of its own holding a copy of one base's photos in ``imgs/`` and
their --incremental output in ``out/``, converted there, run from inside it, so the catalog's
uris name the test's own photos.
"""
import dataclasses
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, Set, Tuple

import pytest
from PIL import Image

from beam_pipeline import cli
from beam_pipeline.core.output import catalog_lookup, catalog_entries, output_layout
from beam_pipeline.core.output.run_record import RunRecord
from beam_pipeline.core.rejections import DamagedOutput
from beam_pipeline.core.writing import record_index
from beam_pipeline.inspection import verify
from beam_pipeline.pipeline.listing import parts
from helpers import fault_proxy, gcs_emulator, photos
from helpers.commands import ROOT
from helpers.dataset_reader import bucket_files, read_output
from helpers.gcs_retries import shorten_gcs_retries

SPLITS = '--splits=train=0.8,validation=0.2'
# Small shards, so that an update has many to keep and a few to write again.
ARGS = ('--runner=DirectRunner', '--skip_transform', SPLITS, '--target_shard_mb=0.03')
PER_CLASS = 60
AT_POINT = ROOT / 'tests' / 'helpers' / 'at_point.py'


def convert(*extra: str, output: str = 'out') -> int:
  return cli.main(['--input=imgs', f'--output={output}', *ARGS, *extra])


@pytest.fixture(scope='module')
def base(tmp_path_factory) -> Path:
  """cat and dog photos."""
  root = tmp_path_factory.mktemp('incremental')
  photos.write_files(root / 'imgs', photos.labelled(['cat', 'dog'], PER_CLASS, seed=3))
  return root


@pytest.fixture
def work(base, tmp_path, monkeypatch) -> Path:
  """A copy of the base's photos and their --incremental output, the current directory for the
  test. Each test converts its own copy: a copied file has an inode and a change time of its own,
  which its fingerprint holds, so a copied output would find every photo touched."""
  folder = tmp_path / 'w'
  shutil.copytree(base, folder, symlinks=True)
  monkeypatch.chdir(folder)
  assert convert('--incremental') == 0
  return folder


def shard_states(out: Path) -> Dict[str, Tuple[bytes, int, int]]:
  """Every shard and catalog file: its bytes, modification time and inode."""
  found = {}
  for path in sorted(out.glob('*.tfrecord')) + sorted((out / output_layout.CATALOG_DIR).glob('*.jsonl')):
    stat = path.stat()
    found[str(path.relative_to(out))] = (path.read_bytes(), stat.st_mtime_ns, stat.st_ino)
  return found


def pairs(out: Path) -> Set[Tuple[str, str, str]]:
  """(image/filename, image/key/sha256, split) of every record."""
  _, records = read_output(str(out))
  return {(record['image/filename'].decode(), record['image/key/sha256'].decode(), split)
          for split, split_records in records.items() for record in split_records}


def on_disk(folder: Path) -> Set[Tuple[str, str]]:
  """(uri, sha256) of every photo in ``folder``/imgs as the files are: what a fresh conversion
  of them holds (the inputs are plain JPEGs, none re-encoded; image/key/sha256 is that of the
  stored bytes), without a second conversion to compute it."""
  imgs = folder / 'imgs'
  return {(f'imgs/{path.relative_to(imgs)}', hashlib.sha256(path.read_bytes()).hexdigest())
          for path in imgs.rglob('*') if path.is_file()}


def update_of(out: Path) -> dict:
  return json.loads((out / output_layout.RUN_RECORD).read_text())['update']


def assert_verified(out: Path) -> None:
  info = RunRecord.read(str(out))
  report = verify.verify(str(out), info)
  assert not report.problems, report.problems
  assert_lookup_agrees(out)


def assert_lookup_agrees(out: Path) -> None:
  """The catalog's lookups by uri and by content each hold each catalogued record once, in its
  key's file, sorted, under the id of the shard whose catalog lists it, and the run record lists
  each lookup file as it is."""
  info = RunRecord.read(str(out))
  lookup = info.catalog_lookup
  shards = {shard.key: shard for split in info.splits.values() for shard in split.shards}
  assert len(shards) == sum(len(split.shards) for split in info.splits.values())  # ids are unique
  catalogued = {}
  for key, shard in shards.items():
    for entry in catalog_entries.entries((out / shard.catalog_file).read_text()):
      catalogued[entry.uri] = (key, entry)
  for by, files in ((catalog_lookup.BY_URI, lookup.files), (catalog_lookup.BY_CONTENT, lookup.content_files)):
    looked_up = {}
    for found in files:
      assert found.file == by.file_name(found.slot, lookup.count)
      data = (out / found.file).read_bytes()
      catalog_lookup.check(found, data)
      if found.delta_entries is not None:  # the file as written, then its changes since
        delta = (out / found.files[1]).read_bytes()
        catalog_lookup.check_delta(found, delta)
        data = by.with_changes(data, by.delta_changes(delta.decode('utf-8')))
      lines = data.decode('utf-8').splitlines()
      identities = [by.identity(line) for line in lines]
      assert identities == sorted(identities)
      for key, entry in map(by.parse, lines):
        assert by.slot_of(entry, lookup.count) == found.slot
        looked_up[entry.uri] = (key, entry)
    assert looked_up == catalogued
    on_disk_files = {path.relative_to(out).as_posix() for path in (out / by.folder).glob('*')}
    assert on_disk_files == {name for found in files for name in found.files}


def test_an_update_converts_what_changed_and_keeps_every_other_shard(work, capsys):
  """Six new photos (one of a new class), two deleted, one replaced by another picture, one
  renamed, one touched: the update reads only those, writes them to new shards, writes again
  only the shards that held a deleted, replaced or touched record, and leaves the dataset a fresh
  conversion of today's photos would hold, with the earlier classes' ids and splits."""
  out = work / 'out'
  before, earlier_pairs = shard_states(out), pairs(out)
  earlier_split = {name: split for name, _, split in earlier_pairs}
  photos.write_files(work / 'imgs', photos.labelled(['bird'], 4, seed=9))
  photos.write_files(work / 'imgs', {'cat/new.0.jpg': photos.jpeg(101), 'dog/new.0.jpg': photos.jpeg(102)})
  (work / 'imgs/cat/cat.1.jpg').unlink()
  (work / 'imgs/dog/dog.2.jpg').unlink()
  (work / 'imgs/cat/cat.3.jpg').write_bytes(photos.jpeg(103))
  (work / 'imgs/dog/dog.4.jpg').rename(work / 'imgs/dog/renamed.jpg')
  os.utime(work / 'imgs/cat/cat.5.jpg', ns=(1, 1))
  capsys.readouterr()

  assert convert('--incremental') == 0

  said = capsys.readouterr().out
  update = update_of(out)
  assert {key: update[key] for key in ('added', 'changed', 'removed', 'unchanged', 'touched', 'new_classes')} == {
      'added': 7, 'changed': 1, 'removed': 3, 'unchanged': 2 * PER_CLASS - 5, 'touched': 1, 'new_classes': ['bird']}
  assert 'The class count changed from 2 to 3 (bird added after the earlier ids)' in said
  # What today's photos, converted afresh, would hold: the same pictures under the same names.
  now = pairs(out)
  assert {(name, sha) for name, sha, _ in now} == on_disk(work)
  # Earlier records keep their splits (a replaced file is a new picture); the renamed picture keeps its own.
  split = {name: split for name, _, split in now}
  moved = [name for name in split if name in earlier_split and split[name] != earlier_split[name]]
  assert moved in ([], ['imgs/cat/cat.3.jpg'])
  assert split['imgs/dog/renamed.jpg'] == earlier_split['imgs/dog/dog.4.jpg']
  # Only shards that held a record of a changed, deleted or touched file were written again.
  after = shard_states(out)
  info = RunRecord.read(str(out))
  catalogued = {}
  for name in before:
    if name.startswith(output_layout.CATALOG_DIR):
      for line in before[name][0].decode().splitlines():
        catalogued[json.loads(line)[0]] = name
  touched = {catalogued[uri] for uri in ('imgs/cat/cat.1.jpg', 'imgs/dog/dog.2.jpg', 'imgs/cat/cat.3.jpg',
                                         'imgs/dog/dog.4.jpg', 'imgs/cat/cat.5.jpg')}
  untouched = [name for name in before if name.startswith(output_layout.CATALOG_DIR) and name not in touched]
  assert untouched and len(untouched) >= len(before) // 2 - len(touched)
  for catalog in untouched:
    shard = catalog[len(output_layout.CATALOG_DIR) + 1:-len('.jsonl')] + output_layout.SHARD_SUFFIX
    assert after[catalog] == before[catalog] and after[shard] == before[shard], f'{shard} was written again'
  # A shard whose only change is the touched file keeps its file: only its catalog is written again.
  catalog_only = {catalogued['imgs/cat/cat.5.jpg']} - {catalogued[uri] for uri in (
      'imgs/cat/cat.1.jpg', 'imgs/dog/dog.2.jpg', 'imgs/cat/cat.3.jpg', 'imgs/dog/dog.4.jpg')}
  for catalog in catalog_only:
    shard = catalog[len(output_layout.CATALOG_DIR) + 1:-len('.jsonl')] + output_layout.SHARD_SUFFIX
    assert after[catalog] != before[catalog] and after[shard] == before[shard]
  assert update['shards_kept'] == len(untouched) + len(catalog_only)
  assert update['shards_kept'] + update['shards_rewritten'] + update['shards_written'] == sum(
      len(split.shards) for split in info.splits.values())
  # Labels keep their ids; TensorFlow Datasets' names and the record follow.
  assert (out / output_layout.LABELS_TXT).read_text() == 'cat\ndog\nbird\n'
  assert (out / output_layout.tfds_label_names('default')).read_text() == 'cat\ndog\nbird\n'
  assert info.labels == ['cat', 'dog', 'bird']
  assert_verified(out)
  tfds = pytest.importorskip('tensorflow_datasets')
  builder = tfds.builder_from_directory(str(out))
  assert sum(split.num_examples for split in builder.info.splits.values()) == len(now)
  assert sum(1 for _ in builder.as_dataset(split='validation')) == info.splits['validation'].num_examples


def output_state(out: Path) -> Dict[str, Tuple[bytes, int, int]]:
  """Every file of the output but its lock: its bytes, modification time and inode."""
  found = {}
  for path in sorted(out.rglob('*')):
    if path.is_file() and path.name != output_layout.LOCK:
      stat = path.stat()
      found[str(path.relative_to(out))] = (path.read_bytes(), stat.st_mtime_ns, stat.st_ino)
  return found


def test_an_unchanged_input_builds_no_pipeline_and_leaves_the_output_as_it_was(work, capsys, monkeypatch):
  """The listing's digest is the earlier run's: the launcher says so in one line, builds no
  pipeline and touches no file of the output, its run record included."""
  out = work / 'out'
  before = output_state(out)
  earlier = RunRecord.read(str(out))
  assert earlier.listing.num_listed == 2 * PER_CLASS
  monkeypatch.setattr('beam_pipeline.pipeline.graph.build', lambda *args, **kwargs: pytest.fail('a pipeline was built'))
  capsys.readouterr()
  assert convert('--incremental') == 0
  assert capsys.readouterr().out.splitlines() == [
      f'--incremental: nothing changed since the run of {earlier.created} ({2 * PER_CLASS} inputs listed as then); '
      '--output=out is left as it is.']
  assert output_state(out) == before


def test_an_update_whose_pipeline_finds_nothing_changed_commits_nothing_and_merges_no_shard(work, capsys, monkeypatch):
  """Where the launcher cannot tell (a Dataflow job lists on its workers), the pipeline finds
  every input unchanged: it commits nothing, so the output keeps every file as it was, and its
  small shards wait for a run that adds or removes something to be merged."""
  out = work / 'out'
  photos.write_files(work / 'imgs', {f'cat/small{i}.jpg': photos.jpeg(300 + i) for i in range(2)})
  assert convert('--incremental') == 0
  photos.write_files(work / 'imgs', {f'dog/small{i}.jpg': photos.jpeg(400 + i) for i in range(2)})
  assert convert('--incremental') == 0  # two increments: small shards to merge
  before = output_state(out)
  monkeypatch.setattr('beam_pipeline.cli.launch._nothing_changed', lambda *args: None)
  capsys.readouterr()
  assert convert('--incremental') == 0
  assert capsys.readouterr().out.splitlines()[-1].startswith('--incremental: nothing changed since the run of ')
  assert output_state(out) == before
  assert not (out / output_layout.TEMP_DIR).exists()


def test_an_update_lists_its_input_once(work, monkeypatch):
  """The launcher lists the input to learn whether anything changed; a change found, the
  pipeline (in this process, the DirectRunner's) takes that listing instead of listing the input
  again, and nothing of it is kept once the run ends."""
  photos.write_files(work / 'imgs', {'cat/new.jpg': photos.jpeg(500)})
  listed = []
  list_part = parts.list_part
  monkeypatch.setattr(parts, 'list_part', lambda part, *args, **kwargs: listed.append(part) or list_part(
      part, *args, **kwargs))
  assert convert('--incremental') == 0
  assert len(listed) == 1
  assert update_of(work / 'out')['added'] == 1
  assert not parts._KEPT  # pylint: disable=protected-access


def catalogued(out: Path) -> Dict[str, list]:
  """Each catalogued uri's catalog line (catalog_entries.Entry's fields)."""
  return {line[0]: line for catalog in (out / output_layout.CATALOG_DIR).glob('*.jsonl')
          for line in map(json.loads, catalog.read_text().splitlines())}


def test_a_touched_file_keeps_its_record_and_a_rewrite_with_its_time_put_back_is_a_change(work, capsys):
  """A file whose fingerprint changed but not its bytes (touched, copied over with itself) keeps
  its record, unread but for its hash, and its catalog line takes the new fingerprint, so the
  next run finds nothing changed; its shard is left as it was, only its catalog written again.
  New bytes of the same size with the modification time put back (`touch -r`, some sync tools)
  are a change: the change time cannot be put back."""
  out = work / 'out'
  cat = sorted((work / 'imgs' / 'cat').iterdir())
  touched, rewritten = (str(path.relative_to(work)) for path in cat[:2])
  earlier = catalogued(out)
  records = pairs(out)
  before = shard_states(out)
  shard = next(name for name, state in before.items() if name.startswith(output_layout.CATALOG_DIR)
               and touched.encode() in state[0])
  os.utime(cat[0], ns=(cat[0].stat().st_atime_ns, cat[0].stat().st_mtime_ns + 10**9))
  shutil.copy2(cat[0], cat[0].with_name('twin'))
  os.replace(cat[0].with_name('twin'), cat[0])  # another inode, the same bytes and times
  capsys.readouterr()
  assert convert('--incremental') == 0
  update = update_of(out)
  assert (update['changed'], update['touched'], update['added'], update['removed']) == (0, 1, 0, 0)
  assert (update['shards_written'], update['shards_rewritten'], update['written_files']) == (0, 0, [])
  assert '1 touched (new fingerprint, same bytes: records kept)' in capsys.readouterr().out
  now = catalogued(out)
  assert now[touched][1] != earlier[touched][1] and now[touched][2:] == earlier[touched][2:]
  assert pairs(out) == records
  after = shard_states(out)
  assert after[shard][0] != before[shard][0]  # its catalog, written again
  shard_file = shard[len(output_layout.CATALOG_DIR) + 1:-len('.jsonl')] + output_layout.SHARD_SUFFIX
  assert after[shard_file] == before[shard_file]  # its shard: the same bytes, time and inode
  assert {name for name in after if after[name] != before[name]} == {shard}
  assert_verified(out)
  capsys.readouterr()
  assert convert('--incremental') == 0
  assert capsys.readouterr().out.splitlines()[-1].startswith('--incremental: nothing changed since the run of ')

  stat = cat[1].stat()
  data = bytearray(cat[1].read_bytes())
  data[-10] ^= 0x01  # inside the scan, before the end marker: another picture of the same size
  cat[1].write_bytes(bytes(data))
  os.utime(cat[1], ns=(stat.st_atime_ns, stat.st_mtime_ns))
  assert cat[1].stat().st_size == stat.st_size and cat[1].stat().st_mtime_ns == stat.st_mtime_ns
  assert convert('--incremental') == 0
  assert (update_of(out)['changed'], update_of(out).get('touched')) == (1, None)
  assert {sha for name, sha, _ in pairs(out) if name == rewritten} <= {hashlib.sha256(data).hexdigest()}


def test_a_renamed_file_is_one_removed_and_one_added(work):
  out = work / 'out'
  cat = sorted((work / 'imgs' / 'cat').iterdir())
  cat[1].rename(cat[1].with_name('renamed.jpg'))
  assert convert('--incremental') == 0
  assert (update_of(out)['added'], update_of(out)['removed']) == (1, 1)


def test_odd_names_stay_found_update_after_update(work, monkeypatch):
  """Files whose names are not UTF-8 (lone surrogates, which Beam's string coders refuse) or hold
  JSON's quotes, backslashes and brackets, or accents, are added by an update, kept by the next
  (their lookup lines copied as bytes, found again by binary search), carried into lookups built
  again, then removed: no run fails, and the lookups agree with the catalogs at each step."""
  out = work / 'out'
  names = [os.fsdecode(b'cat/caf\xe9.jpg'), 'cat/café.jpg', 'cat/a "quoted", [bracketed] name.jpg',
           'cat/back\\slash[1].jpg']
  photos.write_files(work / 'imgs', dict(zip(names, photos.labelled(['cat'], len(names), seed=11).values())))
  assert convert('--incremental') == 0
  assert update_of(out)['added'] == len(names)
  assert_verified(out)
  (work / 'imgs' / sorted((work / 'imgs' / 'dog').iterdir())[0]).unlink()  # a change elsewhere
  assert convert('--incremental') == 0
  assert (update_of(out)['removed'], update_of(out)['changed'], update_of(out)['added']) == (1, 0, 0)
  assert_verified(out)
  monkeypatch.setattr(catalog_lookup, 'ENTRIES_PER_FILE', 8)  # outgrown: the lookups are built again
  (work / 'imgs' / sorted((work / 'imgs' / 'dog').iterdir())[0]).unlink()
  assert convert('--incremental') == 0
  assert RunRecord.read(str(out)).catalog_lookup.count > 1
  assert_verified(out)
  for name in names:
    (work / 'imgs' / name).unlink()
  assert convert('--incremental') == 0
  assert update_of(out)['removed'] == len(names)
  assert_verified(out)


def test_a_shard_written_again_copies_the_records_it_keeps_byte_for_byte(work):
  """A deleted photo's shard is written again as the bytes of its other records, framing and
  CRCs as they were: nothing parsed or framed again."""
  out = work / 'out'
  catalog = sorted((out / output_layout.CATALOG_DIR).glob('*.jsonl'))[0]
  shard = out / (catalog.name[:-len('.jsonl')] + output_layout.SHARD_SUFFIX)
  uris = [json.loads(line)[0] for line in catalog.read_text().splitlines()]
  data = shard.read_bytes()
  spans = record_index.checked_spans(data)
  (work / uris[1]).unlink()
  assert convert('--incremental') == 0
  assert shard.read_bytes() == b''.join(data[offset:offset + size] for index, (offset, size) in enumerate(spans)
                                        if index != 1)
  assert [json.loads(line)[0] for line in catalog.read_text().splitlines()] == uris[:1] + uris[2:]


def test_a_damaged_shard_an_update_must_write_again_fails_it_and_keeps_the_dataset(work, capsys):
  """A bit flipped in a shard that lost a record: its CRC says so, the update fails naming the
  shard, and the output keeps its earlier dataset."""
  out = work / 'out'
  catalog = sorted((out / output_layout.CATALOG_DIR).glob('*.jsonl'))[0]
  shard = out / (catalog.name[:-len('.jsonl')] + output_layout.SHARD_SUFFIX)
  damaged = bytearray(shard.read_bytes())
  damaged[len(damaged) // 2] ^= 0x01
  shard.write_bytes(bytes(damaged))
  (work / json.loads(catalog.read_text().splitlines()[0])[0]).unlink()
  record = (out / output_layout.RUN_RECORD).read_bytes()
  capsys.readouterr()
  assert convert('--incremental') == 1
  err = capsys.readouterr().err.splitlines()
  assert err[0].startswith(f'error: the output is damaged: out/{shard.name}: the data of the record at byte ')
  assert err[0].endswith('fails its checksum (in step Write/ParDo(WriteOutputs))')
  assert err[2] == '  Convert again with --incremental --rebuild: it converts the input whole into --output=out.'
  assert (out / output_layout.RUN_RECORD).read_bytes() == record
  assert convert('--incremental', '--rebuild') == 0
  assert_verified(out)


def _damage(out: Path, kind: str) -> str:
  """Damages the output's first shard, its catalog or a file of a lookup as ``kind`` says;
  returns the file's name."""
  if 'lookup' in kind:
    lookup = RunRecord.read(str(out)).catalog_lookup
    found = (lookup.content_files if kind.startswith('content') else lookup.files)[0]
    path = out / found.file
    if kind.endswith('line deleted'):
      path.write_text(''.join(path.read_text().splitlines(keepends=True)[1:]))
    elif kind.endswith('emptied'):
      path.write_text('')
    else:
      path.unlink()
    return found.file
  catalog = sorted((out / output_layout.CATALOG_DIR).glob('*.jsonl'))[0]
  shard = out / (catalog.name[:-len('.jsonl')] + output_layout.SHARD_SUFFIX)
  lines = catalog.read_text().splitlines(keepends=True)
  if kind == 'shard emptied':
    shard.write_bytes(b'')
  elif kind == 'shard cut short':
    shard.write_bytes(shard.read_bytes()[:-100])
  elif kind == 'shard deleted':
    shard.unlink()
  elif kind == 'catalog line deleted':
    catalog.write_text(''.join(lines[1:]))
  elif kind == 'catalog emptied':
    catalog.write_text('')
  elif kind == 'catalog cut mid-line':
    catalog.write_text(''.join(lines)[:-40])
  else:
    catalog.unlink()
  return (shard if kind.startswith('shard') else catalog).relative_to(out).as_posix()


@pytest.mark.parametrize('kind', ['shard emptied', 'shard cut short', 'shard deleted', 'catalog line deleted',
                                  'catalog emptied', 'catalog cut mid-line', 'catalog deleted', 'lookup line deleted',
                                  'lookup emptied', 'lookup deleted', 'content lookup line deleted'])
def test_an_update_over_a_damaged_output_refuses_naming_the_file_and_rebuild_repairs_it(work, capsys, kind):
  """Whether anything changed or not, an update checks the shards, catalogs and lookup files it
  keeps against the run record (sizes, checksums): it never exits 0 over them, names the file,
  leaves the output as it was, and --rebuild converts it whole again."""
  out = work / 'out'
  damaged = _damage(out, kind)
  record = (out / output_layout.RUN_RECORD).read_bytes()
  for change in (False, True):
    if change:
      photos.write_files(work / 'imgs', {'cat/new.jpg': photos.jpeg(777)})
    capsys.readouterr()
    assert convert('--incremental') == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f'error: the output is damaged: {damaged} '), err
    assert err[2] == '  Convert again with --incremental --rebuild: it converts the input whole into --output=out.'
    assert (out / output_layout.RUN_RECORD).read_bytes() == record
  assert convert('--incremental', '--rebuild') == 0
  assert_verified(out)
  assert RunRecord.read(str(out)).num_examples == 2 * PER_CLASS + 1


def test_a_lookup_file_takes_a_few_changes_in_a_delta_beside_it_and_many_written_again_whole(work, capsys):
  """An update that changes a few of a lookup file's entries writes them in the file's delta and
  leaves the file as it is; once the delta would hold more than one entry in DELTA_FRACTION, the
  file is written again whole, without one. A delta cut short is refused as any lookup file is."""
  out = work / 'out'
  before = RunRecord.read(str(out)).catalog_lookup
  assert [found.delta_entries for found in before.files + before.content_files] == [None, None]
  photos.write_files(work / 'imgs', {'cat/new.0.jpg': photos.jpeg(900)})
  (work / 'imgs/dog/dog.2.jpg').unlink()
  assert convert('--incremental') == 0
  lookup = RunRecord.read(str(out)).catalog_lookup
  by_uri, by_content = lookup.files[0], lookup.content_files[0]
  assert (by_uri.file, by_uri.sha256) == (before.files[0].file, before.files[0].sha256)
  assert (by_uri.delta_entries, by_content.delta_entries) == (2, 2)  # the new file's line; dog.2's dropped
  assert by_uri.num_entries == 2 * PER_CLASS + 2  # the file's lines and its delta's, so that a version
  with pytest.raises(DamagedOutput, match='lists 120 entries where the run record says 122'):  # without deltas
    catalog_lookup.check(dataclasses.replace(by_uri, delta_entries=None), (out / by_uri.file).read_bytes())  # refuses
  assert_verified(out)
  many = 2 * PER_CLASS // catalog_lookup.DELTA_FRACTION
  photos.write_files(work / 'imgs', {f'cat/more.{i}.jpg': photos.jpeg(1000 + i) for i in range(many)})
  assert convert('--incremental') == 0
  lookup = RunRecord.read(str(out)).catalog_lookup
  assert [(found.num_entries, found.delta_entries) for found in lookup.files + lookup.content_files
          ] == [(2 * PER_CLASS + many, None)] * 2
  assert_verified(out)
  photos.write_files(work / 'imgs', {'dog/new.1.jpg': photos.jpeg(901)})
  assert convert('--incremental') == 0
  delta = out / RunRecord.read(str(out)).catalog_lookup.files[0].files[1]
  delta.write_bytes(delta.read_bytes()[:-5])
  capsys.readouterr()
  assert convert('--incremental') == 1
  assert capsys.readouterr().err.startswith(f'error: the output is damaged: {delta.relative_to(out).as_posix()} ')
  assert convert('--incremental', '--rebuild') == 0
  assert_verified(out)


def _as_before_lookups(out: Path) -> None:
  """The output as versions before the catalog's lookup by uri left it: no lookup, no shard ids."""
  record = json.loads((out / output_layout.RUN_RECORD).read_text())
  del record['catalog_lookup']
  for split in record['splits'].values():
    for shard in split['shards']:
      del shard['id']
  (out / output_layout.RUN_RECORD).write_text(json.dumps(record))
  shutil.rmtree(out / output_layout.LOOKUP_DIR)
  shutil.rmtree(out / output_layout.CONTENT_LOOKUP_DIR)


def test_an_output_from_before_the_lookup_gets_one_from_its_catalogs_on_its_next_update(work):
  """An output without a lookup is met with today's listing by uri once, as before lookups, and
  its lookup built on the way, naming its shards by their files; the next update uses it, and a
  shard renamed since (closing a gap a merge left) is still found under its first name."""
  out = work / 'out'
  _as_before_lookups(out)
  photos.write_files(work / 'imgs', {'cat/new.0.jpg': photos.jpeg(101)})
  (work / 'imgs/dog/dog.2.jpg').unlink()
  assert convert('--incremental') == 0
  update = update_of(out)
  assert (update['added'], update['removed'], update['unchanged']) == (1, 1, 2 * PER_CLASS - 1)
  info = RunRecord.read(str(out))
  assert info.catalog_lookup.count == 1 and info.catalog_lookup.files[0].num_entries == 2 * PER_CLASS
  assert_verified(out)
  for step in range(3):  # small increments, merged and renamed
    photos.write_files(work / 'imgs', {f'dog/step{step}.{i}.jpg': photos.jpeg(300 + 10 * step + i) for i in range(3)})
    (work / f'imgs/cat/cat.{10 + step}.jpg').unlink()
    assert convert('--incremental') == 0
    assert update_of(out)['removed'] == 1
    assert_verified(out)
  assert {(name, sha) for name, sha, _ in pairs(out)} == on_disk(work)


def test_a_lookup_a_grown_dataset_outgrew_is_built_again_with_more_files(work, monkeypatch):
  """Each lookup file holds about ENTRIES_PER_FILE entries: once the dataset holds far more (or
  fewer) than its count suits, an update builds it again, and the next one uses it."""
  out = work / 'out'
  monkeypatch.setattr(catalog_lookup, 'ENTRIES_PER_FILE', 8)
  photos.write_files(work / 'imgs', {'cat/new.0.jpg': photos.jpeg(101)})
  assert convert('--incremental') == 0
  lookup = RunRecord.read(str(out)).catalog_lookup
  assert lookup.count == len(lookup.files) == 16
  assert sum(found.num_entries for found in lookup.files) == 2 * PER_CLASS + 1
  assert_verified(out)
  before = {found.file: found for found in lookup.files}
  (work / 'imgs/dog/dog.2.jpg').unlink()
  assert convert('--incremental') == 0
  lookup = RunRecord.read(str(out)).catalog_lookup
  changed = [found.file for found in lookup.files if before[found.file] != found]  # written again, or its delta
  assert changed == [catalog_lookup.BY_URI.file_name(catalog_lookup.BY_URI.slot('imgs/dog/dog.2.jpg', 16), 16)]
  assert_verified(out)


def test_other_options_or_an_output_without_a_catalog_give_a_full_conversion_said_in_one_line(work, capsys):
  out = work / 'out'
  capsys.readouterr()
  assert convert('--incremental', '--max_side=32') == 0
  assert capsys.readouterr().err.splitlines()[0] == (
      "--incremental: converting everything, since --max_side differs from the earlier run's")
  assert update_of(out)['full_conversion'] == "--max_side differs from the earlier run's"
  info = RunRecord.read(str(out))
  assert all(int(side) <= 32 for split in info.splits.values() for side in split.longer_side_px)
  assert convert(output='plain') == 0  # no --incremental: the usual layout
  assert convert('--incremental', output='plain') == 0
  assert 'the output was not written with --incremental' in capsys.readouterr().err
  assert not list((work / 'plain').glob('*-of-*.tfrecord'))
  assert update_of(work / 'plain')['added'] == 2 * PER_CLASS


def test_small_increments_are_merged_instead_of_piling_up(work):
  """Each increment is smaller than a shard: it leaves one small shard a split; once a split
  holds two, a run merges them (and only them)."""
  out = work / 'out'
  target = 0.03 * 2**20
  for step in range(4):
    big = {name: state for name, state in shard_states(out).items()
           if name.endswith(output_layout.SHARD_SUFFIX) and len(state[0]) >= output_layout_half(target)}
    photos.write_files(work / 'imgs', {f'cat/step{step}.{i}.jpg': photos.jpeg(200 + 10 * step + i) for i in range(3)})
    assert convert('--incremental') == 0
    info = RunRecord.read(str(out))
    for name, split in info.splits.items():
      small = [shard.file for shard in split.shards if shard.num_bytes < output_layout_half(target)]
      assert len(small) <= 2, (step, name, small)
      assert [shard.file for shard in split.shards] == [f'{name}-{i:05d}.tfrecord' for i in range(len(split.shards))]
    after = shard_states(out)
    assert all(after[name] == state for name, state in big.items()), f'a full shard was written again at {step}'
  assert_verified(out)


def output_layout_half(target: float) -> float:
  from beam_pipeline.core.output import incremental_update  # pylint: disable=import-outside-toplevel
  return incremental_update.SMALL_SHARD * target


def test_new_copies_of_kept_pictures_go_to_their_split_or_go_as_duplicates(work):
  out = work / 'out'
  split = {name: split for name, _, split in pairs(out)}
  shutil.copy(work / 'imgs/cat/cat.7.jpg', work / 'imgs/cat/copy.jpg')
  assert convert('--incremental') == 0
  now = {name: split for name, _, split in pairs(out)}
  assert now['imgs/cat/copy.jpg'] == split['imgs/cat/cat.7.jpg']
  shutil.copy(work / 'imgs/dog/dog.8.jpg', work / 'imgs/dog/copy.jpg')
  assert convert('--incremental', '--dedupe', output='deduped') == 0
  assert convert('--incremental', '--dedupe', output='deduped') == 0  # nothing changed: still dropped
  errors = [json.loads(line) for line in (work / 'deduped/errors-00000-of-00001.jsonl').read_text().splitlines()]
  # The first of each pair by uri is kept, as in any run: dog/copy.jpg before dog/dog.8.jpg.
  assert {(error['uri'], error['reason']) for error in errors} == {('imgs/cat/copy.jpg', 'duplicate'),
                                                                  ('imgs/dog/dog.8.jpg', 'duplicate')}


def resaved(path: Path, quality: int = 60) -> bytes:
  """The photo at ``path`` saved again as a JPEG of another quality: a near copy of it."""
  buffer = io.BytesIO()
  with Image.open(path) as image:
    image.save(buffer, 'JPEG', quality=quality)
  return buffer.getvalue()


def test_new_near_copies_of_kept_pictures_go_to_their_split_or_go_as_near_duplicates(work):
  """A picture saved again at another quality under a new name, after the earlier run: it goes
  where the picture is, as an exact copy would, and --near_copies=drop keeps the dataset's."""
  split = {name: split for name, _, split in pairs(work / 'out')}
  originals = [name for name in sorted(split) if split[name] == 'validation'][:4] + \
      [name for name in sorted(split) if split[name] == 'train'][:4]
  copies = {f'imgs/{name.split("/")[1]}/resaved.{i}.jpg': name for i, name in enumerate(originals)}
  for copy, original in copies.items():
    (work / copy).write_bytes(resaved(work / original))
  assert convert('--incremental') == 0
  now = {name: split for name, _, split in pairs(work / 'out')}
  assert {copy: now[copy] for copy in copies} == {copy: split[original] for copy, original in copies.items()}

  for copy in copies:
    (work / copy).unlink()
  assert convert('--incremental', '--near_copies=drop', output='dropped') == 0
  kept = {name for name, _, _ in pairs(work / 'dropped')}
  copies = {copy: original for copy, original in copies.items() if original in kept}
  assert len(copies) >= 6
  for copy, original in copies.items():
    (work / copy).write_bytes(resaved(work / original))
  assert convert('--incremental', '--near_copies=drop', output='dropped') == 0
  assert not set(copies) & {name for name, _, _ in pairs(work / 'dropped')}
  errors = [json.loads(line) for path in sorted((work / 'dropped').glob('errors-*.jsonl'))
            for line in path.read_text().splitlines()]
  found = {error['uri']: error for error in errors if error['reason'] == 'near_duplicate' and error['uri'] in copies}
  assert set(found) == set(copies)
  assert all(original in found[copy]['detail'] for copy, original in copies.items()), found


@pytest.mark.parametrize('options', [(), ('--near_copies=drop',)], ids=['group', 'drop'])
def test_after_an_update_the_run_record_lists_the_copies_a_fresh_conversion_lists(work, options):
  """The groups of identical files and of near copies, and their label conflicts, are those of
  the whole dataset, not of the files the update read: copies and near copies of kept pictures,
  new pairs among the new files, a group left with one file, one group untouched."""
  output = 'out' if not options else 'other'
  if options:
    assert convert('--incremental', *options, output=output) == 0
  shutil.copy(work / 'imgs/cat/cat.1.jpg', work / 'imgs/dog/conflict.jpg')
  shutil.copy(work / 'imgs/cat/cat.2.jpg', work / 'imgs/cat/copy.2.jpg')
  (work / 'imgs/dog/near.3.jpg').write_bytes(resaved(work / 'imgs/dog/dog.3.jpg'))
  assert convert('--incremental', *options, output=output) == 0
  (work / 'imgs/cat/copy.2.jpg').unlink()  # its group is left with one file
  shutil.copy(work / 'imgs/cat/cat.5.jpg', work / 'imgs/cat/copy.5.jpg')  # a copy of a kept picture
  photos.write_files(work / 'imgs', {'dog/new.jpg': photos.jpeg(104), 'cat/new.jpg': photos.jpeg(104)})  # a new pair
  (work / 'imgs/cat/near.6.jpg').write_bytes(resaved(work / 'imgs/cat/cat.6.jpg'))
  (work / 'imgs/dog/near.new.jpg').write_bytes(resaved(work / 'imgs/dog/new.jpg'))

  assert convert('--incremental', *options, output=output) == 0
  assert update_of(work / output)['unchanged'] > PER_CLASS  # an update, not a fresh conversion
  assert convert('--incremental', *options, output='fresh') == 0
  updated, fresh = (json.loads((work / name / output_layout.RUN_RECORD).read_text()) for name in (output, 'fresh'))
  assert updated['duplicates'] == fresh['duplicates']
  # A new picture's split is the update's to choose (it keeps each class's fractions); each group
  # lists the one its files are in.
  assert _without_splits(updated['near_duplicates']) == _without_splits(fresh['near_duplicates'])
  split = {name: split for name, _, split in pairs(work / output)}
  for group in updated['near_duplicates']['groups']:
    if 'split' in group:
      assert group['split'] == ', '.join(sorted({split[image] for image in group['images']})), group
  listed = {image for group in fresh['duplicates']['groups'] for image in group['images']}
  assert {'imgs/cat/cat.1.jpg', 'imgs/cat/cat.5.jpg', 'imgs/cat/new.jpg'} <= listed
  assert 'imgs/cat/cat.2.jpg' not in listed
  near = {image for group in fresh['near_duplicates']['groups'] for image in group['images']}
  assert {'imgs/dog/near.3.jpg', 'imgs/cat/near.6.jpg', 'imgs/dog/near.new.jpg'} <= near


def test_verify_reads_the_shards_the_last_update_wrote_and_all_of_them_when_asked(work, capsys):
  out = work / 'out'
  before = shard_states(out)
  photos.write_files(work / 'imgs', {'cat/new.0.jpg': photos.jpeg(101), 'dog/new.0.jpg': photos.jpeg(102)})
  (work / 'imgs/cat/cat.1.jpg').unlink()
  assert convert('--incremental') == 0
  info = RunRecord.read(str(out))
  written = info.update.written_files
  shards = [shard for split in info.splits.values() for shard in split.shards]
  assert 0 < len(written) < len(shards)
  after = shard_states(out)
  assert set(written) == {shard.file for shard in shards if after[shard.file] != before.get(shard.file)}
  capsys.readouterr()
  assert cli.main(['verify', str(out)]) == 0
  said = capsys.readouterr().out
  records = sum(shard.num_examples for shard in shards if shard.file in written)
  assert (f'Verified {records} records in the {len(written)} shards the update of {info.created} wrote, of {out}: '
          f'all intact; its other {len(shards) - len(written)} shards are there') in said, said
  # A kept shard whose bytes changed but not its size is read by --all only; one cut short, by both.
  kept = out / next(shard.file for shard in shards if shard.file not in written)
  data = bytearray(kept.read_bytes())
  data[len(data) // 2] ^= 0xFF
  kept.write_bytes(bytes(data))
  assert cli.main(['verify', str(out)]) == 0
  assert cli.main(['verify', str(out), '--all']) == 1
  assert kept.name in capsys.readouterr().err
  kept.write_bytes(bytes(data[:-10]))
  assert cli.main(['verify', str(out)]) == 1
  assert f'{kept.name}: {len(data) - 10} bytes, beam_pipeline.json says {len(data)}' in capsys.readouterr().err


def _without_splits(near: dict) -> dict:
  return {**near, 'groups': [{key: value for key, value in group.items() if key != 'split'}
                             for group in near['groups']]}


def test_the_class_fractions_stay_within_a_point_of_the_target(work):
  out = work / 'out'
  photos.write_files(work / 'imgs', photos.labelled(['cat', 'dog'], 25, seed=11, name='{label}/more.{i}.jpg'))
  assert convert('--incremental') == 0
  info = RunRecord.read(str(out))
  for label in ('cat', 'dog'):
    validation = info.splits['validation'].classes[label]
    total = validation + info.splits['train'].classes[label]
    assert abs(validation / total - 0.2) <= 0.01, (label, validation, total)


def test_a_failed_update_keeps_the_earlier_dataset_and_a_rerun_completes_it(work, capsys):
  out = work / 'out'
  before, marker = shard_states(out), (out / output_layout.RUN_RECORD).read_bytes()
  photos.write_files(work / 'imgs', {f'cat/new.{i}.jpg': photos.jpeg(300 + i) for i in range(3)})
  photos.write_files(work / 'imgs', {f'dog/broken.{i}.jpg': b'not a jpeg' for i in range(20)})
  (work / 'imgs/cat/cat.9.jpg').unlink()
  assert convert('--incremental') == 1
  assert 'error budget exceeded' in capsys.readouterr().err
  assert (out / output_layout.RUN_RECORD).read_bytes() == marker and shard_states(out) == before
  assert_verified(out)
  for broken in (work / 'imgs/dog').glob('broken.*'):
    broken.unlink()
  assert convert('--incremental') == 0
  update = update_of(out)
  assert (update['added'], update['removed']) == (3, 1)
  assert_verified(out)


def test_a_kill_within_the_commit_is_repaired_by_a_rerun(work):
  """Killed once the updated shards are in place, the output holds no complete dataset; the rerun
  converts it whole, and it holds what a fresh conversion holds: every photo there now, as it is."""
  out = work / 'out'
  photos.write_files(work / 'imgs', {f'dog/new.{i}.jpg': photos.jpeg(400 + i) for i in range(3)})
  (work / 'imgs/dog/dog.10.jpg').unlink()
  ended = subprocess.run([sys.executable, str(AT_POINT), 'kill', 'after:labels.txt', '--input=imgs', '--output=out',
                          *ARGS, '--incremental'], capture_output=True, text=True, timeout=600, check=False)
  assert ended.returncode == -9, ended.stderr[-2000:]
  assert not (out / output_layout.RUN_RECORD).exists()
  assert convert('--incremental') == 0
  assert update_of(out)['full_conversion'] == 'the output holds no complete dataset yet'
  assert {(name, sha) for name, sha, _ in pairs(out)} == on_disk(work)
  assert_verified(out)


def test_incremental_cannot_keep_a_number_of_shards(work, capsys):
  assert convert('--incremental', '--num_shards=4') == 2
  assert capsys.readouterr().err.splitlines() == [
      'error: --incremental adds shards as the input grows, so it cannot keep --num_shards; give one of them']


GCS_BUCKET = 'incremental'


def gs_convert(out: str, *extra: str) -> int:
  return cli.main([f'--input=gs://{GCS_BUCKET}/imgs', f'--output=gs://{GCS_BUCKET}/{out}', *ARGS, *extra])


def gs_pairs(out: str, folder: Path) -> Set[Tuple[str, str, str]]:
  """pairs() of a gs:// output, read from a local copy of it."""
  photos.write_files(folder, bucket_files(GCS_BUCKET, out))
  return pairs(folder)


def test_an_update_of_a_gs_output_through_failing_requests_keeps_the_objects_it_does_not_change(plan, tmp_path,
                                                                                               monkeypatch):
  """On Cloud Storage a kept shard is not even copied: its object keeps its generation. Every
  third download and upload of the update fails once (the client retries them)."""
  uploaded = {uri: data for uri, (_, data) in gcs_emulator.upload_photo_set(GCS_BUCKET, 'imgs/', ('cat', 'dog'),
                                                                             8).items()}
  assert gs_convert('out', '--incremental') == 0
  bucket = gcs_emulator.client().bucket(GCS_BUCKET)

  def generations():
    return {blob.name: blob.generation for blob in gcs_emulator.client().list_blobs(GCS_BUCKET, prefix='out/')
            if blob.name.endswith(('.tfrecord', '.jsonl')) and '/errors-' not in blob.name}

  before = generations()
  catalogs = [name for name in before if '/catalog/' in name and '/catalog/by_' not in name]  # not the lookups
  catalog = {json.loads(line)[0]: name for name in catalogs
             for line in bucket.blob(name).download_as_text().splitlines()}
  added = {f'imgs/cat/new.{i}.jpg': photos.jpeg(500 + i) for i in range(2)}
  gcs_emulator.upload(GCS_BUCKET, added)
  gone = f'gs://{GCS_BUCKET}/imgs/dog/dog.3.jpg'
  uploaded.update({f'gs://{GCS_BUCKET}/{name}': data for name, data in added.items()})
  del uploaded[gone]
  bucket.blob('imgs/dog/dog.3.jpg').delete()
  again = f'gs://{GCS_BUCKET}/imgs/cat/cat.1.jpg'  # uploaded again, the same bytes: a new generation
  gcs_emulator.upload(GCS_BUCKET, {'imgs/cat/cat.1.jpg': uploaded[again]})
  shorten_gcs_retries(monkeypatch, timeout=30, metadata_too=True)  # retried after 0.02-0.1 s, not seconds
  rule = plan.fail_every_nth(3, status=503, when=lambda request: (fault_proxy.is_media_download(request)
                                                                  or fault_proxy.is_upload(request)))
  assert gs_convert('out', '--incremental') == 0
  assert rule.matched >= 3
  plan.reset()
  update = json.loads(bucket.blob(f'out/{output_layout.RUN_RECORD}').download_as_text())['update']
  assert (update['added'], update['changed'], update['removed'], update['unchanged'], update['touched']) == (
      2, 0, 1, 14, 1)
  after = generations()
  rewritten = {catalog[gone], catalog[again]}
  kept = [name for name in catalogs if name not in rewritten]
  assert kept and all(after[name] == before[name] for name in kept)
  assert all(after[name.replace('catalog/', '').replace('.jsonl', '.tfrecord')] ==
             before[name.replace('catalog/', '').replace('.jsonl', '.tfrecord')] for name in kept)
  # What a fresh conversion holds: every photo there now, as it is (none is re-encoded).
  assert ({(name, sha) for name, sha, _ in gs_pairs('out', tmp_path / 'out')} ==
          {(uri, hashlib.sha256(data).hexdigest()) for uri, data in uploaded.items()})


def test_a_changed_box_changes_its_image_and_nothing_else(tmp_path, monkeypatch):
  """With COCO annotations, an image whose box moved is converted again; the others are kept."""
  monkeypatch.chdir(tmp_path)
  files = photos.labelled(['cat'], 6, seed=4, name='{i}.jpg')
  photos.write_files(tmp_path / 'imgs', files)

  def coco(first_box):
    images = [{'id': i + 1, 'file_name': name, 'width': 48, 'height': 40} for i, name in enumerate(sorted(files))]
    boxes = [first_box] + [[4, 4, 20, 20]] * (len(images) - 1)
    annotations = [{'id': i + 1, 'image_id': i + 1, 'category_id': 1, 'bbox': box, 'iscrowd': 0, 'area': 400}
                   for i, box in enumerate(boxes)]
    (tmp_path / 'coco.json').write_text(json.dumps({'images': images, 'annotations': annotations,
                                                    'categories': [{'id': 1, 'name': 'cat'}]}))

  coco([4, 4, 20, 20])
  args = ('--annotations=coco.json', '--incremental')
  assert convert(*args) == 0
  coco([10, 10, 30, 20])  # rewritten, the first box moved: the other five images stay unchanged
  assert convert(*args) == 0
  update = update_of(tmp_path / 'out')
  assert (update['changed'], update['unchanged']) == (1, 5)
  _, records = read_output(str(tmp_path / 'out'))
  moved = [record for split in records.values() for record in split if record['image/filename'] == b'imgs/0.jpg']
  assert moved[0]['image/object/bbox/xmax'] == pytest.approx(40 / 48)


def test_a_file_rejected_before_is_not_read_again_while_it_is_unchanged(work, monkeypatch):
  """The earlier errors file says what an unchanged file got: a damaged file is rejected again
  (unread: tests/pipeline/test_incremental_changes.py), and stops being listed once it is gone."""
  out = work / 'out'
  broken = work / 'imgs/cat/broken.jpg'
  broken.write_bytes(b'x' * 600)
  assert convert('--incremental') == 0
  assert update_of(out)['added'] == 1
  errors = (out / 'errors-00000-of-00001.jsonl').read_text()
  monkeypatch.setattr('beam_pipeline.cli.launch._nothing_changed', lambda *args: None)  # the pipeline compares
  assert convert('--incremental') == 0
  assert (out / 'errors-00000-of-00001.jsonl').read_text() == errors
  assert [json.loads(line)['reason'] for line in errors.splitlines()] == ['not_image']
  assert update_of(out)['added'] == 1  # nothing changed: nothing committed
  broken.unlink()
  assert convert('--incremental') == 0
  assert (out / 'errors-00000-of-00001.jsonl').read_text() == ''
  assert update_of(out)['removed'] == 1
