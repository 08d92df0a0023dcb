"""Conversions of every pixel mode Pillow opens, and of damaged JPEGs, end to end.

Every file is written or rejected and never fails the run; two conversions a few
seconds apart give byte-identical shards; every stored record loads in Pillow and
decodes with TensorFlow's decode_image and decode_jpeg; --strict_jpeg rejects the
JPEGs libjpeg warns about, and only those.
"""
import io
import time

import pytest
import tensorflow as tf
from PIL import Image

from beam_pipeline import cli
from beam_pipeline.core.settings import IMAGE_FORMATS

from helpers import photos, pillow_modes
from helpers.dataset_reader import local_files, read_errors, read_output

MODES = pillow_modes.cases()


def convert(source, out, *extra: str) -> int:
  return cli.main([f'--input={source}', f'--output={out}', '--runner=DirectRunner', '--skip_transform',
                   '--max_error_fraction=1', *extra])


def shards(out) -> dict:
  return {name: data for name, data in local_files(out).items() if '.tfrecord' in name}


@pytest.fixture(scope='module')
def mode_files(tmp_path_factory):
  root = tmp_path_factory.mktemp('modes') / 'in'
  photos.write_files(root, {f'odd/{name}': case.data for name, case in MODES.items()})
  return root


@pytest.mark.parametrize('max_side', [None, 24])
@pytest.mark.parametrize('image_format', IMAGE_FORMATS)
def test_every_mode_is_written_or_rejected_the_same_a_few_seconds_later(mode_files, tmp_path, image_format,
                                                                        max_side):
  extra = [f'--image_format={image_format}'] + ([f'--max_side={max_side}'] if max_side else [])
  started = time.monotonic()
  assert convert(mode_files, tmp_path / 'first', *extra) == 0
  info, records = read_output(str(tmp_path / 'first'))
  rejected = {error['uri'].rsplit('/', 1)[1]: error['reason'] for error in read_errors(str(tmp_path / 'first'))}
  assert rejected == {name: case.reason for name, case in MODES.items() if case.reason}
  written = {r['image/filename'].decode().rsplit('/', 1)[1]: r for split in records.values() for r in split}
  assert sorted(written) == sorted(name for name, case in MODES.items() if not case.reason)
  for name, record in written.items():
    data, height, width = record['image/encoded'], record['image/height'], record['image/width']
    assert tf.io.decode_image(data, channels=3, expand_animations=False).shape == (height, width, 3), name
    assert tf.io.decode_jpeg(data, channels=3).shape == (height, width, 3), name
    with Image.open(io.BytesIO(data)) as image:
      image.load()
      assert image.size == (width, height), name
    if max_side:
      assert max(height, width) == max_side, name
  assert info['num_examples'] == len(written)

  time.sleep(max(0.0, 2.0 - (time.monotonic() - started)))
  assert convert(mode_files, tmp_path / 'second', *extra) == 0
  assert shards(tmp_path / 'second') == shards(tmp_path / 'first')


def test_strict_jpeg_rejects_the_jpegs_libjpeg_warns_about_and_only_those(tmp_path):
  """Clean JPEGs of every kind, one with bytes after its end marker, a PNG; and two damaged
  JPEGs. Expected: by default all are written and the two counted; with --strict_jpeg the
  two are rejected as damaged_jpeg, with libjpeg's warning, and every other file written."""
  jpeg = photos.jpeg(3, 64, 48, quality=90)
  scan, tables = jpeg.index(b'\xff\xda'), jpeg.index(b'\xff\xdb')
  damaged = {'cut-scan.jpg': jpeg[:(scan + len(jpeg)) // 2] + b'\xff\xd9',
             'extraneous.jpg': jpeg[:tables] + b'\x00\x00' + jpeg[tables:]}
  clean = {'photo.jpg': photos.jpeg(1), 'progressive.jpg': photos.encode(photos.image(2), 'JPEG', progressive=True),
           'gray.jpg': photos.encode(photos.image(3).convert('L'), 'JPEG'), 'cmyk.jpg': MODES['cmyk.jpg'].data,
           'trailing.jpg': photos.jpeg(4) + b'after the end marker', 'still.png': photos.encode(photos.image(5), 'PNG')}
  photos.write_files(tmp_path / 'in', {f'x/{name}': data for name, data in {**clean, **damaged}.items()})

  assert convert(tmp_path / 'in', tmp_path / 'lenient') == 0
  info, _ = read_output(str(tmp_path / 'lenient'))
  assert info['num_examples'] == len(clean) + len(damaged) and info['num_damaged_jpeg'] == len(damaged)

  assert convert(tmp_path / 'in', tmp_path / 'strict', '--strict_jpeg') == 0
  info, records = read_output(str(tmp_path / 'strict'))
  errors = {error['uri'].rsplit('/', 1)[1]: error for error in read_errors(str(tmp_path / 'strict'))}
  assert sorted(errors) == sorted(damaged)
  assert {error['reason'] for error in errors.values()} == {'damaged_jpeg'}
  assert 'premature end of data segment' in errors['cut-scan.jpg']['detail']
  assert 'extraneous bytes before marker 0xdb' in errors['extraneous.jpg']['detail']
  assert sorted(r['image/filename'].decode().rsplit('/', 1)[1] for r in records['train']) == sorted(clean)
  assert info['num_damaged_jpeg'] == len(damaged) and info['errors_by_reason'] == {'damaged_jpeg': len(damaged)}
