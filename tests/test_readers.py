"""The readers users already have, reading our outputs as their users do.

The PyTorch ``tfrecord`` package runs in a process of its own: it registers its own
copy of TensorFlow's example.proto, which cannot share a process with TensorFlow's.
"""
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict, Tuple

import pytest
import tensorflow as tf
from PIL import Image

from beam_pipeline.core.writing import record_index
from beam_pipeline.core.output.run_record import RunRecord
from beam_pipeline.inspection import verify

from helpers import dali, extra_venvs, image_cases, photos, pillow_modes
from helpers.commands import convert
from helpers.dataset_reader import read_output

_TFRECORD_READ = '''
import json, sys
from tfrecord.reader import tfrecord_loader
names = {}
for path, index, compression, parts in json.loads(sys.argv[1]):
    names[path] = [bytes(record['image/filename']).decode()
                   for part in range(parts)
                   for record in tfrecord_loader(path, index, {'image/filename': 'byte'}, compression_type=compression,
                                                 shard=(part, parts) if index else None)]
print(json.dumps(names))
'''


def _tfrecord_package_reads(reads) -> dict:
  result = subprocess.run([sys.executable, '-c', _TFRECORD_READ, json.dumps(reads)], capture_output=True, text=True,
                          check=False, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout)


@pytest.fixture(scope='module')
def photo_set(tmp_path_factory):
  """A training folder of 24 photos and a validation folder of one: a one-record shard."""
  root = tmp_path_factory.mktemp('readers')
  files = {f'train/{label}/{i}.jpg': photos.jpegs(1, seed=i + 100 * n, size=(40 + i, 30))[0]
           for n, label in enumerate(('cat', 'dog')) for i in range(12)}
  files['val/cat/only.jpg'] = photos.jpegs(1, seed=999)[0]
  photos.write_files(root / 'in', files)
  return root


@pytest.fixture(scope='module')
def gzip_output(photo_set, tmp_path_factory):
  """``photo_set`` converted with gzip and --skip_transform; a test that changes it copies it first."""
  out = tmp_path_factory.mktemp('readers-gzip') / 'out'
  assert convert(f'--input={photo_set}/in', f'--output={out}', '--compression=gzip', '--skip_transform') == 0
  return out


@pytest.fixture(scope='module')
def indexed_output(photo_set, tmp_path_factory):
  """``photo_set`` converted into small shards with --index_files and --skip_transform; a test
  that changes it copies it first."""
  out = tmp_path_factory.mktemp('readers-indexed') / 'out'
  assert convert(f'--input={photo_set}/in', f'--output={out}', '--index_files', '--target_shard_mb=0.01',
                 '--skip_transform') == 0
  return out


def test_index_files_index_every_record_and_the_tfrecord_package_reads_with_them(indexed_output, tmp_path):
  out = tmp_path / 'out'
  shutil.copytree(indexed_output, out)
  info, records = read_output(str(out))
  shards = [shard for split in info['splits'].values() for shard in split['shards']]
  assert len(info['splits']['train']['shards']) > 2 and info['splits']['validation']['num_examples'] == 1
  assert all(shard['index_file'] == shard['file'] + '.idx' for shard in shards)
  for shard in shards:
    with open(out / shard['file'], 'rb') as f:
      assert (out / shard['index_file']).read_text() == record_index.text(record_index.data_lengths(f))
  assert verify.verify(str(out), RunRecord.from_dict(info)).problems == []

  # Its index reader (numpy.loadtxt(...)[:, 0]) fails on a one-line index: the one-record shard
  # is read without it, as its users must.
  reads = [(str(out / shard['file']), str(out / shard['index_file']) if shard['num_examples'] > 1 else None,
            None, 2 if shard['num_examples'] > 1 else 1) for shard in shards]
  read = _tfrecord_package_reads(reads)
  for shard in shards:
    in_shard = [r['image/filename'].decode() for split in records.values() for r in split
                if r['_shard'] == shard['file']]
    assert read[str(out / shard['file'])] == in_shard

  first, only = info['splits']['train']['shards'][0], info['splits']['validation']['shards'][0]
  with open(out / first['file'], 'rb') as f:
    right = record_index.text(record_index.data_lengths(f)).splitlines()[1]
  lines = (out / first['index_file']).read_text().splitlines()
  lines[1] = '1 2'
  (out / first['index_file']).write_text('\n'.join(lines) + '\n')
  (out / only['index_file']).unlink()
  assert [str(p) for p in verify.verify(str(out), RunRecord.from_dict(info)).problems] == [
      f'{first["file"]}: line 2 of its index file {first["index_file"]} says "1 2", the record is at "{right}"',
      f'{only["file"]}: its index file {only["index_file"]} is missing']


def test_the_tfrecord_package_reads_every_record_of_a_gzipped_output(gzip_output):
  out = gzip_output
  info, records = read_output(str(out))
  shards = [shard for split in info['splits'].values() for shard in split['shards']]
  read = _tfrecord_package_reads([(str(out / shard['file']), None, 'gzip', 1) for shard in shards])
  assert sorted(name for names in read.values() for name in names) == sorted(
      r['image/filename'].decode() for split in records.values() for r in split)
  assert sum(map(len, read.values())) == 25


def test_tensorflow_datasets_loads_every_split_with_its_features(indexed_output):
  """tfds.builder_from_directory on a conversion with two splits (and index files beside its
  shards): every record, its label a ClassLabel named as labels.txt, its image decoded to the
  recorded size; as (image, label) pairs too."""
  import tensorflow_datasets as tfds  # pylint: disable=import-outside-toplevel
  out = indexed_output
  info, records = read_output(str(out))
  builder = tfds.builder_from_directory(str(out))
  label = builder.info.features['image/class/label']
  assert label.names == info['labels'] == ['cat', 'dog']
  assert sorted(builder.info.splits) == ['train', 'validation']
  for split, expected in records.items():
    assert builder.info.splits[split].num_examples == info['splits'][split]['num_examples']
    read = {}
    for example in tfds.as_numpy(builder.as_dataset(split=split)):
      read[example['image/filename'].decode()] = (int(example['image/class/label']), example['image/encoded'].shape,
                                                  example['image/source_id'].decode())
    assert read == {r['image/filename'].decode(): (r['image/class/label'], (r['image/height'], r['image/width'], 3),
                                                   r['image/source_id'].decode()) for r in expected}
    pairs = sorted((int(label), image.shape) for image, label in tfds.as_numpy(
        builder.as_dataset(split=split, as_supervised=True)))
    assert pairs == sorted((r['image/class/label'], (r['image/height'], r['image/width'], 3)) for r in expected)


def test_gzip_outputs_get_no_tfds_metadata_and_a_rerun_replaces_an_old_outputs_record(photo_set, gzip_output,
                                                                                     tmp_path):
  """TFDS reads no gzip shards, so none of its files are written. An output of 0.1 held the
  run record as dataset_info.json: still read, and replaced, marker and all, by a rerun."""
  out = tmp_path / 'out'
  shutil.copytree(gzip_output, out)
  assert not {'dataset_info.json', 'features.json', 'image.class.label.labels.txt'} & set(os.listdir(out))
  record = (out / 'beam_pipeline.json').read_text()
  (out / 'beam_pipeline.json').rename(out / 'dataset_info.json')
  assert RunRecord.read(str(out)).to_json() == record
  assert convert(f'--input={photo_set}/in', f'--output={out}', '--skip_transform') == 0
  assert json.loads((out / 'dataset_info.json').read_text())['fileFormat'] == 'tfrecord'
  assert RunRecord.read(str(out)).compression == 'none'


_ORIENTATIONS = (1, 6, 3, 8)


def _sideways(orientation: int, seed: int) -> bytes:
  """A 60x40 photo as a JPEG whose Exif orientation tag says ``orientation``."""
  exif = Image.Exif()
  exif[0x0112] = orientation
  buffer = io.BytesIO()
  Image.open(io.BytesIO(photos.jpegs(1, seed=seed, size=(60, 40))[0])).save(buffer, 'JPEG', exif=exif.tobytes())
  return buffer.getvalue()


def test_photos_taken_sideways_are_stored_upright_and_counted(tmp_path):
  """A phone's portrait photo is a landscape JPEG with orientation 6: stored upright, its
  recorded size what TensorFlow decodes, and counted in beam_pipeline.json."""
  photos.write_files(tmp_path / 'in', {f'cat/{i}.jpg': _sideways(orientation, seed=i)
                                       for i, orientation in enumerate(_ORIENTATIONS)})
  assert convert(f'--input={tmp_path}/in', f'--output={tmp_path}/out', '--skip_transform') == 0
  info, records = read_output(str(tmp_path / 'out'))
  assert (info['num_rotated'], info['num_reencoded']) == (3, 3)
  sizes = {r['image/filename'].decode().rsplit('/', 1)[1]: (r['image/height'], r['image/width'])
           for r in records['train']}
  assert sizes == {'0.jpg': (40, 60), '1.jpg': (60, 40), '2.jpg': (40, 60), '3.jpg': (60, 40)}
  assert all(tuple(tf.io.decode_image(r['image/encoded']).shape[:2]) == (r['image/height'], r['image/width'])
             for r in records['train'])


@pytest.fixture(scope='module')
def odd_output(tmp_path_factory) -> Callable[[str, str], Path]:
  """The output of the odd-file tables and four photos taken sideways, converted with --index_files,
  --skip_transform, --max_error_fraction=1 and the given --image_format and --exif_orientation:
  each set of those once in this module, as the tests only read it."""
  root = tmp_path_factory.mktemp('odd-files')
  files = {f'odd/{name}': case.data for name, case in image_cases.cases().items()}
  files.update({f'modes/{name}': case.data for name, case in pillow_modes.cases().items()})
  files.update({f'sideways/{orientation}.jpg': _sideways(orientation, seed=orientation)
                for orientation in _ORIENTATIONS})
  photos.write_files(root / 'in', files)
  outputs: Dict[Tuple[str, str], Path] = {}

  def output(image_format: str, exif_orientation: str) -> Path:
    if (image_format, exif_orientation) not in outputs:
      out = root / f'{image_format}-{exif_orientation}'
      assert convert(f'--input={root}/in', f'--output={out}', '--index_files', '--skip_transform',
                     f'--image_format={image_format}', f'--exif_orientation={exif_orientation}',
                     '--max_error_fraction=1') == 0
      outputs[image_format, exif_orientation] = out
    return outputs[image_format, exif_orientation]
  return output


@pytest.mark.skipif(not dali.installed(), reason=extra_venvs.missing('NVIDIA DALI (.venv-dali)', 'dali'))
@pytest.mark.parametrize('exif_orientation', ['apply', 'ignore'])
def test_dali_decodes_every_record_to_its_recorded_size_from_our_index_files(odd_output, exif_orientation):
  """DALI's CPU decoder over the odd-file tables and photos taken sideways, read with the
  index files the conversion wrote. It applies Exif orientation, as TensorFlow does not:
  with --exif_orientation=ignore the sideways photos decode turned, which is the point of
  the default."""
  out = odd_output('original', exif_orientation)
  info, _ = read_output(str(out))
  sizes = dali.decoded_sizes(str(out))
  assert len(sizes) == info['num_examples'] > 50
  turned = sorted('/'.join(name.split('/')[-2:]) for name, (decoded, recorded) in sizes.items() if decoded != recorded)
  assert turned == ([] if exif_orientation == 'apply' else ['sideways/6.jpg', 'sideways/8.jpg'])


_MODELS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), '.venv-models', 'bin', 'python')
_MODEL_GARDEN_READ = '''
import json, sys
import tensorflow as tf
from official.vision.dataloaders import classification_input, tf_example_decoder
results = {}
detection = tf_example_decoder.TfExampleDecoder()
for out, decode_jpeg_only in json.loads(sys.argv[1]):
    with open(out + '/beam_pipeline.json') as f:
        info = json.load(f)
    files = [out + '/' + shard['file'] for split in info['splits'].values() for shard in split['shards']]
    decoder = classification_input.Decoder()
    parse = classification_input.Parser(output_size=[32, 32], num_classes=info['num_classes'],
                                        decode_jpeg_only=decode_jpeg_only).parse_fn(is_training=True)
    result = results[out] = {'classified': 0, 'failed': [], 'source_ids': []}
    for record in tf.data.TFRecordDataset(files):
        try:
            parse(decoder.decode(record))
            result['classified'] += 1
        except Exception as e:
            result['failed'].append(str(e)[:300])
        source_id = detection.decode(record)['source_id']
        result['source_ids'].append(int(tf.strings.to_number(source_id, tf.int64)))
print(json.dumps(results))
'''
# Model Garden's decode_jpeg_only for each --image_format: PNGs need False.
_DECODE_JPEG_ONLY = {'original': False, 'jpeg': True}


@pytest.fixture(scope='module')
def model_garden_reads(odd_output) -> Dict[str, Tuple[Path, dict]]:
  """{image format: (output, what Model Garden read of it)} for each of _DECODE_JPEG_ONLY, all read
  in one .venv-models process: starting its TensorFlow and Model Garden costs more than reading."""
  outs = {image_format: odd_output(image_format, 'apply') for image_format in _DECODE_JPEG_ONLY}
  reads = [(str(out), _DECODE_JPEG_ONLY[image_format]) for image_format, out in outs.items()]
  result = subprocess.run([_MODELS, '-c', _MODEL_GARDEN_READ, json.dumps(reads)], capture_output=True, text=True,
                          check=False, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  read = json.loads(result.stdout.splitlines()[-1])
  return {image_format: (out, read[str(out)]) for image_format, out in outs.items()}


@pytest.mark.skipif(not os.path.exists(_MODELS), reason=extra_venvs.missing('Model Garden (.venv-models)', 'models'))
@pytest.mark.parametrize('image_format', list(_DECODE_JPEG_ONLY))
def test_model_garden_parses_every_record_of_the_odd_file_tables(model_garden_reads, image_format):
  """Model Garden's classification Decoder and Parser (random crop and flip) take every record:
  PNGs with decode_jpeg_only=False, everything with its defaults after --image_format=jpeg.
  Its detection TfExampleDecoder reads image/source_id as the int64 each record holds."""
  out, read = model_garden_reads[image_format]
  info, records = read_output(str(out))
  assert (read['classified'], read['failed']) == (info['num_examples'], [])
  assert info['num_examples'] > 40 + len(_ORIENTATIONS)  # the odd files' records, besides the sideways photos'
  assert sorted(read['source_ids']) == sorted(int(r['image/source_id']) for split in records.values() for r in split)
  assert len(set(read['source_ids'])) == info['num_examples']
