"""Issue 35, second pass, the inputs: nothing lost, nothing unsaid.

Through the real command, each case of the issue: class names that are not one line of
labels.txt, from every source; whitespace around class names; a compressed manifest cut short
or damaged; empty and non-text labels in a labelled manifest; an empty manifest; a manifest
naming one image twice or giving image/source_id values Model Garden cannot parse. Where
one conversion can show several cases, the tests share it (module fixtures).
"""
import csv
import gzip
import json
import os
import shutil
import zlib
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from beam_pipeline.cli import failures
from beam_pipeline.core.rejections import InputFileError
from helpers import photos
from helpers.commands import convert, error_line
from helpers.dataset_reader import local_files, read_errors, read_output

REPORT_IT = 'report it'


def _convert(source: Path, out: Path, *extra: str) -> int:
  return convert(f'--input={source}', f'--output={out}', '--skip_transform', '--max_error_fraction=1', *extra)


def _images(root: Path, names: List[str], seed: int = 0) -> List[Path]:
  """A distinct JPEG at each name under ``root``."""
  paths = []
  for name, data in zip(names, photos.jpegs(len(names), seed)):
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    paths.append(path)
  return paths


def _written(out: Path) -> Dict[str, dict]:
  """Every record of an output, by its image/filename."""
  _, records = read_output(str(out))
  return {record['image/filename'].decode(): record for split in records.values() for record in split}


def _labels_txt(out: Path) -> List[str]:
  return (out / 'labels.txt').read_text(encoding='utf-8').split('\n')[:-1]


def _assert_one_class_a_line(out: Path) -> None:
  """labels.txt read as a reader reads it (splitlines) gives the classes the records name,
  each class id its line's number, and every record has a class."""
  info, records = read_output(str(out))
  lines = (out / 'labels.txt').read_text(encoding='utf-8').splitlines()
  assert lines == _labels_txt(out) == info['labels']
  for record in (r for split in records.values() for r in split):
    if 'image/class/label' in record and 'image/object/class/label' not in record:
      assert record['image/class/label'] >= 0
      assert lines[record['image/class/label']] == record['image/class/text'].decode()
    for label, text in zip(*(_as_list(record.get(f'image/object/class/{k}', [])) for k in ('label', 'text'))):
      assert lines[label - 1] == text.decode()


def _as_list(value) -> list:
  return value if isinstance(value, list) else [value]


def _outcome(out: Path) -> Tuple[Dict[str, dict], Dict[str, dict]]:
  """(records by image/filename, rejections by uri), each uri once."""
  errors = read_errors(str(out))
  by_uri = {error['uri']: error for error in errors}
  assert len(by_uri) == len(errors)
  return _written(out), by_uri


def test_folder_labels_are_stripped_and_control_characters_rejected(tmp_path):
  """Cases 15 and 3 for folder labels. Expected: 'dog/' and ' dog /' are one class 'dog'
  (TensorFlow Datasets strips class names too); an image in 'a\\tb/' or 'x\\x85y/' (a line
  break to splitlines()) rejected as `no_label`."""
  root = tmp_path / 'in'
  dog, spaced, tab, nel = _images(root, ['dog/1.jpg', ' dog /2.jpg', 'a\tb/3.jpg', 'x\x85y/4.jpg'], seed=2)
  assert _convert(root, tmp_path / 'out') == 0
  written, errors = _outcome(tmp_path / 'out')
  assert sorted(written) == sorted([str(dog), str(spaced)])
  assert {record['image/class/text'] for record in written.values()} == {b'dog'}
  assert {uri: error['reason'] for uri, error in errors.items()} == {str(tab): 'no_label', str(nel): 'no_label'}
  assert _labels_txt(tmp_path / 'out') == ['dog']


def _coco_input(root: Path) -> List[str]:
  _images(root / 'images', ['1.jpg', '2.jpg'], seed=3)
  document = {'images': [{'id': 1, 'file_name': '1.jpg'}, {'id': 2, 'file_name': '2.jpg'}],
              'categories': [{'id': 1, 'name': 'cat'}, {'id': 2, 'name': ' cat '}, {'id': 3, 'name': 'li\nne'}],
              'annotations': [{'id': 10, 'image_id': 1, 'category_id': 1, 'bbox': [1, 1, 10, 10]},
                              {'id': 11, 'image_id': 2, 'category_id': 2, 'bbox': [1, 1, 10, 10]},
                              {'id': 12, 'image_id': 2, 'category_id': 3, 'bbox': [2, 2, 10, 10]}]}
  (root / 'instances.json').write_text(json.dumps(document))
  return [f'--input={root}/images', f'--annotations={root}/instances.json']


def _voc_input(root: Path) -> List[str]:
  _images(root / 'images', ['1.jpg', '2.jpg'], seed=3)
  (root / 'voc').mkdir()
  box = '<bndbox><xmin>1</xmin><ymin>1</ymin><xmax>11</xmax><ymax>11</ymax></bndbox>'
  for name, labels in (('1', ['cat']), ('2', [' cat ', 'li&#10;ne'])):
    objects = ''.join(f'<object><name>{label}</name>{box}</object>' for label in labels)
    (root / 'voc' / f'{name}.xml').write_text(f'<annotation><filename>{name}.jpg</filename>{objects}</annotation>')
  return [f'--input={root}/images', f'--annotations={root}/voc']


def _automl_input(root: Path) -> List[str]:
  _images(root / 'images', ['1.jpg', '2.jpg'], seed=3)
  with open(root / 'boxes.csv', 'w', newline='', encoding='utf-8') as f:
    csv.writer(f).writerows([['TRAIN', 'images/1.jpg', 'cat', '0.1', '0.1', '', '', '0.5', '0.5', '', ''],
                             ['TRAIN', 'images/2.jpg', ' cat ', '0.1', '0.1', '', '', '0.5', '0.5', '', ''],
                             ['TRAIN', 'images/2.jpg', 'li\nne', '0.2', '0.2', '', '', '0.6', '0.6', '', '']])
  return [f'--input={root}/boxes.csv']


@pytest.mark.parametrize('source', [_coco_input, _voc_input, _automl_input], ids=['coco', 'voc', 'automl'])
def test_detection_class_names_with_a_line_break_are_rejected_and_names_stripped(tmp_path, source):
  """Cases 3 and 15 for boxes: a COCO category, a VOC <name> (li&#10;ne) and an AutoML
  detection row's label 'li\\nne'. Expected: that box left out, an error of its annotation
  (`bad_annotation`) or row (`bad_manifest_row`) saying 'line break'; ' cat ' is 'cat';
  labels.txt and label_map.pbtxt hold the one class; both images written."""
  args = source(tmp_path)
  assert convert(*args, f'--output={tmp_path}/out', '--skip_transform', '--max_error_fraction=1') == 0
  written, errors = _written(tmp_path / 'out'), read_errors(str(tmp_path / 'out'))
  assert len(written) == 2
  assert [record['image/object/class/text'] for record in written.values()] == [b'cat', b'cat']
  assert _labels_txt(tmp_path / 'out') == ['cat']
  assert (tmp_path / 'out' / 'label_map.pbtxt').read_text().count('item {') == 1
  assert any(error['reason'] in ('bad_annotation', 'bad_manifest_row') and 'line break' in error['detail']
             for error in errors), errors
  _assert_one_class_a_line(tmp_path / 'out')


# Cases 3, 5, 9 and 15 in a JSONL manifest: (label, extra fields), and what becomes of the row.
JSONL_ROWS = [
    ('a.jpg', 'dog', {}, 'written'),
    ('b.jpg', ' dog', {}, 'written'),  # 15: the class 'dog'
    ('c.jpg', 'li\nne', {}, 'no_label'),
    ('d.jpg', 'x\u2028y', {}, 'no_label'),  # 3: a line separator, which splitlines() breaks on
    ('e.jpg', 'x\ty', {}, 'no_label'),  # 3: a control character
    ('f.jpg', None, {}, 'no_label'),  # 5: "label": null
    ('g.jpg', '', {}, 'no_label'),  # 5: an empty label
    ('h.jpg', {'a': 1}, {}, 'bad_manifest_row'),  # 5: not text
    ('i.jpg', True, {}, 'bad_manifest_row'),  # 5: not text
    ('j.jpg', 3, {}, 'written'),  # a whole number is its digits, the class '3', as before
    ('a.jpg', 'cat', {}, 'duplicate_row'),  # 9: line 1 again
    ('k.jpg', 'cat', {'image/source_id': 'abc'}, 'bad_manifest_row'),  # 9: not a decimal
    ('l.jpg', 'cat', {'image/source_id': 17}, 'written'),
    ('m.jpg', 'cat', {'image/source_id': '0017'}, 'bad_manifest_row'),  # 9: line 13's id again
    ('n.jpg', 'cat', {'image/source_id': '18'}, 'written'),
]


@pytest.fixture(scope='module')
def jsonl_run(tmp_path_factory) -> Path:
  root = tmp_path_factory.mktemp('jsonl')
  _images(root / 'imgs', sorted({name for name, *_ in JSONL_ROWS}))
  lines = [json.dumps({'uri': f'imgs/{name}', 'label': label, **extra}) for name, label, extra, _ in JSONL_ROWS]
  (root / 'manifest.jsonl').write_text('\n'.join(lines) + '\n')
  assert _convert(root / 'manifest.jsonl', root / 'out') == 0
  return root


def test_jsonl_labels_empty_null_or_not_text_are_rejected_never_minus_one(jsonl_run):
  """Cases 3, 5, 15. Expected: null, empty and line-breaking labels rejected as `no_label`, a
  dict or a bool as `bad_manifest_row` naming its type; ' dog' is 'dog'; 3 is the class '3';
  every record has a class of labels.txt, whose lines are the classes, one a line; the
  classes' counts sum to the examples."""
  written, errors = _outcome(jsonl_run / 'out')
  images = str(jsonl_run / 'imgs')
  for name, _, _, outcome in JSONL_ROWS[:10]:
    uri = f'{images}/{name}'
    if outcome == 'written':
      assert uri in written, name
    elif outcome == 'bad_manifest_row':
      line = JSONL_ROWS.index(next(row for row in JSONL_ROWS if row[0] == name)) + 1
      assert errors[f'{jsonl_run}/manifest.jsonl:line {line}']['reason'] == outcome, name
    else:
      assert errors[uri]['reason'] == outcome, name
  assert 'an object, not text' in errors[f'{jsonl_run}/manifest.jsonl:line 8']['detail']
  assert 'true or false, not text' in errors[f'{jsonl_run}/manifest.jsonl:line 9']['detail']
  assert 'line break' in errors[f'{images}/d.jpg']['detail']
  assert 'control character U+0009' in errors[f'{images}/e.jpg']['detail']
  assert 'empty label' in errors[f'{images}/f.jpg']['detail']
  assert _labels_txt(jsonl_run / 'out') == ['3', 'cat', 'dog']
  assert written[f'{images}/b.jpg']['image/class/text'] == b'dog'
  assert written[f'{images}/j.jpg']['image/class/text'] == b'3'
  _assert_one_class_a_line(jsonl_run / 'out')
  info = json.loads((jsonl_run / 'out' / 'beam_pipeline.json').read_text())
  assert sum(info['splits']['train']['classes'].values()) == info['num_examples'] == len(written)


def test_a_repeated_uri_and_given_source_ids_keep_every_source_id_unique_and_decimal(jsonl_run):
  """Case 9. Expected: line 11, naming line 1's image again, rejected as `duplicate_row` naming
  both lines and both labels; a given image/source_id that is no decimal, or is an earlier
  line's, rejected as `bad_manifest_row`; a given one stored as its decimal text; every
  record's image/source_id a distinct decimal int64."""
  written, errors = _outcome(jsonl_run / 'out')
  manifest = f'{jsonl_run}/manifest.jsonl'
  repeated = errors[f'{manifest}:line 11']
  assert repeated['reason'] == 'duplicate_row'
  assert f'{manifest}:line 1 names it first' in repeated['detail'] and "'cat'" in repeated['detail']
  assert written[f'{jsonl_run}/imgs/a.jpg']['image/class/text'] == b'dog'
  assert errors[f'{jsonl_run}/imgs/k.jpg']['reason'] == 'bad_manifest_row'
  assert 'is not a decimal number' in errors[f'{jsonl_run}/imgs/k.jpg']['detail']
  again = errors[f'{manifest}:line 14']
  assert again['reason'] == 'bad_manifest_row' and f'{manifest}:line 13' in again['detail']
  assert written[f'{jsonl_run}/imgs/l.jpg']['image/source_id'] == b'17'
  assert written[f'{jsonl_run}/imgs/n.jpg']['image/source_id'] == b'18'
  source_ids = [record['image/source_id'] for record in written.values()]
  assert len(set(source_ids)) == len(source_ids)
  assert all(source_id.isdigit() and int(source_id) < 2**63 for source_id in source_ids)
  info = json.loads((jsonl_run / 'out' / 'beam_pipeline.json').read_text())
  assert info['num_examples'] + info['num_errors'] == len(JSONL_ROWS)


@pytest.fixture(scope='module')
def csv_run(tmp_path_factory) -> Path:
  """An AutoML-layout CSV: an empty label cell, a label with a vertical tab, one image twice."""
  root = tmp_path_factory.mktemp('csv')
  _images(root / 'imgs', ['1.jpg', '2.jpg', '3.jpg', '4.jpg'], seed=1)
  with open(root / 'manifest.csv', 'w', newline='', encoding='utf-8') as f:
    csv.writer(f).writerows([['imgs/1.jpg', 'cat'], ['imgs/2.jpg', ''], ['imgs/3.jpg', 'x\x0by'], ['imgs/4.jpg', 'dog'],
                             ['imgs/1.jpg', 'cat']])
  assert _convert(root / 'manifest.csv', root / 'out') == 0
  return root


def test_an_empty_label_cell_and_a_repeated_row_of_a_csv_manifest_are_rejected(csv_run):
  """Cases 3, 5, 9 in CSV. Expected: `imgs/2.jpg,` rejected as `no_label`; a label holding a
  vertical tab (a line break to splitlines()) as `no_label`; row 5, row 1 again, as
  `duplicate_row` naming both rows; two records, labels.txt cat and dog."""
  written, errors = _outcome(csv_run / 'out')
  assert sorted(written) == [f'{csv_run}/imgs/1.jpg', f'{csv_run}/imgs/4.jpg']
  assert errors[f'{csv_run}/imgs/2.jpg']['reason'] == 'no_label'
  assert errors[f'{csv_run}/imgs/3.jpg']['reason'] == 'no_label'
  repeated = errors[f'{csv_run}/manifest.csv:row 5']
  assert repeated['reason'] == 'duplicate_row' and f'{csv_run}/manifest.csv:row 1 names it first' in repeated['detail']
  assert _labels_txt(csv_run / 'out') == ['cat', 'dog']
  _assert_one_class_a_line(csv_run / 'out')


@pytest.fixture(scope='module')
def earlier(tmp_path_factory) -> Path:
  """A complete output of an earlier run."""
  root = tmp_path_factory.mktemp('earlier')
  _images(root / 'in', ['cat/1.jpg', 'dog/2.jpg'], seed=4)
  assert _convert(root / 'in', root / 'out') == 0
  return root / 'out'


def _dataset(out: Path) -> Dict[str, bytes]:
  """An output's files but its hidden ones (a run's staging)."""
  return {name: data for name, data in local_files(out).items() if not name.startswith('.')}


def _gzipped(rows: List[str], cut_after: int) -> Tuple[bytes, int]:
  """The rows gzipped, with a full flush after the first ``cut_after`` rows: (the data, the offset
  of that flush point), where a cut leaves a stream that decompresses cleanly up to it."""
  compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
  data = compressor.compress(''.join(rows[:cut_after]).encode()) + compressor.flush(zlib.Z_FULL_FLUSH)
  flush_point = len(data)
  return data + compressor.compress(''.join(rows[cut_after:]).encode()) + compressor.flush(), flush_point


def _large_manifest(root: Path, kind: str) -> List[str]:
  """300 rows over 6 images, each long enough that the cut lies far past what the launch reads."""
  _images(root / 'imgs', [f'{i}.jpg' for i in range(6)], seed=5)
  note = 'n' * 200
  if kind == 'csv':
    return ['uri,label,note\n'] + [f'imgs/{i % 6}.jpg,c{i % 2},{note}{i}\n' for i in range(300)]
  return [json.dumps({'uri': f'imgs/{i % 6}.jpg', 'label': f'c{i % 2}', 'note': f'{note}{i}'}) + '\n'
          for i in range(300)]


def _truncated_large(root: Path, kind: str) -> Path:
  data, flush_point = _gzipped(_large_manifest(root, kind), 150)
  path = root / f'manifest.{kind}.gz'
  path.write_bytes(data[:flush_point])
  return path


def _damaged_large(root: Path, kind: str) -> Path:
  data, flush_point = _gzipped(_large_manifest(root, kind), 150)
  damaged = bytearray(data)
  for offset in range(flush_point + 10, flush_point + 40):
    damaged[offset] ^= 0x55
  path = root / f'manifest.{kind}.gz'
  path.write_bytes(bytes(damaged))
  return path


def _truncated_small(root: Path, kind: str) -> Path:
  _images(root / 'imgs', ['0.jpg'], seed=5)
  row = json.dumps({'uri': 'imgs/0.jpg', 'label': 'cat'}) + '\n' if kind == 'jsonl' else 'imgs/0.jpg,cat\n'
  rows = [row] * 20
  data, flush_point = _gzipped(rows, 10)
  path = root / f'manifest.{kind}.gz'
  path.write_bytes(data[:flush_point])
  return path


def _not_gzip(root: Path, kind: str) -> Path:
  _images(root / 'imgs', ['0.jpg'], seed=5)
  path = root / f'manifest.{kind}.gz'
  path.write_text('imgs/0.jpg,cat\n' if kind == 'csv' else '{"uri": "imgs/0.jpg"}\n')
  return path


@pytest.mark.parametrize('make, kind, says', [
    (_truncated_large, 'csv', 'is cut short'),  # found by the worker that lists it, before the commit
    (_damaged_large, 'jsonl', 'is damaged'),
    (_damaged_large, 'csv', 'is damaged'),
    (_truncated_small, 'jsonl', 'is cut short'),  # found at launch, from its first rows
    (_not_gzip, 'csv', 'is not gzip data'),
], ids=['csv-cut-in-run', 'jsonl-damaged-in-run', 'csv-damaged-in-run', 'jsonl-cut-at-launch', 'csv-not-gzip'])
def test_a_compressed_manifest_cut_short_or_damaged_fails_the_run_and_keeps_the_earlier_dataset(
    earlier, tmp_path, capsys, make, kind, says):
  """Cases 4 and 12. A .csv.gz or .jsonl.gz cut at a flush point (zcat: "unexpected end of
  file"), damaged, or not gzip at all. Expected: exit code 2, one `error:` line naming the
  file, the cause and what to do, never "report it"; the earlier dataset as it was. (The
  earlier one was made from another input: --overwrite lets the run reach the manifest.)"""
  manifest = make(tmp_path, kind)
  out = tmp_path / 'out'
  shutil.copytree(earlier, out)
  before = _dataset(out)
  capsys.readouterr()
  returncode = _convert(manifest, out, '--overwrite')
  stderr = capsys.readouterr().err
  assert returncode == 2, stderr
  line = error_line(stderr)
  assert line.startswith(f'error: --input={manifest} {says}') and 'then rerun' in line, line
  assert REPORT_IT not in stderr
  assert _dataset(out) == before


def test_a_worker_error_of_an_input_file_wrapped_by_a_runner_is_the_users_exit_2(tmp_path, capsys):
  """Dataflow hands a worker's exception back as text, the traceback around it. Expected: its
  InputFileError's message on one `error:` line, without the step, and exit code 2."""
  message = '--input=gs://b/m.csv.gz is cut short: its gzip data ends; copy it again, then rerun'
  wrapped = RuntimeError(f"Traceback (most recent call last):\n  File \"x.py\", line 1\n"
                         f"beam_pipeline.core.rejections.{InputFileError.__name__}: {message} "
                         f"[while running 'List/FlatMap(batches_counted)']\n")
  assert failures.report(wrapped, str(tmp_path / 'out'), 'a-run', None) == 2
  stderr = capsys.readouterr().err
  assert error_line(stderr) == f'error: {message}' and REPORT_IT not in stderr


EMPTY_MANIFESTS = [
    ('empty.csv', b'', 'is empty'),
    ('header.csv', b'uri,label\n', 'holds only a header row'),
    ('header-and-blanks.csv', b'image_path,label,split\n\n,,\n\n', 'holds only a header row'),
    ('blank.jsonl', b'\n  \n\t\n\n', 'holds only blank lines'),
    ('empty.jsonl', b'', 'is empty'),
    ('empty.csv.gz', gzip.compress(b'', mtime=0), 'is empty'),
    ('blank.jsonl.gz', gzip.compress(b'\n\n', mtime=0), 'holds only blank lines'),
]


@pytest.mark.parametrize('name, content, says', EMPTY_MANIFESTS, ids=[name for name, *_ in EMPTY_MANIFESTS])
def test_an_empty_manifest_fails_at_launch_and_keeps_the_earlier_dataset(earlier, tmp_path, capsys, name, content,
                                                                         says):
  """Case 6. Expected, as for an empty input folder: exit code 2 before any work, one `error:`
  line naming the manifest and what it holds; the earlier dataset as it was, no staging."""
  manifest = tmp_path / name
  manifest.write_bytes(content)
  out = tmp_path / 'out'
  shutil.copytree(earlier, out)
  before = local_files(out)
  capsys.readouterr()
  assert _convert(manifest, out) == 2
  assert error_line(capsys.readouterr().err) == (
      f'error: --input={manifest} {says}: it names no image; give a manifest with a row per image')
  assert local_files(out) == before and sorted(os.listdir(out)) == sorted(os.listdir(earlier))
