"""``verify`` and ``inspect`` on outputs of --annotations: every object checked, boxes drawn,
objects counted. The commands run in this process (their console is test_inspection's to check),
but for one contact sheet, drawn in a process of its own, against which this process's must be
byte for byte the same: another process has another hash seed."""
import io
import json
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image, ImageOps

import test_detection
from beam_pipeline import cli
from beam_pipeline.core.output.run_record import RunRecord
from beam_pipeline.inspection import contact_sheet
from helpers.commands import convert, run_cli


@pytest.fixture(scope='module')
def detection(tmp_path_factory):
  """test_detection's COCO set converted, in two splits."""
  root = tmp_path_factory.mktemp('coco')
  test_detection._coco_set(root)  # pylint: disable=protected-access
  assert convert(f'--input={root}/images', f'--output={root}/out', f'--annotations={root}/instances.json',
                 '--splits=train=0.7,validation=0.3') == 0
  return root / 'out'


def _first_shard(out):
  info = json.loads((out / 'beam_pipeline.json').read_text())
  return next(shard['file'] for split in info['splits'].values() for shard in split['shards'])


def _tampered(out, tmp_path, change):
  """A copy of ``out`` whose first shard is written again with TensorFlow's writer (valid
  framing), each Example through ``change(index, example)``, which says whether it changed
  it; returns the copy, the shard and the index of the first record changed."""
  copy = tmp_path / 'copy'
  shutil.copytree(out, copy)
  name = _first_shard(copy)
  records = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(str(copy / name))]
  changed = [index for index, example in enumerate(records) if change(index, example)]
  with tf.io.TFRecordWriter(str(copy / name)) as writer:
    for example in records:
      writer.write(example.SerializeToString())
  info = json.loads((copy / 'beam_pipeline.json').read_text())
  for split in info['splits'].values():
    for shard in split['shards']:
      if shard['file'] == name:
        shard['num_bytes'] = os.path.getsize(copy / name)
  (copy / 'beam_pipeline.json').write_text(json.dumps(info))
  return copy, name, changed[0]


def _once(change):
  """``change`` for one record only: the first after record 0 with two objects or more, so that
  neither the record nor the object named is the first by chance."""
  done = []

  def apply(index, example):
    feature = example.features.feature
    if done or index == 0 or len(feature['image/object/bbox/xmin'].float_list.value) < 2:
      return False
    change(feature)
    done.append(index)
    return True
  return apply


def _problems(out, capsys):
  capsys.readouterr()
  code = cli.main(['verify', str(out)])
  return code, [line.strip() for line in capsys.readouterr().err.splitlines() if line.startswith('  ')]


def test_verify_passes_a_detection_output(detection, capsys):
  assert cli.main(['verify', str(detection)]) == 0
  assert capsys.readouterr().out.startswith('Verified 16 records in 2 shards of ')


def _xmax_outside(feature):
  feature['image/object/bbox/xmax'].float_list.value[1] = 1.5


def _ymin_nan(feature):
  feature['image/object/bbox/ymin'].float_list.value[1] = float('nan')


def _xmin_at_xmax(feature):
  feature['image/object/bbox/xmin'].float_list.value[1] = feature['image/object/bbox/xmax'].float_list.value[1]


def _label_background(feature):
  feature['image/object/class/label'].int64_list.value[1] = 0


def _text_unknown(feature):
  feature['image/object/class/text'].bytes_list.value[1] = b'zebra'


def _area_extra(feature):
  feature['image/object/area'].float_list.value.append(1.0)


@pytest.mark.parametrize('change, problem', [
    (_xmax_outside, r"object 1's box \(xmin [0-9.]+, ymin [0-9.]+, xmax 1.5, ymax [0-9.]+\) is not within \[0, 1\]"),
    (_ymin_nan, r"object 1's box \(xmin [0-9.]+, ymin nan, .*\) holds values that are not finite"),
    (_xmin_at_xmax, r"object 1's box .* is empty or inverted"),
    (_label_background, r"object 1's class label 0 is not an id of labels.txt's classes \(1 to 3\)"),
    (_text_unknown, r'object 1\'s class text is "zebra", but labels.txt names class [123] "(bird|cat|dog)"'),
    (_area_extra, r'its object lists differ in length: image/object/area has [0-9]+ values, the others [0-9]+'),
], ids=['xmax', 'nan', 'inverted', 'label', 'text', 'length'])
def test_verify_names_the_record_and_object_that_is_wrong(detection, tmp_path, capsys, change, problem):
  out, name, index = _tampered(detection, tmp_path, _once(change))
  code, problems = _problems(out, capsys)
  assert code == 1
  assert len(problems) == 1, problems
  where = f'{name}, record {index}: '
  assert problems[0].startswith(where), problems
  assert index > 0 and re.match(problem, problems[0][len(where):]), problems


def test_verify_leaves_objects_alone_in_a_run_without_annotations(detection, tmp_path, capsys):
  """An output whose run record says it had no --annotations: its object keys are not the run's
  to check (a manifest may carry such keys)."""
  out, _, _ = _tampered(detection, tmp_path, _once(_label_background))
  info = json.loads((out / 'beam_pipeline.json').read_text())
  del info['options']['annotations']
  (out / 'beam_pipeline.json').write_text(json.dumps(info))
  assert _problems(out, capsys) == (0, [])


def test_inspect_counts_objects_per_class_and_split(detection, capsys):
  assert cli.main(['inspect', str(detection)]) == 0
  text = capsys.readouterr().out
  info = json.loads((detection / 'beam_pipeline.json').read_text())
  lines = text.splitlines()
  heading = lines.index("Classes (3), objects and share of each split's objects:")
  assert lines[heading + 1].split() == ['train', 'validation']
  for row, label in zip(lines[heading + 2:heading + 5], ['bird', 'cat', 'dog']):
    counts = [info['splits'][split]['objects'][label] for split in ('train', 'validation')]
    assert row.split()[0] == label and [int(cell) for cell in row.split()[1::2]] == counts, row
  assert 'examples and share of each split:' not in text  # the images have no class of their own


def test_contact_sheet_of_a_detection_run_shows_images_with_objects_and_is_deterministic(detection, tmp_path):
  sheets = [tmp_path / 'one.png', tmp_path / 'two.png']
  result = run_cli('inspect', detection, f'--contact_sheet={sheets[0]}', '--samples=3')
  assert result.returncode == 0, result.stderr[-3000:]
  assert cli.main(['inspect', str(detection), f'--contact_sheet={sheets[1]}', '--samples=3']) == 0
  assert sheets[0].read_bytes() == sheets[1].read_bytes()
  found = contact_sheet.samples(RunRecord.read(str(detection)), str(detection), 3)
  assert list(found) == ['bird', 'cat', 'dog']
  for label, samples in found.items():
    assert samples and all(label in [box.text for box in sample.boxes] for sample in samples), label


def _square(side, box, fill):
  """A grey PNG with the square ``box`` (x, y, w, h) filled."""
  image = Image.new('RGB', (side, side), (128, 128, 128))
  x, y, w, h = box
  image.paste(fill, (x, y, x + w, y + h))
  buffer = io.BytesIO()
  image.save(buffer, 'PNG')
  return buffer.getvalue()


def test_contact_sheet_draws_each_box_in_its_class_colour_where_it_is(tmp_path):
  """Two images of 100x50 pixels, one box each in the middle of the right half, one image per
  class: each sample's box outline is where the box is, in its class's colour."""
  (tmp_path / 'images').mkdir()
  images, annotations = [], []
  for number, name in enumerate(['apple', 'pear'], start=1):
    (tmp_path / 'images' / f'{name}.png').write_bytes(_square(100, (50, 20, 40, 60), (200, 200, 200)))
    images.append({'id': number, 'file_name': f'{name}.png', 'width': 100, 'height': 100})
    annotations.append({'id': number, 'image_id': number, 'category_id': number, 'bbox': [50, 20, 40, 60],
                        'area': 2400, 'iscrowd': 0})
  (tmp_path / 'instances.json').write_text(json.dumps({
      'images': images, 'annotations': annotations,
      'categories': [{'id': 1, 'name': 'apple'}, {'id': 2, 'name': 'pear'}]}))
  out, sheet = tmp_path / 'out', tmp_path / 'sheet.png'
  assert convert(f'--input={tmp_path}/images', f'--output={out}', f'--annotations={tmp_path}/instances.json') == 0
  assert cli.main(['inspect', str(out), f'--contact_sheet={sheet}', '--samples=2']) == 0
  with Image.open(sheet) as image:
    pixels = np.asarray(image.convert('RGB'))
  side = ImageOps.contain(Image.new('RGB', (100, 100)), (contact_sheet.CELL, contact_sheet.CELL)).width
  scale = side / 100
  for row, label in enumerate([1, 2]):
    top = 40 + row * (contact_sheet.CELL + contact_sheet.CAPTION + 8)
    left = contact_sheet.LABEL_WIDTH
    box_left, box_right = left + round(50 * scale), left + round(90 * scale) - 1
    middle = top + round(50 * scale)
    for x in (box_left, box_left + 1, box_right - 1, box_right):
      assert tuple(pixels[middle, x]) == contact_sheet.colour(label), (row, x)
    assert tuple(pixels[middle, box_left + 5]) != contact_sheet.colour(label)  # an outline, not a fill
  assert contact_sheet.colour(1) != contact_sheet.colour(2)
