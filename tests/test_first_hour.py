"""A new user's first hour, second pass (issue 38): what the shell, a copied folder, a rerun or a
pipe does to the command, and what TensorFlow Datasets and Keras expect of its output."""
import contextlib
import io
import json
import os
import shutil
import subprocess
import warnings

import pytest

from beam_pipeline import cli, reader
from helpers import photos
from helpers.commands import ROOT, command, convert, user_environment
from helpers.dataset_reader import read_errors, read_output


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
  --splits=train=0.5,val=0.5, in 4 shards a split; converted once: (output, the manifest's rows)."""
  root = tmp_path_factory.mktemp('manifest')
  files = photos.labelled(['cat', 'dog'], 6)
  photos.write_files(root / 'images', files)
  given = {'cat/cat.0.jpg': 'val', 'cat/cat.1.jpg': 'dev', 'dog/dog.0.jpg': 'Training'}
  rows = [{'uri': f'images/{name}', 'label': name.split('/')[0], **({'split': given[name]} if name in given else {})}
          for name in files]
  (root / 'images.jsonl').write_text(''.join(json.dumps(row) + '\n' for row in rows))
  assert convert(f'--input={root}/images.jsonl', f'--output={root}/out', '--splits=train=0.5,val=0.5',
                 '--num_shards=4', '--skip_transform') == 0
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


def test_a_small_set_gets_the_shards_it_asks_for_one_record_apart(manifest_run):
  """By size, 12 small photos would be one shard per split, read by one reader at a time."""
  out, _ = manifest_run
  info, records = read_output(out)
  assert info['options']['num_shards'] == 4
  for split, entry in info['splits'].items():
    lengths = [shard['num_examples'] for shard in entry['shards']]
    assert [shard['file'] for shard in entry['shards']] == [f'{split}-{i:05d}-of-00004.tfrecord' for i in range(4)]
    assert sum(lengths) == len(records[split]) and max(lengths) - min(lengths) <= 1


# What a folder copied from a Mac or Windows, or kept in git with its labels, holds beside the photos.
JUNK = {'.DS_Store': b'\0\0\0\1Bud1' + bytes(64), 'cat/._cat.0.jpg': b'\0\5\26\7' + bytes(80),
        'dog/Thumbs.db': b'\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1' + bytes(600), 'dog/desktop.ini': b'[.ShellClassInfo]\n',
        'notes.txt': b'shot in 2023\n', 'cat/labels.csv': b'cat.0.jpg,cat\n', '.git/HEAD': b'ref: refs/heads/main\n',
        '.git/objects/ab/cdef': bytes(40)}


@pytest.fixture(scope='module')
def copied_folder(tmp_path_factory):
  """20 photos, one more without an extension and one that is no image despite its .jpg, beside
  the 8 files of JUNK; converted once: (root, the summary the command printed)."""
  root = tmp_path_factory.mktemp('copied')
  files = {**photos.labelled(['cat', 'dog'], 10), 'dog/IMG_0001': photos.jpegs(1, seed=99)[0],
           'cat/broken.jpg': b'<!DOCTYPE html><html>403 Forbidden</html>', **JUNK}
  photos.write_files(root / 'in', files)
  printed = io.StringIO()
  with contextlib.redirect_stdout(printed):
    assert convert(f'--input={root}/in', f'--output={root}/out', '--skip_transform') == 0
  return root, printed.getvalue()


def test_a_folder_copied_from_a_mac_or_windows_converts_its_photos_and_lists_the_rest_as_skipped(copied_folder):
  """The 8 files of JUNK would be not_image and 9 errors of 30 inputs fail the 5% budget. Skipped,
  they are listed (reason skipped) and counted, but no errors; the .jpg that is no image stays one,
  and a photo without an extension is written."""
  root, printed = copied_folder
  info, records = read_output(root / 'out')
  assert info['num_examples'] == 21 and info['num_skipped'] == 8
  assert (info['num_errors'], info['errors_by_reason']) == (1, {'not_image': 1})
  assert 'IMG_0001' in {os.path.basename(r['image/filename'].decode()) for r in records['train']}
  errors = {os.path.relpath(e['uri'], root / 'in'): e['reason'] for e in read_errors(root / 'out')}
  assert errors == {'cat/broken.jpg': 'not_image', **{name: 'skipped' for name in JUNK}}
  lines = [line for line in printed.splitlines() if not line.startswith('progress: ')]
  assert lines[0].startswith(f'Wrote 21 examples of 22 images, 2 classes, to {root}/out in ')
  assert f'Rejected 1 input: not_image 1; see {root}/out/errors-00000-of-00001.jsonl' in lines
  assert ('Skipped 8 files as no images (system and hidden files, .txt, .json, ...), not errors; see '
          f'{root}/out/errors-00000-of-00001.jsonl') in lines


def test_an_output_made_from_another_input_is_replaced_only_with_overwrite(copied_folder, tmp_path, capsys):
  """A rerun of the same input, however the path is written, is the retry path and stays silent;
  another input is refused in one line that says what it would replace, until --overwrite."""
  root, _ = copied_folder
  out = tmp_path / 'out'
  shutil.copytree(root / 'out', out)
  created = json.loads((out / 'beam_pipeline.json').read_text())['created']
  photos.write_files(tmp_path / 'birds', photos.labelled(['bird'], 2))
  before = {name: (out / name).read_bytes() for name in os.listdir(out)}
  assert convert(f'--input={tmp_path}/birds', f'--output={out}', '--skip_transform') == 2
  assert capsys.readouterr().err.splitlines() == [
      f'error: --output={out} holds 21 examples converted from --input={root}/in ({created}), which this run from '
      f'--input={tmp_path}/birds would replace: pass --overwrite to replace them, or give another --output']
  assert {name: (out / name).read_bytes() for name in os.listdir(out)} == before
  assert convert(f'--input={os.path.relpath(root / "in")}/', f'--output={out}', '--skip_transform') == 0
  assert 'error' not in capsys.readouterr().err
  assert convert(f'--input={tmp_path}/birds', f'--output={out}', '--skip_transform', '--overwrite') == 0
  info = json.loads((out / 'beam_pipeline.json').read_text())
  assert (info['options']['input'], info['num_examples']) == (f'{tmp_path}/birds/**', 2)


def test_inspect_says_what_the_output_holds_in_bins_that_read_as_ranges(copied_folder, capsys):
  """Not 'Wrote 21 examples' (inspect converts nothing), and no '1-1 KiB' bin."""
  root, _ = copied_folder
  info = json.loads((root / 'out' / 'beam_pipeline.json').read_text())
  assert cli.main(['inspect', str(root / 'out')]) == 0
  lines = capsys.readouterr().out.splitlines()
  assert lines[0] == (f'{root}/out holds 21 examples of 22 images, 2 classes, converted from {root}/in on '
                      f'{info["created"]} by beam_pipeline {info["version"]}')
  assert not any(line.startswith('Wrote') for line in lines)
  assert lines[lines.index('Images by longer side:') + 1] == '  train: 32-63 px 21'
  assert lines[lines.index('Images by stored size:') + 1] == '  train: 1-2 KiB 21'
  assert 'Skipped 8 files as no images (system and hidden files, .txt, .json, ...), not errors; see ' \
         f'{root}/out/errors-00000-of-00001.jsonl' in lines


def test_inspect_into_a_reader_that_leaves_early_ends_quietly(copied_folder):
  """``inspect | head``: the pipe's reader closes it before inspect writes; no BrokenPipeError
  traceback, and the exit of a Unix tool that SIGPIPE ended (141)."""
  root, _ = copied_folder
  read, write = os.pipe()
  with subprocess.Popen(command('inspect', root / 'out', '--errors'), cwd=ROOT, env=user_environment(), stdout=write,
                        stderr=subprocess.PIPE, text=True) as process:
    os.close(write)
    os.close(read)
    _, error = process.communicate(timeout=120)
  assert (process.returncode, error) == (141, '')


def test_reader_load_knows_its_length_so_keras_does_not_run_out_of_data(manifest_run):
  import keras  # pylint: disable=import-outside-toplevel
  out, _ = manifest_run
  info, _ = read_output(out)
  count = info['splits']['train']['num_examples']
  train = reader.load(str(out), 'train', image_size=32, batch_size=4)
  assert len(train) == int(train.cardinality()) == -(-count // 4) == len(list(train))
  dropped = reader.load(str(out), 'train', image_size=32, batch_size=4, drop_remainder=True, shuffle_buffer=8)
  assert len(dropped) == count // 4 == len(list(dropped))
  model = keras.Sequential([keras.Input((32, 32, 3)), keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(2)])
  model.compile('adam', keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    model.fit(train, epochs=2, verbose=0)
  assert not [w for w in caught if 'ran out of data' in str(w.message)]


def test_tensorflow_datasets_reads_image_label_pairs_as_most_of_its_users_do(manifest_run):
  """``as_dataset(as_supervised=True)`` failed: dataset_info.json had no supervised keys, and the
  features nested by the keys' '/' were out of their reach."""
  import tensorflow_datasets as tfds  # pylint: disable=import-outside-toplevel
  out, _ = manifest_run
  _, records = read_output(out)
  builder = tfds.builder_from_directory(str(out))
  assert builder.info.supervised_keys == ('image/encoded', 'image/class/label')
  for split, expected in records.items():
    pairs = [(image.shape, int(label)) for image, label in tfds.as_numpy(builder.as_dataset(split=split,
                                                                                           as_supervised=True))]
    assert sorted(pairs) == sorted(((r['image/height'], r['image/width'], 3), r['image/class/label']) for r in expected)
