"""A new user's first hour, second pass (issue 38): what the shell, a copied folder, a rerun or a
pipe does to the command, and what TensorFlow Datasets and Keras expect of its output."""
import json
import os

import pytest

from beam_pipeline import cli, reader
from helpers import photos
from helpers.commands import convert
from helpers.dataset_reader import read_output


def test_an_unquoted_glob_fails_in_one_line_that_says_to_quote_it(tmp_path, capsys):
  """The shell expands ``--input photos/*/*.jpg``: Beam would discard all but the first file with
  a warning, and the run convert that one image and exit 0."""
  photos.write_files(tmp_path / 'photos', photos.labelled(['cat', 'dog'], 3))
  expanded = sorted(str(path) for path in (tmp_path / 'photos').glob('*/*.jpg'))
  code = cli.main(['--input', *expanded, '--output', str(tmp_path / 'out'), '--runner=DirectRunner'])
  error = capsys.readouterr().err
  assert code == 2
  assert error.splitlines() == [f'error: unexpected argument {expanded[1]} (and 4 more): quote a glob so the shell '
                                "leaves it to --input, e.g. --input='photos/*/*.jpg'"]
  assert not os.path.exists(tmp_path / 'out')


@pytest.fixture(scope='module')
def manifest_run(tmp_path_factory):
  """A JSONL manifest of 12 photos whose split column says val, dev and Training, the rest left to
  --splits=train=0.5,val=0.5; converted once: (output, the manifest's rows)."""
  root = tmp_path_factory.mktemp('manifest')
  files = photos.labelled(['cat', 'dog'], 6)
  photos.write_files(root / 'images', files)
  given = {'cat/cat.0.jpg': 'val', 'cat/cat.1.jpg': 'dev', 'dog/dog.0.jpg': 'Training'}
  rows = [{'uri': f'images/{name}', 'label': name.split('/')[0], **({'split': given[name]} if name in given else {})}
          for name in files]
  (root / 'images.jsonl').write_text(''.join(json.dumps(row) + '\n' for row in rows))
  assert convert(f'--input={root}/images.jsonl', f'--output={root}/out', '--splits=train=0.5,val=0.5',
                 '--skip_transform') == 0
  return root / 'out', rows


def test_val_dev_and_training_name_the_same_splits_in_a_manifest_and_in_splits(manifest_run):
  out, rows = manifest_run
  info, records = read_output(out)
  assert sorted(info['splits']) == ['train', 'validation'] and info['num_errors'] == 0
  assert info['options']['splits'] == {'train': 0.5, 'validation': 0.5}
  split_of = {os.path.basename(r['image/filename'].decode()): split for split in records for r in records[split]}
  assert (split_of['cat.0.jpg'], split_of['cat.1.jpg'], split_of['dog.0.jpg']) == ('validation', 'validation', 'train')
  assert len(split_of) == len(rows)
  assert sum(len(labels) for _, labels in reader.load(str(out), 'val')) == len(records['validation'])
