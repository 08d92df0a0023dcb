"""Every shell and Python block of the README that can run offline runs, as written, in a
temporary folder: the blocks are read from the file, so the README cannot drift from
what the command and the readers do. Each block that does not run says why."""
import ast
import builtins
import json
import os
import re
import shutil
import subprocess
import symtable
import sys
import textwrap
import traceback
from pathlib import Path
from typing import List, Optional
from unittest import mock

import pytest
from PIL import Image

from beam_pipeline.synthetic import sample_set
from helpers import extra_venvs, readme
from helpers.commands import ROOT, TIMEOUT, convert
from helpers.dataset_reader import read_output

MODELS_PYTHON = ROOT / '.venv-models' / 'bin' / 'python'
ACTIVATE = '. .venv/bin/activate'

# What a block may use without defining it, as a reader of the README would have it: the
# model being trained, the class names, TensorFlow.
GIVEN = {
    'model': textwrap.dedent('''\
        import keras
        model = keras.Sequential([keras.Input((224, 224, 3)), keras.layers.GlobalAveragePooling2D(),
                                  keras.layers.Dense(2)])
        model.compile('adam', keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        '''),
    'labels': "labels = open('out/labels.txt').read().split()\n",
    'tf': 'import tensorflow as tf\n',
}
# A tf.data pipeline does nothing until read: every dataset a block leaves yields its first element.
READ_DATASETS = textwrap.dedent('''
    import sys as _sys
    if 'tensorflow' in _sys.modules:
        for _value in list(globals().values()):
            if isinstance(_value, _sys.modules['tensorflow'].data.Dataset):
                next(iter(_value))
    ''')
# Offline, pretrained weights cannot be downloaded: the same network, initialised at random.
OFFLINE = {"weights='imagenet'": 'weights=None'}


def why_not_offline(block: readme.Block) -> Optional[str]:
  """Why this file does not run ``block``: it cannot run on this offline machine, or another test
  runs it; None if this file runs it."""
  text = block.text
  if '--dry_run=True' in text and not re.search(r'\$BUCKET|\$PROJECT', text):
    return 'tests/test_first_hour_deploy.py runs it as written, on a machine with no credentials at all'
  if re.search(r'gs://|\$BUCKET|\$PROJECT', text):
    return 'needs a Google Cloud project (tests/test_gcs.py and the Dataflow tests run it against the emulator)'
  if re.search(r'^(docker|gcloud) ', text, re.M):
    return 'needs Docker or gcloud'
  if 'from airflow' in text:
    return 'needs Airflow, which cannot share this environment (tests/test_airflow.py runs this DAG)'
  if 'airflow dags test' in text:
    return 'builds and runs Airflow (tests/test_airflow_readme.py runs this block, but make)'
  if re.search(r'^airflow ', text, re.M):
    return 'needs an Airflow deployment (tests/test_airflow.py loads and runs the DAGs)'
  if re.search(r'^make ', text, re.M):
    return "make's own targets: CI runs make test, and make run's conversion is the Usage block"
  if re.search(r'pip install', text):
    return 'installs from the package registry, as make install does'
  if 'import torch' in text:
    return 'needs PyTorch, which make test does not install (tests/test_readers.py reads with the tfrecord package)'
  if 'device_id=0' in text:
    return "needs a GPU (tests/test_readers.py reads with DALI's CPU decoder)"
  return None


def free_names(source: str) -> List[str]:
  """The names ``source`` uses but neither defines nor imports, nor Python provides."""
  module = symtable.symtable(source, '<block>', 'exec')
  defined = {symbol.get_name() for symbol in module.get_symbols() if symbol.is_assigned() or symbol.is_imported()}
  used, tables = set(), [module]
  while tables:
    table = tables.pop()
    used |= {symbol.get_name() for symbol in table.get_symbols() if symbol.is_referenced() and symbol.is_global()}
    tables.extend(table.get_children())
  return sorted(used - defined - set(dir(builtins)))


def python_of(source: str) -> str:
  """The interpreter a block runs in: Model Garden's blocks in its environment (it pins TensorFlow 2.20)."""
  imported = {alias.name.split('.')[0] for node in ast.walk(ast.parse(source))
              if isinstance(node, (ast.Import, ast.ImportFrom))
              for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or '')])}
  return str(MODELS_PYTHON) if 'official' in imported else sys.executable


@pytest.fixture(scope='module')
def workspace(tmp_path_factory) -> Path:
  """A folder holding what the README's blocks start from, as the repository's root after
  `make run`: the environment (.venv), the sample set make run converts (work/sample-images,
  also as PetImages), its conversion with splits (out, as Usage makes it), and a few of its
  photos with boxes, laid out as COCO and Pascal VOC lay out theirs."""
  folder = tmp_path_factory.mktemp('readme')
  (folder / '.venv').symlink_to(readme.VENV)
  sample_set.write_sample_set(str(folder / 'work' / 'sample-images'))
  (folder / 'PetImages').symlink_to(folder / 'work' / 'sample-images')
  with pytest.MonkeyPatch.context() as patch:  # in this process: the Usage block runs the command itself
    patch.chdir(folder)
    assert convert('--input=work/sample-images', '--output=out', '--splits=train=0.8,validation=0.2') == 0
  _detection_sets(folder)
  return folder


def _detection_sets(folder: Path) -> None:
  """A few sample photos as COCO's and VOC's folders lay them out, each with one box."""
  photos = sorted((folder / 'work' / 'sample-images').glob('*/*.jpg'))[:6]
  coco, voc = folder / 'coco', folder / 'VOC2012'
  for directory in (coco / 'train2017', coco / 'annotations', voc / 'JPEGImages', voc / 'Annotations'):
    directory.mkdir(parents=True)
  images, annotations = [], []
  for number, photo in enumerate(photos, start=1):
    name, label = f'{number:06d}.jpg', photo.parent.name
    with Image.open(photo) as image:
      width, height = image.size
    for target in (coco / 'train2017' / name, voc / 'JPEGImages' / name):
      shutil.copyfile(photo, target)
    images.append({'id': number, 'file_name': name, 'width': width, 'height': height})
    annotations.append({'id': number, 'image_id': number, 'category_id': 1 + (label == 'dog'), 'iscrowd': 0,
                        'bbox': [width / 4, height / 4, width / 2, height / 2], 'area': width * height / 4})
    (voc / 'Annotations' / f'{number:06d}.xml').write_text(
        f'<annotation><filename>{name}</filename><size><width>{width}</width><height>{height}</height></size>'
        f'<object><name>{label}</name><bndbox><xmin>{width // 4}</xmin><ymin>{height // 4}</ymin>'
        f'<xmax>{3 * width // 4}</xmax><ymax>{3 * height // 4}</ymax></bndbox></object></annotation>')
  (coco / 'annotations' / 'instances_train2017.json').write_text(json.dumps(
      {'images': images, 'annotations': annotations,
       'categories': [{'id': 1, 'name': 'cat'}, {'id': 2, 'name': 'dog'}]}))


def _run(argv: List[str], cwd: Path, activates: bool = False) -> subprocess.CompletedProcess:
  """Runs ``argv`` in the shell a reader runs the README's blocks in (readme.shell_environment)."""
  done = subprocess.run(argv, cwd=cwd, env=readme.shell_environment(activates), capture_output=True, text=True,
                        timeout=TIMEOUT, check=False)
  assert done.returncode == 0, f'{argv[-1][:2000]}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}'
  return done


def test_every_block_runs_or_says_why_it_cannot():
  blocks = readme.blocks()
  assert len(blocks) >= 20
  assert _usage_block().text.startswith(ACTIVATE), 'Usage must start where a new shell is: the environment'
  run = [block for block in blocks if why_not_offline(block) is None]
  assert [(block.language, block.line) for block in run if block.language == 'sh'], 'no shell block runs'
  assert len(run) >= 8, [str(block) for block in run]
  for block in run:
    if block.language == 'python':
      assert set(free_names(block.text)) <= set(GIVEN), (str(block), free_names(block.text))


def test_free_names_are_what_a_block_uses_without_defining():
  assert free_names('import io\nx = io.BytesIO()\ndef f(a):\n  return a + y + len(x)\nmodel.fit(z)\n') == \
      ['model', 'y', 'z']


def _exec(source: str, block: readme.Block, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
  """Runs ``source`` in this process as `python -c` would in ``cwd``, in globals of its own: a new
  interpreter would import TensorFlow and Beam again. The environment is restored after it (importing
  tf.Transform sets TF_USE_LEGACY_KERAS, which the workers of later runs would inherit). A failure
  shows the block and its traceback."""
  monkeypatch.chdir(cwd)
  try:
    with mock.patch.dict(os.environ):
      exec(compile(source, f'<{block}>', 'exec'), {'__name__': '__main__'})  # pylint: disable=exec-used
    return
  except Exception:  # pylint: disable=broad-except
    failure = traceback.format_exc()
  pytest.fail(f'{block} failed:\n{source}\n{failure}', pytrace=False)


@pytest.mark.parametrize('block', [block for block in readme.blocks() if why_not_offline(block) is None],
                         ids=str)
def test_the_readme_block_runs(block, workspace, monkeypatch):
  if block.language == 'sh':
    done = _run(['bash', '-euo', 'pipefail', '-c', block.text], workspace, activates=ACTIVATE in block.text)
    if block == _usage_block():  # a new shell's first command: the system's python lacks the dependencies
      assert 'Wrote 83 examples of 85 images, 2 classes, to out' in done.stdout
      assert read_output(workspace / 'out')[0]['splits'].keys() == {'train', 'validation'}
    return
  source = block.text
  for online, offline in OFFLINE.items():
    source = source.replace(online, offline)
  source = ''.join(GIVEN[name] for name in free_names(source)) + source + READ_DATASETS
  python = python_of(source)
  if python == sys.executable:
    _exec(source, block, workspace, monkeypatch)
    return
  if not MODELS_PYTHON.exists():
    pytest.skip(extra_venvs.missing('.venv-models', 'models'))
  _run([python, '-c', source], workspace)


def _usage_block() -> readme.Block:
  """The first block of the README's Usage: where a reader fresh from `make run` starts."""
  text = (ROOT / 'README.md').read_text()
  heading = text.count('\n', 0, text.index('\n## Usage\n')) + 1
  return next(block for block in readme.blocks() if block.document == 'README.md' and block.line > heading)
