"""Input kinds and manifest parsing, without a runner."""
import csv
import gzip
import json
import os

import pytest
from apache_beam.io.filesystems import FileSystems

from beam_pipeline.pipeline.listing import inputs, local_files, parts
from beam_pipeline.core import settings
from beam_pipeline.core.inputs import manifest_parts
from beam_pipeline.core.messages import InputItem, Rejection
from beam_pipeline.core.user_errors import UsageError


def list_inputs(spec, output=None, part_bytes=manifest_parts.PART_BYTES):
  """All items of an input, part after part, as the pipeline lists them on its workers."""
  for part in parts.input_parts(spec, part_bytes):
    yield from parts.list_part(part, output)


@pytest.fixture
def tree(tmp_path):
  for name in ('Cat/1.jpg', 'Cat/sub/2.jpg', 'Dog/3.png', 'Thumbs.db'):
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_bytes(b'x')
  return tmp_path


def _uris(spec):
  return sorted(item.uri for item in list_inputs(spec))


def test_directory_is_walked_recursively_including_non_images(tree):
  spec = inputs.resolve_input(str(tree))
  assert spec.kind == settings.DIRECTORY
  assert _uris(spec) == sorted(str(tree / n) for n in ('Cat/1.jpg', 'Cat/sub/2.jpg', 'Dog/3.png', 'Thumbs.db'))
  assert _outcomes(spec)['Thumbs.db'] == 'skipped'
  assert inputs.resolve_input(str(tree) + '/') == spec


def _outcomes(spec):
  return {os.path.basename(item.uri): getattr(item, 'reason', 'listed') for item in list_inputs(spec)}


def test_a_folder_or_glob_skips_what_is_no_image_and_a_manifest_or_a_named_file_does_not(tmp_path):
  """Skipped files come out as rejections (reason skipped); names are read below the folder
  listed, so a folder that is itself hidden (~/.keras/datasets/flowers) lists its photos."""
  root = tmp_path / '.keras' / 'flowers'
  for name in ('cat/1.jpg', 'cat/._1.jpg', '.DS_Store', 'notes.txt', '.git/HEAD', 'dog/IMG_0002'):
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_bytes(b'x')
  skipped = {'._1.jpg': 'skipped', '.DS_Store': 'skipped', 'notes.txt': 'skipped', 'HEAD': 'skipped'}
  expected = {'1.jpg': 'listed', 'IMG_0002': 'listed', **skipped}
  assert _outcomes(inputs.resolve_input(str(root))) == expected
  assert _outcomes(inputs.resolve_input(f'{root}/**')) == expected
  assert _outcomes(inputs.resolve_input(f'{root}/cat/*.jpg')) == {'1.jpg': 'listed', '._1.jpg': 'skipped'}
  assert _outcomes(inputs.resolve_input(f'{root}/.DS_Store')) == {'.DS_Store': 'listed'}  # named, not found
  manifest = tmp_path / 'named.csv'
  manifest.write_text(f'{root}/.DS_Store,cat\n{root}/notes.txt,cat\n')
  assert _outcomes(inputs.resolve_input(str(manifest))) == {'.DS_Store': 'listed', 'notes.txt': 'listed'}


def test_a_folder_of_no_images_fails_fast_with_one_line(tmp_path):
  for name in ('.DS_Store', 'notes.txt', 'Thumbs.db'):
    (tmp_path / 'in' / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / 'in' / name).write_bytes(b'x')
  for value in (f'{tmp_path}/in', f'{tmp_path}/in/*'):
    with pytest.raises(UsageError, match=r'holds no image: its 3 file\(s\) are all skipped as no images \(first: '):
      inputs.resolve_input(value)


def test_glob_and_single_file(tree):
  spec = inputs.resolve_input(str(tree / '**' / '*.jpg'))
  assert spec.kind == settings.GLOB
  assert _uris(spec) == [str(tree / 'Cat/1.jpg'), str(tree / 'Cat/sub/2.jpg')]
  assert _uris(inputs.resolve_input(str(tree / 'Dog/3.png'))) == [str(tree / 'Dog/3.png')]


@pytest.mark.parametrize('pattern, expected', [
    ('*/*.jpg', ['Cat/1.jpg']),  # '*' stays within one directory, as in Beam
    ('**.jpg', ['Cat/1.jpg', 'Cat/sub/2.jpg']),  # '**' crosses directories
    ('[CD]*/*', ['Cat/1.jpg', 'Dog/3.png']),
    ('Thumbs.d?', ['Thumbs.db']),
])
def test_local_globs_match_like_beam_absolute_and_relative(tree, monkeypatch, pattern, expected):
  absolute = sorted(local_files.match_local_glob(f'{tree}/{pattern}'))
  assert absolute == [str(tree / name) for name in expected]
  assert absolute == sorted(m.path for m in FileSystems.match([f'{tree}/{pattern}'])[0].metadata_list)
  monkeypatch.chdir(tree)
  assert sorted(local_files.match_local_glob(pattern)) == expected


def test_a_single_local_file_is_matched_without_listing_its_directory(tree):
  os.symlink('nowhere.jpg', tree / 'dangling.jpg')
  assert list(local_files.match_local_glob(str(tree / 'Dog/3.png'))) == [str(tree / 'Dog/3.png')]
  assert list(local_files.match_local_glob(str(tree / 'dangling.jpg'))) == [str(tree / 'dangling.jpg')]
  assert list(local_files.match_local_glob(str(tree / 'missing.jpg'))) == []
  assert list(local_files.match_local_glob(str(tree / 'Cat'))) == []  # a directory is no file


@pytest.mark.parametrize('make, message', [
    (lambda p: str(p / 'missing'), 'does not exist'),
    (lambda p: '/no-such-top-level-directory', 'does not exist'),  # without walking / to look for it
    (lambda p: str(p / '*.nothing'), 'matches no files'),
    (lambda p: str(p / 'empty'), 'empty directory'),
    (lambda p: str(p / 'missing.csv'), 'manifest not found'),
    (lambda p: '', '--input is required'),
])
def test_bad_inputs_fail_fast_with_one_line(tmp_path, make, message):
  (tmp_path / 'empty').mkdir()
  with pytest.raises(UsageError) as raised:
    inputs.resolve_input(make(tmp_path))
  assert message in str(raised.value) and '\n' not in str(raised.value)


def _read(path):
  return list(list_inputs(inputs.resolve_input(str(path))))


def test_automl_csv_without_header(tmp_path):
  manifest = tmp_path / 'data.csv'
  manifest.write_text('TRAIN,gs://b/a.jpg,cat\n'
                      'validation,gs://b/b.jpg,dog\n'
                      'UNASSIGNED,gs://b/c.jpg,\n'
                      'gs://b/d.jpg,cat\n'
                      'rel/e.jpg\n'
                      '\n'
                      'TEST,gs://b/f.jpg,cat,dog\n')
  items = _read(manifest)
  assert items[:5] == [
      InputItem('gs://b/a.jpg', 'cat', 'train', row=1),
      InputItem('gs://b/b.jpg', 'dog', 'validation', row=2),
      InputItem('gs://b/c.jpg', '', None, row=3),  # an empty label cell: no label (labels.label_for rejects it)
      InputItem('gs://b/d.jpg', 'cat', None, row=4),
      InputItem(str(tmp_path / 'rel/e.jpg'), None, None, row=5),  # no label cell: an unlabelled row
  ]
  assert isinstance(items[5], Rejection) and items[5].reason == 'bad_manifest_row'
  assert items[5].uri == f'{manifest}:row 7'


def test_csv_with_header_passes_extra_columns_and_quoted_names(tmp_path):
  manifest = tmp_path / 'data.csv'
  manifest.write_text('set,image_path,label,source\n'
                      'TRAIN,"a, ""quoted""\nname.jpg",cat,web\n'
                      'TRAIN,b.jpg,dog\n'
                      'BOGUS,c.jpg,dog,web\n', encoding='utf-8')
  first, short, bogus = _read(manifest)
  assert first == InputItem(str(tmp_path / 'a, "quoted"\nname.jpg'), 'cat', 'train', (('source', 'web'),), row=2)
  assert short.reason == 'bad_manifest_row' and '3 fields' in short.detail
  assert bogus.reason == 'bad_manifest_row' and 'BOGUS' in bogus.detail


def test_jsonl_with_extras_and_bad_lines(tmp_path):
  manifest = tmp_path / 'data.jsonl'
  lines = [json.dumps({'uri': 'gs://b/é.jpg', 'label': 3, 'split': 'TEST', 'weight': 0.5, 'tags': ['x', 'y']}),
           '{not json', json.dumps(['a list']), json.dumps({'label': 'cat'}), '']
  manifest.write_text('\n'.join(lines) + '\n', encoding='utf-8')
  item, bad_json, not_object, no_uri = _read(manifest)
  assert item == InputItem('gs://b/é.jpg', '3', 'test', (('tags', ['x', 'y']), ('weight', 0.5)), row=1)
  assert [r.reason for r in (bad_json, not_object, no_uri)] == ['bad_manifest_row'] * 3
  assert bad_json.uri == f'{manifest}:line 2'


def test_gzipped_manifest(tmp_path):
  manifest = tmp_path / 'data.jsonl.gz'
  manifest.write_bytes(gzip.compress(b'{"uri": "gs://b/a.jpg", "label": "cat"}\n'))
  assert _read(manifest) == [InputItem('gs://b/a.jpg', 'cat', None, row=1)]


def test_batches_hold_items_only_and_unusable_rows_come_out_alone(tmp_path):
  manifest = tmp_path / 'data.jsonl'
  rows = [json.dumps({'uri': f'gs://b/{i}.jpg'}) if i % 4 else 'not json' for i in range(10)]
  manifest.write_text('\n'.join(rows) + '\n')
  [part] = parts.input_parts(inputs.resolve_input(str(manifest)))
  out = list(parts.list_input_batches(part, size=3))
  batches = [b for b in out if isinstance(b, list)]
  assert [len(b) for b in batches] == [3, 3, 1]
  assert all(isinstance(item, InputItem) for b in batches for item in b)
  assert [r.reason for r in out if isinstance(r, Rejection)] == ['bad_manifest_row'] * 3


def test_a_row_the_csv_reader_refuses_is_rejected_alone(tmp_path):
  """A field past csv's size limit (an unterminated quote running to the end of a huge line)
  makes the csv module raise for that row; the rows before and after are listed."""
  manifest = tmp_path / 'data.csv'
  huge = '"' + 'x' * (csv.field_size_limit() + 10)
  manifest.write_text(f'TRAIN,gs://b/a.jpg,cat\nTRAIN,{huge}\n', encoding='utf-8')
  with open(manifest, 'a', encoding='utf-8') as f:
    f.write('TRAIN,gs://b/c.jpg,dog\n')
  items = _read(manifest)
  assert items[0] == InputItem('gs://b/a.jpg', 'cat', 'train', row=1)
  assert isinstance(items[1], Rejection) and items[1].reason == 'bad_manifest_row'
  assert items[1].uri == f'{manifest}:row 2' and 'not valid CSV' in items[1].detail
  assert items[-1] == InputItem('gs://b/c.jpg', 'dog', 'train', row=3)


def test_the_output_is_left_out_of_an_input_it_lies_in(tmp_path):
  """Only an output under the input's listing root is left out; one beside it, whose name the
  input's name begins, is not."""
  for name in ('in/a.jpg', 'in/out/train-00000-of-00001.tfrecord', 'in/out/x/y.jpg', 'in-out/b.jpg'):
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_bytes(b'x')

  def listed(spec, out):
    return sorted(os.path.relpath(item.uri, tmp_path) for item in list_inputs(spec, out))

  directory = inputs.resolve_input(str(tmp_path / 'in'))
  assert listed(directory, str(tmp_path / 'in' / 'out')) == ['in/a.jpg']
  assert listed(directory, str(tmp_path / 'in-out')) == ['in/a.jpg', 'in/out/train-00000-of-00001.tfrecord',
                                                         'in/out/x/y.jpg']
  glob = inputs.resolve_input(str(tmp_path / '**.jpg'))
  assert listed(glob, str(tmp_path / 'in' / 'out')) == ['in-out/b.jpg', 'in/a.jpg']


@pytest.mark.parametrize('kind', ['csv', 'jsonl'])
def test_a_manifest_listed_in_many_parts_lists_what_it_lists_whole(tmp_path, kind):
  """Parts are byte ranges read by different workers: together they list every row once,
  and a bad row is named by the same row number as when the manifest is read whole."""
  rows = []
  for i in range(200):
    note = 'two\nlines' if i % 7 == 0 else 'x'
    if kind == 'csv':
      rows.append('TRAIN,a.jpg,cat,dog' if i % 13 == 5 else f'"{i}.jpg",cat,"{note}"')
    else:
      rows.append('not json' if i % 13 == 5 else json.dumps({'uri': f'{i}.jpg', 'label': 'cat', 'note': note}))
  header = 'uri,label,note\n' if kind == 'csv' else ''
  manifest = tmp_path / f'data.{kind}'
  manifest.write_text(header + '\n'.join(rows) + '\n')
  spec = inputs.resolve_input(str(manifest))
  whole = list(list_inputs(spec, part_bytes=10**9))
  assert len(list(parts.input_parts(spec, part_bytes=500))) > 5
  assert list(list_inputs(spec, part_bytes=500)) == whole
  assert len(whole) == 200 and sum(isinstance(r, Rejection) for r in whole) == 15
