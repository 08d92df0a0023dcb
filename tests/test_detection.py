"""Object-detection annotations (--annotations): COCO and Pascal VOC boxes become the Object
Detection API's keys, placed on the stored image whatever was done to it, and what cannot
be used is reported, never dropped unsaid."""
import io
import json
import os
import random
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
from PIL import Image, ImageDraw

from beam_pipeline import cli, reader
from beam_pipeline.inspection import contact_sheet
from helpers import extra_venvs, models
from helpers.commands import convert, error_line
from helpers.dataset_reader import read_errors

MODELS_PYTHON = Path(__file__).resolve().parents[1] / '.venv-models' / 'bin' / 'python'
CATEGORIES = [{'id': 3, 'name': 'cat'}, {'id': 7, 'name': 'dog'}, {'id': 9, 'name': 'bird'}]
BOX_COLOURS = {'cat': (255, 0, 0), 'dog': (0, 0, 255), 'bird': (0, 255, 0)}
# What each Exif orientation does to a point (x, y), normalized, of the file's pixels
# (the Exif specification; Pillow's ImageOps.exif_transpose).
TURNS = {1: lambda x, y: (x, y), 2: lambda x, y: (1 - x, y), 3: lambda x, y: (1 - x, 1 - y),
         4: lambda x, y: (x, 1 - y), 5: lambda x, y: (y, x), 6: lambda x, y: (1 - y, x),
         7: lambda x, y: (1 - y, 1 - x), 8: lambda x, y: (y, 1 - x)}


def _photo(width: int, height: int, boxes: List[Tuple[str, List[float]]], fmt: str, orientation: int = 1) -> bytes:
  """A grey image with each box filled in its class's colour, boxes in the file's own pixels."""
  image = Image.new('RGB', (width, height), (128, 128, 128))
  draw = ImageDraw.Draw(image)
  for name, (x, y, w, h) in boxes:
    draw.rectangle([round(x), round(y), round(x + w) - 1, round(y + h) - 1], fill=BOX_COLOURS[name])
  buffer = io.BytesIO()
  if orientation != 1:
    exif = Image.Exif()
    exif[0x0112] = orientation
    image.save(buffer, fmt, exif=exif.tobytes(), quality=95)
  else:
    image.save(buffer, fmt, **({'quality': 95} if fmt == 'JPEG' else {}))
  return buffer.getvalue()


def _coco_set(root: Path) -> Dict[str, dict]:
  """images/ and instances.json: photos with known boxes, two taken sideways (one annotated
  on the file's pixels, one on the upright picture), a negative, and annotations that cannot
  be used. Returns what each image is, by file name."""
  rng = random.Random(5)
  images, annotations, truth = [], [], {}
  names = [f'photo{i:02d}.{"png" if i % 3 == 0 else "jpg"}' for i in range(12)]
  for name in names:
    width, height = rng.choice([(96, 64), (80, 80), (64, 100)])
    boxes = []
    for _ in range(rng.randint(1, 3)):
      w, h = rng.randint(8, width // 3), rng.randint(8, height // 3)
      boxes.append((rng.choice(['cat', 'dog', 'bird']), [float(rng.randint(0, width - w)),
                                                         float(rng.randint(0, height - h)), float(w), float(h)]))
    truth[name] = {'size': (width, height), 'boxes': boxes, 'orientation': 1, 'frame': 'file'}
  truth['sideways6.jpg'] = {'size': (90, 60), 'boxes': [('dog', [10.0, 5.0, 30.0, 20.0])], 'orientation': 6,
                            'frame': 'file'}
  truth['sideways8.jpg'] = {'size': (90, 60), 'boxes': [('cat', [50.0, 30.0, 24.0, 16.0])], 'orientation': 8,
                            'frame': 'upright'}
  truth['clipped.jpg'] = {'size': (80, 60), 'boxes': [('bird', [60.0, 40.0, 30.0, 30.0])], 'orientation': 1,
                          'frame': 'file'}
  (root / 'images').mkdir(parents=True)
  category_ids = {category['name']: category['id'] for category in CATEGORIES}
  annotation_id = 100
  for number, (name, image) in enumerate(sorted(truth.items()), start=1):
    width, height = image['size']
    drawn = image['boxes'] if image['frame'] == 'file' else []
    (root / 'images' / name).write_bytes(_photo(width, height, drawn, 'PNG' if name.endswith('png') else 'JPEG',
                                                image['orientation']))
    annotated = (height, width) if image['frame'] == 'upright' else (width, height)
    images.append({'id': number, 'file_name': name, 'width': annotated[0], 'height': annotated[1]})
    image['id'] = number
    for label, bbox in image['boxes']:
      annotation_id += 1
      annotations.append({'id': annotation_id, 'image_id': number, 'category_id': category_ids[label], 'bbox': bbox,
                          'area': bbox[2] * bbox[3], 'iscrowd': int(annotation_id % 5 == 0), 'segmentation': []})
  (root / 'images' / 'negative.jpg').write_bytes(_photo(64, 48, [], 'JPEG'))
  images.append({'id': 99, 'file_name': 'negative.jpg', 'width': 64, 'height': 48})
  first = truth['photo00.png']['id']
  annotations += [
      {'id': 901, 'image_id': first, 'category_id': 3, 'bbox': [5, 5, 0, 10], 'area': 0, 'iscrowd': 0},
      {'id': 902, 'image_id': 555, 'category_id': 3, 'bbox': [5, 5, 10, 10], 'area': 100, 'iscrowd': 0},
      {'id': 903, 'image_id': first, 'category_id': 42, 'bbox': [5, 5, 10, 10], 'area': 100, 'iscrowd': 0},
      {'id': 904, 'image_id': first, 'category_id': 7, 'bbox': [500, 500, 10, 10], 'area': 100, 'iscrowd': 0},
  ]
  images.append({'id': 98, 'file_name': 'missing.jpg', 'width': 10, 'height': 10})
  (root / 'instances.json').write_text(json.dumps({'images': images, 'annotations': annotations,
                                                   'categories': CATEGORIES}))
  return truth


def _expected(image: dict) -> List[Tuple[str, Tuple[float, float, float, float]]]:
  """Each box on the upright picture, normalized and clipped: the test's own arithmetic."""
  width, height = image['size']
  if image['frame'] == 'upright':
    width, height = height, width
  turn = TURNS[image['orientation']] if image['frame'] == 'file' else TURNS[1]
  expected = []
  for label, (x, y, w, h) in image['boxes']:
    corners = [turn(min(max(px / width, 0), 1), min(max(py / height, 0), 1)) for px in (x, x + w) for py in (y, y + h)]
    xs, ys = [c[0] for c in corners], [c[1] for c in corners]
    expected.append((label, (min(xs), min(ys), max(xs), max(ys))))
  return expected


def _clipped_area(image: dict, box: List[float]) -> float:
  """The area of a COCO box [x, y, w, h] within its annotated image."""
  width, height = image['size'][::-1] if image['frame'] == 'upright' else image['size']
  x, y, w, h = box
  return (min(x + w, width) - max(x, 0)) * (min(y + h, height) - max(y, 0))


def _records(out: Path) -> Dict[str, tf.train.Example]:
  info = json.loads((out / 'beam_pipeline.json').read_text())
  records = {}
  for split in info['splits'].values():
    for shard in split['shards']:
      for raw in tf.data.TFRecordDataset(str(out / shard['file'])):
        example = tf.train.Example.FromString(raw.numpy())
        name = os.path.basename(example.features.feature['image/filename'].bytes_list.value[0].decode())
        records[name] = example
  return records


def _values(example: tf.train.Example, key: str) -> list:
  feature = example.features.feature[key]
  return list(getattr(feature, feature.WhichOneof('kind')).value) if feature.WhichOneof('kind') else []


@pytest.fixture(scope='module')
def coco(tmp_path_factory):
  root = tmp_path_factory.mktemp('coco')
  return root, _coco_set(root)


def _convert_coco(root: Path, out: Path, *options: str) -> Path:
  """``out``, the COCO set at ``root`` converted with its boxes and ``options``; --max_error_fraction=0,
  as bad annotations are reported, but spend no budget of images."""
  assert convert(f'--input={root}/images', f'--output={out}', f'--annotations={root}/instances.json', *options,
                 '--max_error_fraction=0') == 0
  return out


@pytest.fixture(scope='module')
def coco_converted(coco, tmp_path_factory) -> Path:
  """The COCO set converted with its boxes, made once: test_every_coco_box_is_stored_normalized_on_the_upright_image
  checks it, and the tests that only read it share it."""
  return _convert_coco(coco[0], tmp_path_factory.mktemp('coco-converted') / 'out')


@pytest.fixture(scope='module')
def coco_max_side(coco, tmp_path_factory) -> Path:
  """The COCO set converted with its boxes and --max_side=50."""
  return _convert_coco(coco[0], tmp_path_factory.mktemp('coco-max-side') / 'out', '--max_side=50')


@pytest.mark.parametrize('converted', ['coco_converted', 'coco_max_side'], ids=['as_is', 'max_side'])
def test_every_coco_box_is_stored_normalized_on_the_upright_image(coco, request, converted):
  root, truth = coco
  out = request.getfixturevalue(converted)
  records = _records(out)
  assert sorted(records) == sorted([*truth, 'negative.jpg'])
  labels = (out / 'labels.txt').read_text().split()
  assert labels == ['bird', 'cat', 'dog']
  assert (out / 'label_map.pbtxt').read_text() == ''.join(
      f'item {{\n  id: {i}\n  name: "{name}"\n}}\n' for i, name in enumerate(labels, start=1))
  for name, image in truth.items():
    example = records[name]
    stored = Image.open(io.BytesIO(_values(example, 'image/encoded')[0]))
    expected = _expected(image)
    got = list(zip(*(_values(example, f'image/object/bbox/{k}') for k in ('xmin', 'ymin', 'xmax', 'ymax'))))
    texts = [text.decode() for text in _values(example, 'image/object/class/text')]
    assert texts == [label for label, _ in expected], name
    assert _values(example, 'image/object/class/label') == [labels.index(label) + 1 for label in texts]
    np.testing.assert_allclose(got, [box for _, box in expected], atol=1e-6, err_msg=name)
    # A lone box is where its colour is in the stored pixels (the upright-frame photo has none drawn;
    # boxes of one image may overlap).
    if image['frame'] == 'file' and len(expected) == 1:
      pixels = np.asarray(stored.convert('RGB'), np.int16)
      for label, (xmin, ymin, xmax, ymax) in expected:
        mask = (np.abs(pixels - BOX_COLOURS[label]).sum(axis=2) < 120)
        rows, columns = np.nonzero(mask)
        w, h = stored.size
        assert abs(columns.min() - xmin * w) <= 1.5 and abs(columns.max() + 1 - xmax * w) <= 1.5, (name, label)
        assert abs(rows.min() - ymin * h) <= 1.5 and abs(rows.max() + 1 - ymax * h) <= 1.5, (name, label)
    areas = _values(example, 'image/object/area')
    scale = stored.size[0] * stored.size[1] / (image['size'][0] * image['size'][1])
    # The given area, w * h, but for a box clipped at the image's edge: its clipped box's.
    np.testing.assert_allclose(areas, [_clipped_area(image, box) * scale for _, box in image['boxes']], rtol=1e-5)
  info = json.loads((out / 'beam_pipeline.json').read_text())
  counted = {}
  for image in truth.values():
    for label, _ in image['boxes']:
      counted[label] = counted.get(label, 0) + 1
  assert info['splits']['train']['objects'] == {label: counted[label] for label in labels}
  negative = records['negative.jpg']
  assert _values(negative, 'image/object/bbox/xmin') == [] and 'image/object/bbox/xmin' in negative.features.feature
  errors = {error['detail'].split(':')[0]: error for error in read_errors(str(out))}
  assert {where for where in errors} == {'annotation id 901', 'annotation id 902', 'annotation id 903',
                                         'annotation id 904 of ' + str(root / 'images' / 'photo00.png'),
                                         'image id 98'}, errors
  assert all(error['uri'] == f'{root}/instances.json' and error['reason'] == 'bad_annotation'
             for error in errors.values())


def test_drop_unannotated_rejects_the_negatives_without_spending_the_error_budget(coco, tmp_path):
  root, truth = coco
  out = tmp_path / 'out'
  assert convert(f'--input={root}/images', f'--output={out}', f'--annotations={root}/instances.json',
                 '--drop_unannotated', '--max_error_fraction=0') == 0
  assert 'negative.jpg' not in _records(out)
  dropped = [error for error in read_errors(str(out)) if error['reason'] == 'unannotated']
  assert [error['uri'] for error in dropped] == [f'{root}/images/negative.jpg']


def _voc(name: str, width: int, height: int, objects: List[Tuple[str, List[float], int, int]]) -> str:
  parts = ''.join(f'<object><name>{label}</name><pose>Left</pose><truncated>{truncated}</truncated>'
                  f'<difficult>{difficult}</difficult><bndbox><xmin>{x1}</xmin><ymin>{y1}</ymin><xmax>{x2}</xmax>'
                  f'<ymax>{y2}</ymax></bndbox></object>'
                  for label, (x1, y1, x2, y2), truncated, difficult in objects)
  return (f'<annotation><folder>VOC2012</folder><filename>{name}</filename><size><width>{width}</width>'
          f'<height>{height}</height><depth>3</depth></size>{parts}</annotation>')


def test_pascal_voc_boxes_keep_difficult_and_truncated(tmp_path):
  (tmp_path / 'JPEGImages').mkdir()
  (tmp_path / 'Annotations').mkdir()
  (tmp_path / 'JPEGImages' / 'a.jpg').write_bytes(_photo(100, 50, [], 'JPEG'))
  (tmp_path / 'JPEGImages' / 'b.jpg').write_bytes(_photo(40, 80, [], 'JPEG'))
  (tmp_path / 'Annotations' / 'a.xml').write_text(_voc('a.jpg', 100, 50, [('person', [10, 5, 60, 45], 1, 0),
                                                                          ('dog', [0, 0, 100, 50], 0, 1)]))
  (tmp_path / 'Annotations' / 'b.xml').write_text(_voc('b.jpg', 40, 80, [('dog', [30, 10, 20, 70], 0, 0)]))
  out = tmp_path / 'out'
  assert convert(f'--input={tmp_path}/JPEGImages', f'--output={out}', f'--annotations={tmp_path}/Annotations') == 0
  records = _records(out)
  a = records['a.jpg']
  np.testing.assert_allclose(_values(a, 'image/object/bbox/xmin'), [0.1, 0.0], atol=1e-6)
  np.testing.assert_allclose(_values(a, 'image/object/bbox/ymax'), [0.9, 1.0], atol=1e-6)
  assert _values(a, 'image/object/truncated') == [1, 0] and _values(a, 'image/object/difficult') == [0, 1]
  assert _values(records['b.jpg'], 'image/object/bbox/xmin') == []  # its one box is inverted
  [error] = read_errors(str(out))
  assert error['uri'] == f'{tmp_path}/Annotations' and error['reason'] == 'bad_annotation'
  assert 'b.xml' in error['detail'] and 'object 1' in error['detail']


@pytest.mark.parametrize('args, message', [
    (['--drop_unannotated'], 'error: --drop_unannotated needs --annotations'),
    (['--annotations={root}/nothing.json'], 'error: --annotations={root}/nothing.json does not exist'),
    (['--annotations={root}/notes.txt'], 'error: --annotations={root}/notes.txt: '),
    (['--annotations={root}/instances.json', '--schema=simple'],
     "error: boxes are written in the Object Detection API's"),
])
def test_annotation_options_that_cannot_work_fail_before_any_work(coco, tmp_path, capsys, args, message):
  """In this process: each is a UsageError of the options' parsing, which the command, run in a
  process of its own, turns into its one line and exit 2 before any work, as
  tests/test_cli.py's bad invocations show."""
  root, _ = coco
  (root / 'notes.txt').write_text('boxes, somewhere')
  capsys.readouterr()
  assert convert(f'--input={root}/images', f'--output={tmp_path}/out', *(arg.format(root=root) for arg in args)) == 2
  stderr = capsys.readouterr().err
  assert error_line(stderr).startswith(message.format(root=root)), stderr
  assert len(stderr.splitlines()) == 1, stderr
  assert not (tmp_path / 'out').exists()


_MODEL_GARDEN_COCO = '''
import json, sys
import numpy as np
import tensorflow as tf
from official.vision.dataloaders import tf_example_decoder
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval
out = sys.argv[1]
info = json.load(open(out + '/beam_pipeline.json'))
files = [out + '/' + shard['file'] for split in info['splits'].values() for shard in split['shards']]
decoder = tf_example_decoder.TfExampleDecoder()
images, annotations, detections, decoded = [], [], [], {}
for number, record in enumerate(tf.data.TFRecordDataset(files), start=1):
    d = decoder.decode(record)
    height, width = int(d['height']), int(d['width'])
    name = d['source_id'].numpy().decode()
    boxes = d['groundtruth_boxes'].numpy().tolist()
    decoded[name] = {'boxes': boxes, 'classes': d['groundtruth_classes'].numpy().tolist(),
                     'is_crowd': d['groundtruth_is_crowd'].numpy().astype(int).tolist(),
                     'area': d['groundtruth_area'].numpy().tolist()}
    images.append({'id': number, 'width': width, 'height': height})
    for (ymin, xmin, ymax, xmax), label, crowd in zip(boxes, decoded[name]['classes'], decoded[name]['is_crowd']):
        bbox = [xmin * width, ymin * height, (xmax - xmin) * width, (ymax - ymin) * height]
        annotations.append({'id': len(annotations) + 1, 'image_id': number, 'category_id': label, 'bbox': bbox,
                            'area': bbox[2] * bbox[3], 'iscrowd': crowd})
        if not crowd:
            detections.append({'image_id': number, 'category_id': label, 'bbox': bbox, 'score': 1.0})
categories = [{'id': i} for i in sorted({a['category_id'] for a in annotations})]
truth = COCO()
truth.dataset = {'images': images, 'annotations': annotations, 'categories': categories}
truth.createIndex()
evaluation = COCOeval(truth, truth.loadRes(detections), 'bbox')
evaluation.evaluate(); evaluation.accumulate(); evaluation.summarize()
print(json.dumps({'decoded': decoded, 'ap': float(evaluation.stats[0])}))
'''


_MODEL_GARDEN_MASKS = """
import json, sys
import tensorflow as tf
from official.vision.dataloaders import tf_example_decoder
out = sys.argv[1]
info = json.load(open(out + '/beam_pipeline.json'))
files = [out + '/' + shard['file'] for split in info['splits'].values() for shard in split['shards']]
decoder = tf_example_decoder.TfExampleDecoder(include_mask=True)
print(json.dumps({decoder.decode(record)['source_id'].numpy().decode():
                  decoder.decode(record)['groundtruth_instance_masks'].numpy().astype(int).tolist()
                  for record in tf.data.TFRecordDataset(files)}))
"""

# Runs each (script, output) pair of its arguments, as `python -c script output` would, in this one process.
_EACH_SCRIPT = """
import contextlib, io, json, sys, traceback
results = []
for script, out in zip(sys.argv[1::2], sys.argv[2::2]):
    sys.argv = ['-c', out]
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(script, {'__name__': '__main__'})
        results.append({'stdout': printed.getvalue()})
    except Exception:
        results.append({'error': traceback.format_exc()})
print(json.dumps(results))
"""


@pytest.fixture(scope='module')
def model_garden(coco_converted, masks_max_side) -> Dict[str, Dict[str, str]]:
  """What _MODEL_GARDEN_COCO printed on coco_converted and _MODEL_GARDEN_MASKS on masks_max_side,
  by 'boxes' and 'masks': one process of .venv-models for both, as its imports take seconds; each
  script's error, if it raised one, fails only its own test."""
  done = subprocess.run([str(MODELS_PYTHON), '-c', _EACH_SCRIPT, _MODEL_GARDEN_COCO, str(coco_converted),
                         _MODEL_GARDEN_MASKS, str(masks_max_side)], capture_output=True, text=True, check=False,
                        timeout=600)
  assert done.returncode == 0, done.stderr[-3000:]
  return dict(zip(('boxes', 'masks'), json.loads(done.stdout.splitlines()[-1])))


def _printed(run: Dict[str, str]) -> dict:
  """The JSON a Model Garden script printed last."""
  assert 'error' not in run, run['error'][-3000:]
  return json.loads(run['stdout'].splitlines()[-1])


@pytest.mark.skipif(not MODELS_PYTHON.exists(), reason=extra_venvs.missing('Model Garden (.venv-models)', 'models'))
def test_model_garden_decodes_the_boxes_and_coco_evaluation_of_the_truth_gives_ap_1(coco_converted, model_garden):
  out = coco_converted
  result = _printed(model_garden['boxes'])
  assert result['ap'] == pytest.approx(1.0)
  records = _records(out)
  by_source_id = {_values(example, 'image/source_id')[0].decode(): example for example in records.values()}
  assert len(result['decoded']) == len(records)
  for source_id, decoded in result['decoded'].items():
    example = by_source_id[source_id]
    ours = list(zip(*(_values(example, f'image/object/bbox/{k}') for k in ('ymin', 'xmin', 'ymax', 'xmax'))))
    np.testing.assert_allclose(np.reshape(decoded['boxes'], (-1, 4)), np.reshape(ours, (-1, 4)), atol=1e-7)
    assert decoded['classes'] == _values(example, 'image/object/class/label')
    assert decoded['is_crowd'] == _values(example, 'image/object/is_crowd')


def test_the_reader_gives_padded_boxes_ready_for_a_keras_detection_model(coco, coco_converted, tmp_path):
  root, _ = coco
  out = coco_converted
  labels = (out / 'labels.txt').read_text().split()
  records = list(_records(out).values())
  most = max(len(_values(example, 'image/object/bbox/xmin')) for example in records)
  batches = list(reader.load(str(out), features='detection', image_size=32, batch_size=len(records)))
  [(images, boxes)] = batches
  assert images.shape == (len(records), 32, 32, 3) and float(tf.reduce_max(images)) <= 1.0
  assert boxes['boxes'].shape == (len(records), most, 4) and boxes['classes'].shape == (len(records), most)
  for row, example in enumerate(_records_in_order(out)):
    count = len(_values(example, 'image/object/bbox/xmin'))
    want = list(zip(*(_values(example, f'image/object/bbox/{k}') for k in ('ymin', 'xmin', 'ymax', 'xmax'))))
    np.testing.assert_allclose(boxes['boxes'][row, :count].numpy().reshape(-1, 4), np.reshape(want, (-1, 4)))
    assert (boxes['boxes'][row, count:].numpy() == -1).all() and (boxes['classes'][row, count:].numpy() == -1).all()
    texts = [labels[i] for i in boxes['classes'][row, :count].numpy()]
    assert texts == [text.decode() for text in _values(example, 'image/object/class/text')]
    # 0-based as Keras counts classes; the records (and label_map.pbtxt) count from 1
    assert list(boxes['classes'][row, :count].numpy() + 1) == _values(example, 'image/object/class/label')
  padded = next(iter(reader.load(str(out), features='detection', image_size=32, batch_size=2, max_boxes=5)))
  assert padded[1]['boxes'].shape == (2, 5, 4)
  with pytest.raises(tf.errors.InvalidArgumentError, match='more boxes than max_boxes=1'):
    list(reader.load(str(out), features='detection', image_size=32, batch_size=2, max_boxes=1))
  plain = tmp_path / 'plain'
  assert convert(f'--input={root}/images', f'--output={plain}', '--skip_transform') == 0
  with pytest.raises(ValueError, match='no boxes'):
    reader.load(str(plain), features='detection')


def _records_in_order(out: Path) -> List[tf.train.Example]:
  """The records of the one split, in the order the reader reads them (shard by shard)."""
  info = json.loads((out / 'beam_pipeline.json').read_text())
  return [tf.train.Example.FromString(raw.numpy()) for shard in info['splits']['train']['shards']
          for raw in tf.data.TFRecordDataset(str(out / shard['file']))]


def test_an_automl_detection_csv_is_the_manifest_and_the_boxes(tmp_path, capsys):
  """AutoML Vision's layout: one box a row, normalized, two vertices or four; a row with none
  is a negative; an image's rows become one record; a bad row is reported with its number."""
  photos_dir = tmp_path / 'photos'
  photos_dir.mkdir()
  (photos_dir / 'a.jpg').write_bytes(_photo(100, 50, [('cat', [10, 5, 50, 40])], 'JPEG'))
  (photos_dir / 'b.png').write_bytes(_photo(60, 60, [], 'PNG'))
  (photos_dir / 'c.jpg').write_bytes(_photo(90, 60, [('dog', [9, 6, 27, 18])], 'JPEG', orientation=6))
  (photos_dir / 'd.jpg').write_bytes(_photo(40, 40, [], 'JPEG'))
  (tmp_path / 'boxes.csv').write_text(
      'TRAIN,photos/a.jpg,cat,0.1,0.1,,,0.6,0.9,,\n'
      'TRAIN,photos/a.jpg,dog,0.5,0.2,0.9,0.2,0.9,0.7,0.5,0.7\n'
      'VALIDATION,photos/b.png,,,,,,,,,\n'
      'TRAIN,photos/c.jpg,dog,0.1,0.1,,,0.4,0.4,,\n'
      'TRAIN,photos/d.jpg,cat,0.5,0.5,,,0.2,0.9,,\n'
      'TRAIN,photos/d.jpg,cat,0.2,0.2,,,0.4,0.4,,\n')
  out = tmp_path / 'out'
  assert convert(f'--input={tmp_path}/boxes.csv', f'--output={out}', '--max_error_fraction=0.5') == 0
  records = _records(out)
  assert sorted(records) == ['a.jpg', 'b.png', 'c.jpg', 'd.jpg']
  a = records['a.jpg']
  assert [text.decode() for text in _values(a, 'image/object/class/text')] == ['cat', 'dog']
  corners = (_values(a, f'image/object/bbox/{k}') for k in ('xmin', 'ymin', 'xmax', 'ymax'))
  np.testing.assert_allclose(list(zip(*corners)), [(0.1, 0.1, 0.6, 0.9), (0.5, 0.2, 0.9, 0.7)], atol=1e-6)
  assert _values(records['b.png'], 'image/object/bbox/xmin') == []
  # c.jpg was taken sideways (Exif 6): stored upright, its box turned with it.
  c = records['c.jpg']
  np.testing.assert_allclose([_values(c, f'image/object/bbox/{k}')[0] for k in ('xmin', 'ymin', 'xmax', 'ymax')],
                             [1 - 0.4, 0.1, 1 - 0.1, 0.4], atol=1e-6)
  assert _values(records['d.jpg'], 'image/object/bbox/xmin') == pytest.approx([0.2])
  info = json.loads((out / 'beam_pipeline.json').read_text())
  assert info['splits']['validation']['num_examples'] == 1
  assert info['splits']['train']['objects'] == {'cat': 2, 'dog': 2}
  [bad] = read_errors(str(out))
  assert (bad['uri'], bad['reason']) == (f'{tmp_path}/boxes.csv:row 5', 'bad_manifest_row')
  assert 'inverted' in bad['detail']
  dropped = tmp_path / 'dropped'
  assert convert(f'--input={tmp_path}/boxes.csv', f'--output={dropped}', '--drop_unannotated',
                 '--max_error_fraction=0.5') == 0
  assert sorted(_records(dropped)) == ['a.jpg', 'c.jpg', 'd.jpg']
  capsys.readouterr()
  assert convert(f'--input={tmp_path}/boxes.csv', f'--output={tmp_path}/x', f'--annotations={tmp_path}/boxes.csv') == 2
  assert 'holds the boxes itself' in error_line(capsys.readouterr().err)


def _nearest(mask: np.ndarray, size: Tuple[int, int]) -> np.ndarray:
  """``mask`` resized to ``size`` (width, height) by nearest neighbour, as Pillow does it."""
  return np.asarray(Image.fromarray(mask).resize(size, Image.Resampling.NEAREST))


def _mask_set(root: Path) -> Dict[str, np.ndarray]:
  """Photos with one masked object each, the masks given as RLE counts, COCO's compressed RLE
  and a polygon (on a photo taken sideways); returns each mask as the file's pixels carry it."""
  from pycocotools import mask as coco_mask  # pylint: disable=import-outside-toplevel
  (root / 'images').mkdir(parents=True)
  rows, columns = np.mgrid[0:40, 0:60]
  ellipse = (((columns - 25) / 18) ** 2 + ((rows - 22) / 11) ** 2 <= 1).astype(np.uint8)
  ring = ((((columns - 30) / 20) ** 2 + ((rows - 20) / 15) ** 2 <= 1) &
          (((columns - 30) / 8) ** 2 + ((rows - 20) / 6) ** 2 > 1)).astype(np.uint8)
  polygon = [[10.0, 5.0, 80.0, 10.0, 40.0, 55.0]]
  triangle = coco_mask.decode(coco_mask.merge(coco_mask.frPyObjects(polygon, 60, 90)))
  masks = {'ellipse.png': ellipse, 'ring.jpg': ring, 'triangle.jpg': triangle}
  counts, value, run = [], 0, 0
  for pixel in ellipse.flatten(order='F'):
    if pixel != value:
      counts.append(run)
      value, run = pixel, 0
    run += 1
  counts.append(run)
  compressed = coco_mask.encode(np.asfortranarray(ring))
  segmentations = {'ellipse.png': {'size': [40, 60], 'counts': counts},
                   'ring.jpg': {'size': [40, 60], 'counts': compressed['counts'].decode('ascii')},
                   'triangle.jpg': polygon}
  images, annotations = [], []
  for number, (name, mask) in enumerate(sorted(masks.items()), start=1):
    height, width = mask.shape
    (root / 'images' / name).write_bytes(_photo(width, height, [], 'PNG' if name.endswith('png') else 'JPEG',
                                                6 if name == 'triangle.jpg' else 1))
    ys, xs = np.nonzero(mask)
    images.append({'id': number, 'file_name': name, 'width': width, 'height': height})
    annotations.append({'id': number, 'image_id': number, 'category_id': 3, 'iscrowd': int(name == 'ring.jpg'),
                        'bbox': [float(xs.min()), float(ys.min()), float(xs.max() + 1 - xs.min()),
                                 float(ys.max() + 1 - ys.min())], 'area': float(mask.sum()),
                        'segmentation': segmentations[name]})
  (root / 'masks.json').write_text(json.dumps({'images': images, 'annotations': annotations,
                                               'categories': CATEGORIES}))
  return masks


@pytest.fixture(scope='module')
def mask_set(tmp_path_factory) -> Tuple[Path, Dict[str, np.ndarray]]:
  """_mask_set's photos and masks.json, made once for the module: (root, masks)."""
  root = tmp_path_factory.mktemp('masks')
  return root, _mask_set(root)


def _convert_masks(root: Path, out: Path, *options: str) -> Path:
  """``out``, the mask set at ``root`` converted with --include_masks and ``options``."""
  assert convert(f'--input={root}/images', f'--output={out}', f'--annotations={root}/masks.json',
                 '--include_masks', *options) == 0
  return out


@pytest.fixture(scope='module')
def masks_converted(mask_set, tmp_path_factory) -> Path:
  """The mask set converted with --include_masks, made once for the tests that read it (a test
  that changes it works on a copy)."""
  return _convert_masks(mask_set[0], tmp_path_factory.mktemp('masks-converted') / 'out')


@pytest.fixture(scope='module')
def masks_max_side(mask_set, tmp_path_factory) -> Path:
  """The mask set converted with --include_masks and --max_side=35, its masks resized."""
  return _convert_masks(mask_set[0], tmp_path_factory.mktemp('masks-max-side') / 'out', '--max_side=35')


@pytest.mark.parametrize('converted', ['masks_converted', 'masks_max_side'], ids=['as_is', 'max_side'])
def test_every_mask_pixel_follows_the_image_turned_and_resized_by_nearest_neighbour(mask_set, request, converted):
  _, masks = mask_set
  records = _records(request.getfixturevalue(converted))
  for name, mask in masks.items():
    example = records[name]
    [png] = _values(example, 'image/object/mask')
    stored = Image.open(io.BytesIO(_values(example, 'image/encoded')[0]))
    upright = np.rot90(mask, k=-1) if name == 'triangle.jpg' else mask  # Exif 6: a quarter turn clockwise
    got = np.asarray(Image.open(io.BytesIO(png)))
    assert got.shape == (stored.size[1], stored.size[0]), name
    np.testing.assert_array_equal(got, _nearest(upright, stored.size), err_msg=name)


def test_the_contact_sheet_tints_each_mask_in_its_boxs_colour(mask_set, masks_converted, tmp_path):
  root, masks = mask_set
  without = tmp_path / 'without'  # the same boxes, no --include_masks
  assert convert(f'--input={root}/images', f'--output={without}', f'--annotations={root}/masks.json',
                 '--skip_transform') == 0
  tinted = {}
  for run, out in (('with', masks_converted), ('without', without)):
    assert cli.main(['inspect', str(out), f'--contact_sheet={tmp_path}/{run}.png']) == 0
    pixels = np.asarray(Image.open(tmp_path / f'{run}.png').convert('RGB'), np.int16)
    grey, blue = np.array([128, 128, 128]), np.array(contact_sheet.colour(1))
    blend = grey + (blue - grey) * contact_sheet.MASK_OPACITY / 255
    tinted[run] = int((np.abs(pixels - blend).sum(axis=2) <= 6).sum())
  # The masks cover some hundreds of thumbnail pixels (the images are shown at twice their size or so).
  scale = (contact_sheet.CELL / 90) ** 2
  assert tinted['without'] == 0
  assert tinted['with'] >= 0.5 * scale * sum(int(mask.sum()) for mask in masks.values()), tinted


def test_masks_need_a_coco_segmentation_for_every_object(coco, tmp_path, capsys):
  root, _ = coco  # its annotations have no segmentation: every object is reported, none stored
  out = tmp_path / 'out'
  assert convert(f'--input={root}/images', f'--output={out}', f'--annotations={root}/instances.json',
                 '--include_masks', '--skip_transform') == 0
  assert all(_values(example, 'image/object/mask') == [] for example in _records(out).values())
  assert any('has no segmentation' in error['detail'] for error in read_errors(str(out)))
  voc = tmp_path / 'voc'
  voc.mkdir()
  (voc / 'a.xml').write_text(_voc('a.jpg', 10, 10, []))
  capsys.readouterr()
  assert convert(f'--input={root}/images', f'--output={tmp_path}/x', f'--annotations={voc}', '--include_masks') == 2
  assert 'Pascal VOC, which has none' in error_line(capsys.readouterr().err)


@pytest.mark.skipif(not MODELS_PYTHON.exists(), reason=extra_venvs.missing('Model Garden (.venv-models)', 'models'))
def test_model_garden_decodes_the_masks(masks_max_side, model_garden):
  decoded = _printed(model_garden['masks'])
  records = _records(masks_max_side)
  assert len(decoded) == len(records) == 3
  for example in records.values():
    [png] = _values(example, 'image/object/mask')
    ours = np.asarray(Image.open(io.BytesIO(png)))
    np.testing.assert_array_equal(np.asarray(decoded[_values(example, 'image/source_id')[0].decode()]), ours[None])


def test_embeddings_and_the_transform_graph_work_beside_the_boxes(coco, saved, tmp_path):
  root, truth = coco
  out = tmp_path / 'out'
  assert convert(f'--input={root}/images', f'--output={out}', f'--annotations={root}/instances.json',
                 f'--embedding_model={saved["keras"]}', f'--embedding_image_size={models.SIZE}') == 0
  records = _records(out)
  assert all(_values(example, 'image/embedding') for example in records.values())
  assert [text.decode() for text in _values(records['sideways6.jpg'], 'image/object/class/text')] == ['dog']
  transform = tft.TFTransformOutput(str(out))
  batch = tf.constant([example.SerializeToString() for example in records.values()])
  transformed = transform.transform_features_layer()(tf.io.parse_example(batch, transform.raw_feature_spec()))
  assert transformed['image'].shape[0] == len(records)
  assert all(int(label) == -1 for label in transformed['label'])  # the images have no label of their own


def test_verify_checks_there_is_a_mask_of_the_images_size_for_every_object(masks_converted, tmp_path, capsys):
  out = tmp_path / 'out'
  shutil.copytree(masks_converted, out)  # changed below: the shared conversion stays as it was
  assert cli.main(['verify', str(out)]) == 0
  info = json.loads((out / 'beam_pipeline.json').read_text())
  [shard] = [shard for split in info['splits'].values() for shard in split['shards']]
  examples = [tf.train.Example.FromString(raw.numpy()) for raw in tf.data.TFRecordDataset(str(out / shard['file']))]
  masks = examples[1].features.feature['image/object/mask'].bytes_list.value
  masks[0] = _photo(7, 5, [], 'PNG')
  del examples[2].features.feature['image/object/mask'].bytes_list.value[:]
  with tf.io.TFRecordWriter(str(out / shard['file'])) as writer:
    for example in examples:
      writer.write(example.SerializeToString())
  shard['num_bytes'] = os.path.getsize(out / shard['file'])
  (out / 'beam_pipeline.json').write_text(json.dumps(info))
  capsys.readouterr()
  assert cli.main(['verify', str(out)]) == 1
  problems = [line.strip() for line in capsys.readouterr().err.splitlines() if line.startswith('  ')]
  assert problems == [f'{shard["file"]}, record 1: object 0\'s mask is 7x5, the image '
                      f'{_values(examples[1], "image/width")[0]}x{_values(examples[1], "image/height")[0]}',
                      f'{shard["file"]}, record 2: it has 0 masks for 1 object'], problems


# The Object Detection API's TfExampleDecoder parses these keys, with these types (its
# keys_to_features, PNG masks), before any of its handlers run.
_OBJECT_DETECTION_API_SPEC = {
    **{key: tf.io.FixedLenFeature((), tf.string, default_value='') for key in (
        'image/encoded', 'image/filename', 'image/key/sha256', 'image/source_id')},
    'image/format': tf.io.FixedLenFeature((), tf.string, default_value='jpeg'),
    'image/height': tf.io.FixedLenFeature((), tf.int64, default_value=1),
    'image/width': tf.io.FixedLenFeature((), tf.int64, default_value=1),
    **{key: tf.io.VarLenFeature(tf.int64) for key in (
        'image/class/label', 'image/neg_category_ids', 'image/not_exhaustive_category_ids', 'image/object/class/label',
        'image/object/is_crowd', 'image/object/difficult', 'image/object/group_of')},
    **{key: tf.io.VarLenFeature(tf.float32) for key in (
        'image/class/confidence', 'image/object/bbox/xmin', 'image/object/bbox/xmax', 'image/object/bbox/ymin',
        'image/object/bbox/ymax', 'image/object/area', 'image/object/weight', 'image/object/mask/weight')},
    **{key: tf.io.VarLenFeature(tf.string) for key in ('image/class/text', 'image/object/class/text',
                                                        'image/object/mask')},
}


def test_the_object_detection_apis_key_spec_parses_every_record_to_its_boxes(masks_converted):
  out = masks_converted
  for name, example in _records(out).items():
    parsed = tf.io.parse_single_example(example.SerializeToString(), _OBJECT_DETECTION_API_SPEC)
    dense = {key: tf.sparse.to_dense(value).numpy().tolist() for key, value in parsed.items()
             if isinstance(value, tf.sparse.SparseTensor)}
    for side in ('xmin', 'ymin', 'xmax', 'ymax'):
      assert dense[f'image/object/bbox/{side}'] == _values(example, f'image/object/bbox/{side}'), name
    assert dense['image/object/class/label'] == _values(example, 'image/object/class/label') == [1]
    assert dense['image/object/mask'] == _values(example, 'image/object/mask')
    assert dense['image/object/is_crowd'] == [int(name == 'ring.jpg')]
    assert parsed['image/source_id'].numpy() == _values(example, 'image/source_id')[0]
    assert (int(parsed['image/height']), int(parsed['image/width'])) == (
        _values(example, 'image/height')[0], _values(example, 'image/width')[0])
