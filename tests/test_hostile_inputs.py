"""Hostile inputs: symlink loops, pipes, odd file names, empty and huge files, bombs, huge metadata.

Every test states, file by file, the outcome it expects: written (once, with
``image/filename`` equal to the input's path) or rejected with a given reason.
Every input is accounted for exactly once: written or in the errors file, never
both, never twice, never missing. Runs that could hang or blow up memory run the
real command in a subprocess, with a timeout and its peak RSS measured.
"""
import csv
import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Tuple

import pytest
import tensorflow as tf

from PIL import Image

from beam_pipeline import cli
from beam_pipeline.core import steps
from beam_pipeline.core.images import preparation, tensorflow_decoding
from beam_pipeline.core.messages import InputItem
from helpers import hostile_files, peak_memory, photos
from helpers.commands import command, started
from helpers.dataset_reader import read_errors, read_output
from helpers.values import settings
WRITTEN = None  # the expected outcome of an input that must become a record
MiB = 2**20
SUBPROCESS_TIMEOUT = 240
# Peak memory allowed to a whole conversion run (all its processes), and to its largest process:
# a coarse bound against runaway memory. The largest process, the workers' forkserver, holds
# about 180 MB of its own (RssAnon) and 370-470 MB of TensorFlow's and Beam's library files
# (RssFile): the same packages measure up to 100 MB more when freshly installed, and a clean
# clone's CI run measured 749 and 774 MB where a developer's environment measures 534. What a
# read of an oversized file or a bomb would add is bounded where it can be told apart, by the
# step's own peak memory growth (test_an_oversized_file_is_rejected_by_its_size_without_being_read,
# test_bomb_headers_are_rejected_from_the_header_alone).
MAX_MEMORY_MB = 1024


def convert(source, out, *extra: str) -> int:
  return cli.main([f'--input={source}', f'--output={out}', '--runner=DirectRunner', '--skip_transform',
                   '--max_error_fraction=1', *extra])


def write(path: Path, data: bytes) -> Path:
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_bytes(data)
  return path


def sparse_file(path: Path, size: int) -> Path:
  """A file of ``size`` bytes that takes no disk space: seek, then write the last byte."""
  path.parent.mkdir(parents=True, exist_ok=True)
  with open(path, 'wb') as f:
    f.seek(size - 1)
    f.write(b'\0')
  return path


def outcomes(out: Path) -> Dict[str, Tuple[str, dict]]:
  """uri -> ('written', record) or (reason, error line); fails on any uri seen twice."""
  info, records = read_output(str(out))
  found: Dict[str, Tuple[str, dict]] = {}
  for split_records in records.values():
    for record in split_records:
      uri = record['image/filename'].decode('utf-8')
      assert uri not in found, f'{uri!r} written twice'
      found[uri] = ('written', record)
  for error in read_errors(str(out)):
    assert error['uri'] not in found, f'{error["uri"]!r} rejected twice, or written and rejected'
    found[error['uri']] = (error['reason'], error)
  assert info['num_examples'] + info['num_errors'] + (info.get('num_skipped') or 0) == len(found)
  return found


def assert_outcomes(out: Path, expected: Dict[str, Optional[str]]) -> Dict[str, Tuple[str, dict]]:
  """Each expected uri exactly once, with its expected outcome, and nothing else."""
  found = outcomes(out)
  assert sorted(found) == sorted(expected), 'inputs lost, invented or renamed'
  wrong = {uri: (found[uri][0], found[uri][1] if found[uri][0] != 'written' else '')
           for uri, reason in expected.items() if found[uri][0] != (reason or 'written')}
  assert not wrong, f'unexpected outcomes: {wrong}'
  for outcome, record in found.values():
    if outcome == 'written':
      shape = tf.io.decode_image(record['image/encoded'], channels=3, expand_animations=False).shape
      assert shape == (record['image/height'], record['image/width'], 3)
  return found


class Measured(NamedTuple):
  returncode: int
  seconds: float
  largest_process_mb: float  # the peak RSS of the largest process of the run (its workers included)
  peak_memory_mb: float  # the peak of all its processes' summed PSS, sampled
  output: str
  largest_sampled: str  # which process had the largest peak RSS among those sampled, and that peak

  def assert_memory_within(self, limit_mb: float) -> None:
    assert self.largest_process_mb < limit_mb, (f'a process of the run peaked at {self.largest_process_mb:.0f} MB '
                                                f'(sampled: {self.largest_sampled})')
    assert self.peak_memory_mb < limit_mb, f'the run held {self.peak_memory_mb:.0f} MB'


def run_measured(source, out: Path, *extra: str) -> Measured:
  """The real command in a subprocess: exit code, wall time and peak memory of every
  process of the run (benchmarks.measure, a small parent, so that pytest's own
  memory does not count)."""
  log, measured = out.parent / f'{out.name}.log', out.parent / f'{out.name}.memory.json'
  argv = [sys.executable, '-m', 'benchmarks.measure', str(measured),
          *command(f'--input={source}', f'--output={out}', '--runner=DirectRunner', '--skip_transform',
                   '--max_error_fraction=1', *extra)]
  start = time.monotonic()
  with started(argv, log) as process:
    try:
      process.wait(timeout=SUBPROCESS_TIMEOUT)
    except subprocess.TimeoutExpired:
      raise AssertionError(f'{argv} still running after {SUBPROCESS_TIMEOUT}s') from None
  seconds = time.monotonic() - start
  result = json.loads(measured.read_text())
  largest = result['largest_sampled']
  return Measured(result['returncode'], seconds, result['max_process_rss_mb'], result['peak_pss_mb'],
                  log.read_text(errors='replace'), f"{largest['mb']:.0f} MB, {largest['command']}")


VIDEOS = 24  # sparse, 300 MB each, in the hostile run


def photo(seed: int) -> bytes:
  return photos.jpeg(seed, 40, 30, quality=90)


# --------------------------------------------------------------------------------------------
# Symlinks and pipes


LOOP_LABELS = ('cat', 'dog', 'bird')


def symlink_loops(root: Path) -> Dict[str, Optional[str]]:
  """Folders LOOP_LABELS of the input ``root``, with directory symlinks to themselves, to their
  parent, to ``root``, and a two-directory cycle, beside 6 real images: each one's expected outcome."""
  expected: Dict[str, Optional[str]] = {}
  for label in LOOP_LABELS:
    for i in range(2):
      expected[str(write(root / label / f'{i}.jpg', photo(i)))] = WRITTEN
  for link, target in [('cat/itself', '.'), ('dog/parent', '..'), ('bird/root', str(root)),
                       ('cat/to-dog', '../dog'), ('dog/to-cat', '../cat')]:
    os.symlink(target, root / link)
    expected[str(root / link)] = 'unreadable'
  return expected


def test_symlink_loops_are_not_followed_and_every_image_is_written_once(hostile_run):
  """A tree with directory symlinks to itself, to its parent, to the root, and a two-directory
  cycle (in the hostile run: a subprocess, so a hang fails instead of hanging).

  Expected: the run ends by itself; each of the 6 real images written exactly once under
  its real path; nothing is listed through a symlinked directory; each of the 5 directory
  symlinks listed once, as itself, and rejected as `unreadable` (not a regular file).
  """
  result, out, expected = hostile_run
  assert result.returncode == 0, result.output[-3000:]
  root = out.parent / 'in'

  def in_tree(uri: str) -> bool:
    return Path(uri).relative_to(root).parts[0] in LOOP_LABELS

  found = outcomes(out)
  assert {uri: outcome for uri, (outcome, _) in found.items() if in_tree(uri)} == {
      uri: reason or 'written' for uri, reason in expected.items() if in_tree(uri)}


def input_arg(root: Path, kind: str) -> str:
  return str(root) if kind == 'directory' else f'{root}/**.jpg'


@pytest.mark.parametrize('kind', ['directory', 'glob'])
def test_unreadable_symlinks_are_rejected_not_lost(tmp_path, kind):
  """As a directory and as a glob. Expected: the dangling symlink, the self-referencing one
  and the two-link file cycle rejected as `unreadable`; the real image written."""
  root = tmp_path / 'in' / 'cat'
  expected = {str(write(root / 'real.jpg', photo(1))): WRITTEN}
  for name, target in [('dangling.jpg', 'missing.jpg'), ('itself.jpg', 'itself.jpg'),
                       ('ping.jpg', 'pong.jpg'), ('pong.jpg', 'ping.jpg')]:
    os.symlink(target, root / name)
    expected[str(root / name)] = 'unreadable'
  assert convert(input_arg(tmp_path / 'in', kind), tmp_path / 'out') == 0
  assert_outcomes(tmp_path / 'out', expected)


WATCHDOG_SECONDS = 20


def reader_waiting(pipe: Path) -> bool:
  """Whether a process has the named pipe open for reading, as a run blocked on it would
  (in open(), waiting for a writer, or in read()). The probe is that reader's writer: it
  comes and goes, so a blocked open returns and its read sees end of file."""
  try:
    os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))  # ENXIO while no one reads it
    return True
  except OSError:
    return False


def test_pipes_devices_and_sockets_are_rejected_not_waited_for(tmp_path):
  """A named pipe, a symlink to /dev/zero (endless) and a Unix socket, named like images.

  Expected: the run ends by itself; each rejected as `unreadable` (not a regular file);
  the real image written. A run blocked on the pipe would hang the test: after 20 s the
  watchdog looks for a reader of the pipe, and if it finds one (a run blocked there, not
  a run that is merely slow) lets it go on and fails the test.
  """
  root = tmp_path / 'in' / 'cat'
  real = write(root / 'real.jpg', photo(1))
  pipe = root / 'pipe.jpg'
  os.mkfifo(pipe)
  os.symlink('/dev/zero', root / 'zero.jpg')
  server = socket.socket(socket.AF_UNIX)
  server.bind(str(root / 'socket.jpg'))
  finished, blocked = threading.Event(), []

  def watchdog():
    if finished.wait(WATCHDOG_SECONDS):
      return
    while not finished.wait(0.1):
      if reader_waiting(pipe):
        blocked.append(True)

  thread = threading.Thread(target=watchdog, daemon=True)
  thread.start()
  try:
    returncode = convert(tmp_path / 'in', tmp_path / 'out')
  finally:
    finished.set()
    thread.join()
    server.close()
  assert not blocked, 'the run blocked on the pipe and went on only when the test opened it'
  assert returncode == 0
  assert_outcomes(tmp_path / 'out', {str(real): WRITTEN, str(pipe): 'unreadable', str(root / 'zero.jpg'): 'unreadable',
                                     str(root / 'socket.jpg'): 'unreadable'})


@pytest.mark.parametrize('kind', ['directory', 'glob'])
def test_a_very_deep_directory_tree_is_listed(tmp_path, kind):
  """An image at the top and one 1200 directories down (the path, about 2.5 KB, is legal),
  as a directory and as a glob.

  Expected: both written. The tree is removed at the end, one level at a time: recursive
  deletion (shutil.rmtree, and so pytest's own clean-up of old temporary directories)
  fails on it the same way.
  """
  root = tmp_path / 'in'
  top = write(root / 'top.jpg', photo(1))
  levels = [os.fsencode(root)]
  try:
    for _ in range(1200):
      levels.append(levels[-1] + b'/d')
      os.mkdir(levels[-1])  # os.makedirs recurses once per level, too deep here
    deep = levels[-1] + b'/deep.jpg'
    with open(deep, 'wb') as f:
      f.write(photo(2))
    assert convert(input_arg(root, kind), tmp_path / 'out', '--label_source=none') == 0
    assert_outcomes(tmp_path / 'out', {str(top): WRITTEN, os.fsdecode(deep): WRITTEN})
  finally:
    for level in reversed(levels[1:]):
      for entry in os.scandir(level):
        os.unlink(entry.path)
      os.rmdir(level)


def test_an_input_directory_named_with_brackets(tmp_path):
  """Expected: the directory converted, its images written."""
  root = tmp_path / 'Photos [2023] *best?*'
  expected = {str(write(root / 'cat' / f'{i}.jpg', photo(i))): WRITTEN for i in range(2)}
  assert convert(root, tmp_path / 'out') == 0
  assert_outcomes(tmp_path / 'out', expected)


# --------------------------------------------------------------------------------------------
# File names

ODD_NAMES = [
    'chat noir, "été".jpg',
    "l'œil du chat.jpg",
    'double "quotes" and, commas.jpg',
    "single 'quotes'.jpg",
    'two  spaces  inside.jpg',
    'new\nline.jpg',
    'comma,\nand newline.jpg',
    'carriage\rreturn.jpg',
    'tab\there.jpg',
    'line\u2028separator and next\x85line.jpg',
    '日本語の猫.jpg',
    'emoji 🐈‍⬛.jpg',
    'cafe\u0301 decomposed.jpg',
    'brackets [1] *star* ?.jpg',
    'percent %20 #hash & amp.jpg',
    'back\\slash.jpg',
    '-dash first.jpg',
]
ODD_LABELS = ['cat', 'we,ird "label" été', "it's"]


def odd_photo_set(root: Path) -> Dict[Tuple[str, str], Path]:
  """(label, name) -> path, each label a directory holding every odd name."""
  files = {}
  for k, label in enumerate(ODD_LABELS):
    for n, name in enumerate(ODD_NAMES):
      files[label, name] = write(root / label / name, photo(100 * k + n))
  return files


def test_odd_file_names_in_a_directory_input(tmp_path):
  """Expected: every image written once, image/filename its exact path, its parent directory
  as the label; the image in a directory whose name has a line break rejected as `no_label`
  (labels.txt holds one label per line)."""
  files = odd_photo_set(tmp_path / 'in')
  unlabelable = write(tmp_path / 'in' / 'line\nbreak' / 'x.jpg', photo(999))
  expected = {str(path): WRITTEN for path in files.values()}
  expected[str(unlabelable)] = 'no_label'
  assert convert(tmp_path / 'in', tmp_path / 'out') == 0
  found = assert_outcomes(tmp_path / 'out', expected)
  for (label, _), path in files.items():
    assert found[str(path)][1]['image/class/text'].decode('utf-8') == label
  assert 'line break' in found[str(unlabelable)][1]['detail']
  assert (tmp_path / 'out' / 'labels.txt').read_text(encoding='utf-8') == ''.join(
      label + '\n' for label in sorted(ODD_LABELS))


def manifest_rows(files: Dict[Tuple[str, str], Path], base: Path, relative: bool) -> List[Tuple[str, str]]:
  return [(os.path.relpath(path, base) if relative else str(path), label) for (label, _), path in files.items()]


@pytest.mark.parametrize('layout', ['csv with header', 'automl csv', 'jsonl'])
def test_odd_file_names_in_manifests(tmp_path, layout):
  """Rows with odd names (relative and absolute), labels with commas and quotes, and one label
  with a line break.

  Expected: every image written once, image/filename its absolute path, the manifest's label;
  the row whose label has a line break rejected as `no_label`.
  """
  files = odd_photo_set(tmp_path / 'images')
  rows = manifest_rows(files, tmp_path, relative=True)
  rows[::2] = manifest_rows(files, tmp_path, relative=False)[::2]
  unlabelable = write(tmp_path / 'images' / 'unlabelable.jpg', photo(999))
  rows.append((str(unlabelable), 'two\nlines'))
  if layout == 'jsonl':
    manifest = tmp_path / 'manifest.jsonl'
    manifest.write_text(''.join(json.dumps({'uri': uri, 'label': label}, ensure_ascii=False) + '\n'
                                for uri, label in rows), encoding='utf-8')
  else:
    manifest = tmp_path / 'manifest.csv'
    with open(manifest, 'w', newline='', encoding='utf-8') as f:
      writer = csv.writer(f)
      if layout == 'csv with header':
        writer.writerow(['image_path', 'label'])
        writer.writerows(rows)
      else:
        writer.writerows(('TRAIN', uri, label) for uri, label in rows)
  expected = {str(path): WRITTEN for path in files.values()}
  expected[str(unlabelable)] = 'no_label'
  assert convert(manifest, tmp_path / 'out') == 0
  found = assert_outcomes(tmp_path / 'out', expected)
  for (label, _), path in files.items():
    assert found[str(path)][1]['image/class/text'].decode('utf-8') == label


@pytest.mark.parametrize('header', [True, False])
def test_a_quoted_csv_uri_keeps_its_leading_and_trailing_spaces(tmp_path, header):
  """A uri cell that begins or ends with a space, quoted as csv.writer quotes it.

  Expected: both images written under their exact names (with or without a header).
  """
  paths = [write(tmp_path / ' leading space.jpg', photo(1)), write(tmp_path / 'trailing space.jpg ', photo(2))]
  manifest = tmp_path / 'manifest.csv'
  rows = [[path.name, 'cat'] for path in paths] if header else [['TRAIN', path.name, 'cat'] for path in paths]
  with open(manifest, 'w', newline='', encoding='utf-8') as f:
    csv.writer(f, quoting=csv.QUOTE_ALL).writerows(([['uri', 'label']] if header else []) + rows)
  assert convert(manifest, tmp_path / 'out') == 0
  assert_outcomes(tmp_path / 'out', {str(path): WRITTEN for path in paths})


def test_names_that_are_not_utf8_do_not_stop_the_job(tmp_path):
  """Latin-1 names from an old archive: a file b'caf\\xe9.jpg', and a folder b'\\xe9t\\xe9' used as label.

  Expected: the job completes; the normal image written; the Latin-1 file written with
  image/filename equal to its path's raw bytes; the image in the Latin-1 folder rejected as
  `no_label` (labels.txt is UTF-8 text), its uri in the errors file naming the same bytes.
  """
  root = tmp_path / 'in'
  normal = os.fsencode(write(root / 'cat' / 'normal.jpg', photo(1)))
  latin1_file = os.fsencode(root) + b'/cat/caf\xe9.jpg'
  os.makedirs(os.fsencode(root) + b'/\xe9t\xe9')
  latin1_folder = os.fsencode(root) + b'/\xe9t\xe9/x.jpg'
  for path, seed in [(latin1_file, 2), (latin1_folder, 3)]:
    with open(path, 'wb') as f:
      f.write(photo(seed))
  assert convert(root, tmp_path / 'out') == 0
  _, records = read_output(str(tmp_path / 'out'))
  assert sorted(record['image/filename'] for record in records['train']) == sorted([normal, latin1_file])
  assert [(os.fsencode(error['uri']), error['reason']) for error in read_errors(str(tmp_path / 'out'))] == [
      (latin1_folder, 'no_label')]


def _resaved(data: bytes, quality: int) -> bytes:
  out = io.BytesIO()
  Image.open(io.BytesIO(data)).save(out, 'JPEG', quality=quality)
  return out.getvalue()


@pytest.mark.parametrize('extra', [(), ('--incremental',)], ids=['plain', 'incremental'])
def test_names_that_are_not_utf8_in_groups_of_copies_do_not_stop_the_job(tmp_path, extra):
  """A Latin-1 name that is an exact copy of another file, and one that is a near copy (a
  re-saved JPEG): the summaries of copies and near copies list them, and their lone surrogates
  cross the shuffles (Beam's string coders refuse them; both runs failed with "likely a bug").

  Expected: the job completes, every file written, beam_pipeline.json's groups name the raw
  bytes of both names.
  """
  root = tmp_path / 'in'
  original = photos.jpeg(5, 96, 72, quality=95)
  write(root / 'cat' / 'original.jpg', original)
  copy, near = os.fsencode(root) + b'/cat/copie-\xe9.jpg', os.fsencode(root) + b'/cat/proche-\xe9.jpg'
  with open(copy, 'wb') as f:
    f.write(original)
  with open(near, 'wb') as f:
    f.write(_resaved(original, 60))
  write(root / 'dog' / 'other.jpg', photo(7))
  assert convert(root, tmp_path / 'out', *extra) == 0
  info = json.loads((tmp_path / 'out' / 'beam_pipeline.json').read_text())
  listed = {os.fsencode(uri) for key in ('duplicates', 'near_duplicates')
            for group in info[key]['groups'] for uri in group['images']}
  assert {copy, near} <= listed


@pytest.mark.parametrize('kind', ['csv', 'jsonl'])
def test_a_manifest_row_that_is_not_utf8_is_rejected_not_fatal(tmp_path, kind):
  """A manifest whose third line is cp1252 ('\xe9t\xe9.jpg'), between two UTF-8 rows.

  Expected (README: a row that cannot be used becomes an error with its line number, it
  never stops the job): the two good rows written; the bad one rejected as
  `bad_manifest_row` under `<manifest>:row 3` (CSV) or `<manifest>:line 2` (JSONL).
  """
  good = [write(tmp_path / 'imgs' / 'a.jpg', photo(1)), write(tmp_path / 'imgs' / 'b.jpg', photo(2))]
  write(tmp_path / 'imgs' / 'été.jpg', photo(3))
  manifest = tmp_path / f'manifest.{kind}'
  if kind == 'csv':
    lines = ['uri,label', 'imgs/a.jpg,cat', 'imgs/\xe9t\xe9.jpg,cat', 'imgs/b.jpg,cat']
    bad_row = f'{manifest}:row 3'
  else:
    lines = [json.dumps({'uri': 'imgs/a.jpg', 'label': 'cat'}), '{"uri": "imgs/\xe9t\xe9.jpg", "label": "cat"}',
             json.dumps({'uri': 'imgs/b.jpg', 'label': 'cat'})]
    bad_row = f'{manifest}:line 2'
  manifest.write_bytes('\n'.join(lines).encode('cp1252') + b'\n')
  assert convert(manifest, tmp_path / 'out') == 0
  assert_outcomes(tmp_path / 'out', {str(good[0]): WRITTEN, str(good[1]): WRITTEN, bad_row: 'bad_manifest_row'})


# --------------------------------------------------------------------------------------------
# Empty, oversized, bombs, metadata: one real run over all of them, memory measured


@pytest.fixture(scope='module')
def hostile_run(tmp_path_factory):
  """One subprocess run over every file of the tables below, a folder's worth of videos beside
  the photos (test_a_folder_of_videos_is_skipped_without_reading_them) and the symlink loops
  (test_symlink_loops_are_not_followed_and_every_image_is_written_once), with its peak RSS."""
  base = tmp_path_factory.mktemp('hostile')
  root = base / 'in' / 'x'
  expected = symlink_loops(base / 'in')
  for i in range(4):
    expected[str(write(root / f'photo-{i}.jpg', photo(i)))] = WRITTEN
  for i in range(VIDEOS):
    expected[str(sparse_file(root / f'video-{i}.mp4', 300 * MiB))] = 'skipped'
  expected[str(write(root / 'empty.jpg', b''))] = 'empty'
  expected[str(sparse_file(root / 'sparse-300mb.jpg', 300 * MiB + 1))] = 'file_too_large'
  for name, data in hostile_files.bomb_header_cases().items():
    expected[str(write(root / name, data))] = 'too_many_pixels'
  for name, data in hostile_files.metadata_cases().items():
    expected[str(write(root / name, data))] = METADATA_OUTCOMES[name]
  result = run_measured(base / 'in', base / 'out')
  return result, base / 'out', expected


# The outcome of each metadata case. Pillow (pinned 12.3.0) refuses text and ICC chunks
# that decompress past PngImagePlugin.MAX_TEXT_CHUNK (1 MB), or past MAX_TEXT_MEMORY
# (64 MB) in all, when they come before the image data: those files are rejected as
# `corrupt`. Anything it does not decompress (chunks after IDAT, uncompressed text) and
# JPEG/TIFF metadata it parses lazily do not stop a good image from being written. A JPEG
# with more Exif APP1 segments than a camera writes is rejected as `corrupt` before
# Pillow sees it (Pillow joins them in quadratic time).
METADATA_OUTCOMES = {
    'png-ztxt-bomb-before-idat.png': 'corrupt',
    'png-ztxt-bomb-after-idat.png': WRITTEN,
    'png-itxt-bomb.png': 'corrupt',
    'png-iccp-bomb.png': 'corrupt',
    'png-200-ztxt-chunks.png': 'corrupt',
    'png-itxt-20mb-plain.png': WRITTEN,
    'jpeg-2-exif-segments.jpg': WRITTEN,
    'jpeg-200-exif-segments.jpg': 'corrupt',  # more Exif segments than any camera writes
    'jpeg-255-icc-segments.jpg': WRITTEN,
    'jpeg-exif-ifd-loop.jpg': WRITTEN,
    'tiff-5535-tags.tif': WRITTEN,
    'tiff-65000-entries.tif': WRITTEN,
    'tiff-tag-claims-4gb.tif': WRITTEN,
    'tiff-ifd-loop.tif': WRITTEN,
    'tiff-exif-and-subifd-loop.tif': WRITTEN,
    'tiff-300-pages.tif': WRITTEN,
}


def test_hostile_collection_completes_with_bounded_memory_and_every_file_accounted_once(hostile_run):
  result, out, expected = hostile_run
  assert result.returncode == 0, result.output[-3000:]
  result.assert_memory_within(MAX_MEMORY_MB)
  assert result.seconds < 120
  assert_outcomes(out, expected)


def test_empty_and_oversized_files_are_rejected(hostile_run):
  """Expected: the 0-byte file `empty`; the 300 MB (sparse) file `file_too_large`, reading
  at most --max_file_mb (100) of it, which the peak RSS bound above checks."""
  _, out, _ = hostile_run
  found = outcomes(out)
  reasons = {os.path.basename(uri): outcome for uri, (outcome, _) in found.items()}
  assert reasons['empty.jpg'] == 'empty'
  assert reasons['sparse-300mb.jpg'] == 'file_too_large'


def test_an_oversized_file_is_rejected_by_its_size_without_being_read(tmp_path):
  """The validation step, as a worker runs it, on the 300 MB (sparse) file and the photos.

  Expected: the file rejected as `file_too_large` and the peak memory of the step growing
  by far less than a read of it would take: reading it whole grows it by 300 MB, reading
  up to --max_file_mb by 100 MB. (The whole-run bound above cannot tell: the largest
  process's peak is mostly library file pages, which vary by 100 MB between environments,
  and a worker's spike is shorter than summed PSS samples.)
  """
  big = str(sparse_file(tmp_path / 'x' / 'sparse-300mb.jpg', 300 * MiB + 1))
  small = [str(write(tmp_path / 'x' / f'photo-{i}.jpg', photo(i))) for i in range(4)]
  steps.validate_batch([InputItem(uri) for uri in small], settings())  # TensorFlow's first decode sets up
  with peak_memory.growth() as grown:
    result = steps.validate_batch([InputItem(uri) for uri in [small[0], big, *small[1:]]], settings())
  assert [(r.uri, r.reason) for r in result.rejections] == [(big, 'file_too_large')]
  assert len(result.records) == 4
  assert grown[0] < 32, f'validating grew the peak memory by {grown[0]:.0f} MB'


def test_bomb_headers_are_rejected_as_too_many_pixels(hostile_run):
  _, out, _ = hostile_run
  found = outcomes(out)
  reasons = {os.path.basename(uri): outcome for uri, (outcome, _) in found.items()}
  assert {name: reasons[name] for name in hostile_files.bomb_header_cases()} == {
      name: 'too_many_pixels' for name in hostile_files.bomb_header_cases()}


@pytest.mark.filterwarnings('ignore::PIL.Image.DecompressionBombWarning')
def test_bomb_headers_are_rejected_from_the_header_alone():
  """Each bomb header is rejected without its pixels allocated: 100000 x 100000 RGB would
  be 30 GB, the smallest case (12000 x 9000) 324 MB; the peak memory of the whole check
  grows by less than a third of that."""
  preparation.prepare_images([photo(1)], 100_000_000)  # TensorFlow's first decode sets up its threads
  for name, data in hostile_files.bomb_header_cases().items():
    with peak_memory.growth() as grown:
      result, = preparation.prepare_images([data], 100_000_000)
    assert getattr(result, 'reason', None) == 'too_many_pixels', (name, result)
    assert grown[0] < 100, (name, grown[0])


def test_huge_and_looping_metadata_is_written_or_rejected_never_fatal(hostile_run):
  _, out, _ = hostile_run
  found = outcomes(out)
  reasons = {os.path.basename(uri): (outcome if outcome != 'written' else WRITTEN)
             for uri, (outcome, _) in found.items()}
  assert {name: reasons[name] for name in METADATA_OUTCOMES} == METADATA_OUTCOMES
  tiff = found[str(out.parent / 'in' / 'x' / 'tiff-300-pages.tif')][1]
  assert (tiff['image/format'], tiff['image/width'], tiff['image/height']) == (b'png', 32, 24)  # page 1


def test_max_file_mb_is_an_exact_byte_limit(tmp_path):
  """--max_file_mb=1. Expected: a valid JPEG of exactly 1 MiB written; the same padded to
  1 MiB + 1 byte, a 2 MiB PNG and a 300 MB sparse file rejected as `file_too_large`."""
  root = tmp_path / 'in' / 'x'
  base = photo(1)
  big_png = photos.encode(Image.frombytes('RGB', (1024, 768), os.urandom(1024 * 768 * 3)), 'PNG')
  assert len(big_png) > 2 * MiB
  expected = {
      str(write(root / 'exactly-1mib.jpg', hostile_files.jpeg_of_size(base, MiB))): WRITTEN,
      str(write(root / 'one-byte-over.jpg', hostile_files.jpeg_of_size(base, MiB + 1))): 'file_too_large',
      str(write(root / 'big.png', big_png)): 'file_too_large',
      str(sparse_file(root / 'sparse-300mb.jpg', 300 * MiB)): 'file_too_large',
      str(write(root / 'small.jpg', photo(3))): WRITTEN,
  }
  assert convert(tmp_path / 'in', tmp_path / 'out', '--max_file_mb=1') == 0
  assert_outcomes(tmp_path / 'out', expected)


def test_a_folder_of_videos_is_skipped_without_reading_them(hostile_run):
  """24 video-sized files (sparse, 300 MB each) beside 4 photos, default limits (in the
  hostile run, which holds them: one run of the command for both).

  Expected: the videos skipped as no images by their extension (they were rejected as
  `file_too_large`), the photos written, and the peak RSS of the run under the same bound as
  with a single oversized file.
  """
  result, out, expected = hostile_run
  assert result.returncode == 0, result.output[-3000:]
  found = outcomes(out)
  videos = {uri for uri in expected if uri.endswith('.mp4')}
  assert len(videos) == VIDEOS
  assert {uri: found[uri][0] for uri in videos} == dict.fromkeys(videos, 'skipped')
  assert all(found[uri][0] == 'written' for uri in expected if os.path.basename(uri).startswith('photo-'))
  result.assert_memory_within(MAX_MEMORY_MB)


def test_a_jpeg_of_many_exif_segments_is_rejected_before_pillow_parses_it(monkeypatch):
  """Pillow (12.3.0) joins Exif APP1 segments with bytes +=, quadratic: a 46 MB JPEG of 700
  segments costs Image.open about 10 s, a 100 MB one about a minute.

  Expected: such a file rejected as `corrupt` without Pillow opening it, and without
  TensorFlow decoding it.
  """
  reached = []

  def refused(name):
    def called(*_args, **_kwargs):
      # Recorded, not raised: prepare_images turns any exception into a `corrupt` rejection,
      # so an exception raised here would make the test pass for that reason instead.
      reached.append(name)
      raise AssertionError(f'the file reached {name}')
    return called

  monkeypatch.setattr(Image, 'open', refused('Pillow'))
  monkeypatch.setattr(tensorflow_decoding, 'batch_decoded', refused('TensorFlow'))
  data = hostile_files.jpeg_with_segments([hostile_files.exif_segment()] * 700)
  result, = preparation.prepare_images([data], 100_000_000)
  assert reached == []
  assert getattr(result, 'reason', None) == 'corrupt', result
