"""``verify`` and ``inspect`` on real outputs: damage found and named, pictures drawn.

The command runs in this process (cli.main) where only its exit code and what it says are
checked; in a subprocess where its console must also stay free of the libraries' chatter."""
import io
import json
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from beam_pipeline import cli
from beam_pipeline.core.output import errors_output, output_layout
from beam_pipeline.core.messages import Rejection
from helpers import photos
from helpers.commands import chatter, convert, run_cli


@pytest.fixture(scope='module', params=['none', 'gzip'])
def output(request, tmp_path_factory):
  """A completed output of three classes in several shards, plain or gzip."""
  root = tmp_path_factory.mktemp(f'output-{request.param}')
  files = photos.labelled(('ant', 'bee', 'cat'), 30, seed=2, size=(80, 60))
  files['cat/broken.jpg'] = b'<html>not an image</html>'
  photos.write_files(root / 'in', files)
  assert convert(f'--input={root}/in', f'--output={root}/out', '--splits=train=0.8,validation=0.2',
                 '--target_shard_mb=0.05', f'--compression={request.param}', '--max_error_fraction=0.5') == 0
  return root / 'out'


def shards(out):
  info = json.loads((out / 'beam_pipeline.json').read_text())
  return [shard['file'] for split in info['splits'].values() for shard in split['shards']]


def damaged(output, tmp_path):
  copy = tmp_path / 'copy'
  shutil.copytree(output, copy)
  return copy


def test_verify_passes_an_intact_output(output):
  result = run_cli('verify', output)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.startswith(f'Verified 90 records in {len(shards(output))} shards of {output}: all intact.')
  assert not chatter(result.stderr), result.stderr


def test_verify_reports_what_the_decoders_print_in_one_line_off_the_console(tmp_path):
  """A JPEG with bytes between its scan and its end marker decodes, and libjpeg warns
  each time it does: verify says so once, and standard error stays clean."""
  files = photos.labelled(('ant', 'bee'), 3, seed=4)
  jpeg = photos.jpeg(9)
  files['bee/padded.jpg'] = jpeg[:-2] + bytes(50) + jpeg[-2:]
  photos.write_files(tmp_path / 'in', files)
  assert convert(f'--input={tmp_path}/in', f'--output={tmp_path}/out') == 0
  result = run_cli('verify', tmp_path / 'out')
  assert result.returncode == 0, result.stderr[-3000:]
  verdict, note = result.stdout.splitlines()
  assert verdict == f'Verified 7 records in 1 shard of {tmp_path}/out: all intact.'
  assert re.fullmatch(r'The image decoders printed 1 warning\(s\), the first: "Corrupt JPEG data: [0-9]+ extraneous '
                      r'bytes before marker 0xd9"\. An image that warns but decodes to its recorded size is intact; '
                      r'TensorFlow prints the same when training reads it\.', note), note
  assert result.stderr == ''


def test_verify_counts_libpngs_warnings_too(tmp_path):
  """A PNG whose colour profile libpng finds wrong (an iCCP chunk too short) decodes, and libpng
  warns each time, through TensorFlow's log, as training will print it: verify says so too, and
  standard error stays clean."""
  files = photos.labelled(('ant',), 2, seed=5)
  buffer = io.BytesIO()
  Image.new('RGB', (40, 30), (200, 10, 10)).save(buffer, 'PNG', icc_profile=b'\x00' * 200)
  files['ant/profile.png'] = buffer.getvalue()
  photos.write_files(tmp_path / 'in', files)
  assert convert(f'--input={tmp_path}/in', f'--output={tmp_path}/out', '--skip_transform') == 0
  result = run_cli('verify', tmp_path / 'out')
  assert result.returncode == 0, result.stderr[-3000:]
  verdict, note = result.stdout.splitlines()
  assert verdict == f'Verified 3 records in 1 shard of {tmp_path}/out: all intact.'
  assert note.startswith('The image decoders printed 1 warning(s), the first: "PNG warning: iCCP: too short".')
  assert result.stderr == ''


def test_verify_names_the_shard_and_record_of_a_flipped_byte(output, tmp_path, capsys):
  """A byte flipped in the middle of a plain shard's third record (inside its image) fails
  that record's CRC; in a gzip shard, the stream itself."""
  out = damaged(output, tmp_path)
  name = shards(out)[1]
  data = bytearray((out / name).read_bytes())
  if name.endswith('.gz'):
    at = len(data) // 2
  else:
    at, length = 0, 0
    for _ in range(3):
      at += length
      length = 8 + 4 + int.from_bytes(data[at:at + 8], 'little') + 4
    at += length // 2
  data[at] ^= 0xFF
  (out / name).write_bytes(bytes(data))
  capsys.readouterr()
  assert cli.main(['verify', str(out)]) == 1
  problems = capsys.readouterr().err.splitlines()
  first = next(line for line in problems if line.startswith('  '))
  if name.endswith('.gz'):
    assert first.startswith(f'  {name}, record ') and 'damaged' in first, problems
  else:
    assert first.startswith(f'  {name}, record 2: the file is damaged here: a record fails its checksum (at byte '), \
        problems
  assert not any('{{' in line or 'function_node' in line for line in problems), problems


def test_verify_finds_a_truncated_a_removed_and_a_stray_shard(output, tmp_path, capsys):
  out = damaged(output, tmp_path)
  first, second, *_ = shards(out)
  data = (out / first).read_bytes()
  (out / first).write_bytes(data[:len(data) * 2 // 3])
  (out / second).unlink()
  stray = first.replace('-00000-', '-00099-')
  shutil.copy(out / first, out / stray)
  capsys.readouterr()
  assert cli.main(['verify', str(out)]) == 1
  problems = [line.strip() for line in capsys.readouterr().err.splitlines() if line.startswith('  ')]
  assert f'{second}: listed in beam_pipeline.json but missing' in problems
  assert f'{stray}: not listed in beam_pipeline.json' in problems
  truncated = [problem for problem in problems if problem.startswith(first)]
  assert any('bytes, beam_pipeline.json says' in problem for problem in truncated), problems
  assert any('records read, beam_pipeline.json says' in problem for problem in truncated), problems


def _rewrite_shard(out, name, change) -> None:
  """Writes shard ``name`` again, each serialized record through ``change(index, example)``
  (an Example to write, or bytes), with TensorFlow's writer, so every frame is valid; its
  size in beam_pipeline.json follows."""
  info = json.loads((out / 'beam_pipeline.json').read_text())
  compression = info['compression'].upper() if info['compression'] != 'none' else ''
  records = [tf.train.Example.FromString(r.numpy())
             for r in tf.data.TFRecordDataset(str(out / name), compression_type=compression)]
  with tf.io.TFRecordWriter(str(out / name), compression) as writer:
    for index, example in enumerate(records):
      changed = change(index, example)
      writer.write(changed if isinstance(changed, bytes) else changed.SerializeToString())
  for split in info['splits'].values():
    for shard in split['shards']:
      if shard['file'] == name:
        shard['num_bytes'] = os.path.getsize(out / name)
  (out / 'beam_pipeline.json').write_text(json.dumps(info))


def test_verify_checks_each_record_against_what_it_records(output, tmp_path, capsys):
  """Records with valid framing that say something false: another image under the first one's
  hash (of the same size), a height the image does not have, bytes that are no Example.
  Expected: exit 1, each named by shard and record index with what is wrong."""
  out = damaged(output, tmp_path)
  name = shards(out)[0]
  other = photos.jpeg(99, 80, 60)

  def tamper(index, example):
    feature = example.features.feature
    if index == 0:
      feature['image/encoded'].bytes_list.value[0] = other
    elif index == 1:
      feature['image/height'].int64_list.value[0] += 1
    elif index == 2:
      return b'these bytes are no tf.train.Example'
    return example

  _rewrite_shard(out, name, tamper)
  capsys.readouterr()
  assert cli.main(['verify', str(out)]) == 1
  problems = [line.strip() for line in capsys.readouterr().err.splitlines() if line.startswith('  ')]
  assert problems[0] == f'{name}, record 0: its image bytes do not match image/key/sha256'
  assert problems[1] == f'{name}, record 1: decodes to 80x60, recorded as 80x61'
  assert problems[2].startswith(f'{name}, record 2: does not parse or decode: ')
  assert len(problems) == 3


def test_verify_finds_an_embedding_that_is_not_finite(output, tmp_path, capsys):
  """An output whose beam_pipeline.json says its records hold 2-value embeddings; one record's
  holds a NaN. Expected: exit 1, that record named."""
  out = damaged(output, tmp_path)
  info = json.loads((out / 'beam_pipeline.json').read_text())
  info['embedding'] = {'model': 'm.keras', 'sha256': '0' * 64, 'input_size': [32, 32, 3], 'input': 'RGB',
                       'output_shape': [2], 'num_values': 2, 'key': 'image/embedding',
                       'shape_key': 'image/embedding/shape', 'images_stored': True}
  (out / 'beam_pipeline.json').write_text(json.dumps(info))

  def embed(first_shard):
    def change(index, example):
      value = float('nan') if first_shard and index == 3 else 1.0
      example.features.feature['image/embedding'].float_list.value.extend([0.5, value])
      example.features.feature['image/embedding/shape'].int64_list.value.append(2)
      return example
    return change

  for number, name in enumerate(shards(out)):
    _rewrite_shard(out, name, embed(number == 0))
  capsys.readouterr()
  assert cli.main(['verify', str(out)]) == 1
  problems = [line.strip() for line in capsys.readouterr().err.splitlines() if line.startswith('  ')]
  assert problems == [f'{shards(out)[0]}, record 3: its embedding holds values that are not finite (NaN or infinity)']


def test_verify_refuses_an_incomplete_output(output, tmp_path, capsys):
  out = damaged(output, tmp_path)
  (out / 'beam_pipeline.json').unlink()
  capsys.readouterr()
  assert cli.main(['verify', str(out)]) == 2
  assert 'is not a completed conversion' in capsys.readouterr().err


def test_inspect_draws_a_contact_sheet_and_plots_and_lists_the_errors(output, tmp_path):
  sheet, plots = tmp_path / 'sheet.png', tmp_path / 'plots.png'
  result = run_cli('inspect', output, f'--contact_sheet={sheet}', f'--plots={plots}', '--errors', '--samples=4')
  assert result.returncode == 0, result.stderr[-3000:]
  assert not chatter(result.stderr), result.stderr
  text = result.stdout
  assert 'Classes (3), examples and share of each split:' in text and 'Images by longer side:' in text
  assert 'not_image: 1\n' in text and 'cat/broken.jpg: not a recognised image format' in text
  assert f'Contact sheet: {sheet}' in text and f'Plots: {plots}' in text
  with Image.open(sheet) as image:
    assert image.width >= 4 * 128 and image.height >= 3 * 128
    pixels = np.asarray(image.convert('L'), dtype=np.float32)
  assert pixels.std() > 20  # photos and captions, not a blank page
  rows = [pixels[40 + row * 154:40 + row * 154 + 128, 170:] for row in range(3)]
  assert all(row.std() > 20 for row in rows)  # every class's row holds pictures
  with Image.open(plots) as image:
    assert image.width >= 600 and image.height >= 600
    assert np.asarray(image.convert('L'), dtype=np.float32).std() > 10
  assert os.path.getsize(plots) > 10_000


def test_the_contact_sheet_samples_every_split_and_captions_each_tile_with_its_class_and_split(output):
  """Not the first records in shard order, which are all training images: each class's row takes
  the splits in turn."""
  from beam_pipeline.core.output.run_record import RunRecord  # pylint: disable=import-outside-toplevel
  from beam_pipeline.inspection import contact_sheet  # pylint: disable=import-outside-toplevel
  found = contact_sheet.samples(RunRecord.read(str(output)), str(output), 4)
  assert list(found) == ['ant', 'bee', 'cat']
  for label, samples in found.items():
    assert len(samples) == 4 and {sample.split for sample in samples} == {'train', 'validation'}
    assert [contact_sheet.tile_caption(sample) for sample in samples[:2]] == [f'{label} · train',
                                                                             f'{label} · validation']


def test_inspect_reads_every_errors_file_of_a_run_that_needed_several(output, tmp_path, capsys):
  """A run with more rejections than errors_output.REJECTIONS_PER_FILE lists them in several
  files: inspect counts them all, reason by reason, and its summary names them by a glob."""
  out = tmp_path / 'out'
  shutil.copytree(output, out)
  info = json.loads((out / 'beam_pipeline.json').read_text())
  (out / info['errors_file']).unlink()
  names = output_layout.errors_files(3)
  rejected = [Rejection(f'{out}/in/{i}.jpg', ('empty', 'truncated')[i % 3 == 0], 'x') for i in range(30)]
  for index, name in enumerate(names):
    (out / name).write_text(errors_output.file_text(r for r in rejected if errors_output.file_index(r.uri, 3) == index))
  info.update(errors_file=output_layout.errors_pattern(3), errors_files=names, num_errors=30,
              errors_by_reason=errors_output.by_reason(rejected))
  (out / 'beam_pipeline.json').write_text(json.dumps(info))
  capsys.readouterr()
  assert cli.main(['inspect', str(out), '--errors']) == 0
  text = capsys.readouterr().out
  assert 'empty: 20\n' in text and 'truncated: 10\n' in text, text
  assert '... and 17 more' in text and '... and 7 more' in text
  assert f'see {out}/errors-*-of-00003.jsonl' in text


@pytest.mark.parametrize('edge, unit, label', [
    ('1', 'px', '1 px'), ('2', 'px', '2-3 px'), ('256', 'px', '256-511 px'),
    ('0', 'KiB', '<1 KiB'), ('1', 'KiB', '1-2 KiB'), ('2', 'KiB', '2-4 KiB'), ('512', 'KiB', '512 KiB-1 MiB'),
    ('1024', 'KiB', '1-2 MiB'), ('524288', 'KiB', '512 MiB-1 GiB'),
])
def test_a_size_bin_reads_as_the_range_it_holds(edge, unit, label):
  """Sides are whole pixels (a bin ends one below the next); sizes are bytes floored to KiB, so
  the bins meet. Before: '1-1 KiB', '2-3 KiB' (which holds 3.9 KiB)."""
  from beam_pipeline.inspection import overview  # pylint: disable=import-outside-toplevel
  assert overview.bin_label(edge, unit) == label
