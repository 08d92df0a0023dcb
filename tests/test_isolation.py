"""No single image can fail a run: an exception injected into each per-image step, for one
chosen image each, on every runner.

The seam is the tool's own (BEAM_PIPELINE_INJECT_FAULT, core/isolation.py): a step
raises for the images whose uri holds a given text, in whatever process it runs.
One conversion injects into all eight steps at once, each for another image; it
must complete with exactly those images rejected as internal_error, naming their
step, and every other image written. Nothing of TensorFlow or Beam is mocked.
"""
import json
from pathlib import Path

import pytest

from beam_pipeline.core import isolation
from helpers import dataflow_offline, photos
from helpers.commands import convert, run_cli
from helpers.dataflow import OPTIONS as DATAFLOW
from helpers.dataset_reader import read_errors, read_output
from helpers.gcs_emulator import serving

# step -> the image whose uri it fails on. The resize victim is the one image larger than
# --max_side, the reencode victim one of the two BMPs (re-encoded as PNG); the list victim
# is a manifest line, rejected under its manifest's name and line number.
VICTIMS = {
    isolation.LIST: 'cat/list-victim.jpg',
    isolation.READ: 'cat/read-victim.jpg',
    isolation.VALIDATE: 'dog/validate-victim.jpg',
    isolation.REENCODE: 'dog/reencode-victim.bmp',
    isolation.RESIZE: 'cat/resize-victim.jpg',
    isolation.GROUP: 'dog/group-victim.jpg',
    isolation.EMBED: 'cat/embed-victim.jpg',
    isolation.WRITE: 'dog/write-victim.jpg',
}
FAULTS = ','.join(f'{step}:{name.split("/")[1].split(".")[0]}' for step, name in VICTIMS.items())


@pytest.fixture(scope='module')
def manifest(tmp_path_factory, saved) -> Path:
  """A JSONL manifest of 24 photos, the victims among them, a BMP that is re-encoded too,
  and a photo larger than --max_side besides the resize victim's."""
  root = tmp_path_factory.mktemp('isolation')
  files = photos.labelled(('cat', 'dog'), 9, seed=21, size=(40, 32))
  for name in VICTIMS.values():
    label = name.split('/')[0]
    if name.endswith('.bmp'):
      files[name] = photos.encode(photos.image(5, 40, 32), 'BMP')
    elif 'resize' in name:
      files[name] = photos.jpeg(6, 120, 90)
    else:
      files[name] = photos.jpeg(len(files), 40, 32)
    assert label in ('cat', 'dog')
  files['cat/plain.bmp'] = photos.encode(photos.image(7, 40, 32), 'BMP')
  files['dog/large.jpg'] = photos.jpeg(8, 100, 80)
  photos.write_files(root / 'images', files)
  lines = [json.dumps({'uri': f'images/{name}', 'label': name.split('/')[0]}) for name in sorted(files)]
  (root / 'manifest.jsonl').write_text('\n'.join(lines) + '\n')
  return root / 'manifest.jsonl'


def conversion_args(manifest: Path, out: Path, saved) -> list:
  return [f'--input={manifest}', f'--output={out}', '--max_side=64', '--max_error_fraction=0.5', '--skip_transform',
          f'--embedding_model={saved["keras"]}', '--embedding_image_size=32', '--embedding_batch_size=4']


def assert_isolated(manifest: Path, out: Path) -> None:
  """Each victim rejected as internal_error by its own step, everything else written once."""
  info, records = read_output(str(out))
  written = sorted(r['image/filename'].decode() for split in records.values() for r in split)
  errors = {error['uri']: error for error in read_errors(str(out))}
  lines = manifest.read_text().splitlines()
  list_line = next(i for i, line in enumerate(lines, 1) if VICTIMS[isolation.LIST] in line)
  expected_errors = {str(manifest.parent / 'images' / name): step for step, name in VICTIMS.items()
                     if step != isolation.LIST}
  expected_errors[f'{manifest}:line {list_line}'] = isolation.LIST
  assert sorted(errors) == sorted(expected_errors)
  for uri, step in expected_errors.items():
    assert errors[uri]['reason'] == 'internal_error', errors[uri]
    # The detail names the boundary's step (validation holds re-encoding and resizing), then the fault.
    assert f': InjectedFault: fault injected into {step} for' in errors[uri]['detail'], errors[uri]
  all_images = sorted(str(manifest.parent / json.loads(line)['uri']) for line in lines)
  assert written == sorted(uri for uri in all_images if uri not in expected_errors
                           and not uri.endswith(VICTIMS[isolation.LIST]))
  assert info['num_examples'] == len(all_images) - len(VICTIMS)
  assert info['errors_by_reason'] == {'internal_error': len(VICTIMS)}
  assert info['num_resized'] == 1 and info['num_reencoded'] == 2  # dog/large.jpg; it and cat/plain.bmp


def inject_here(monkeypatch) -> None:
  """FAULTS injected in this process, as isolation.py reads them when imported, and in the processes
  it starts (from the environment)."""
  monkeypatch.setenv(isolation.INJECT_FAULT, FAULTS)
  monkeypatch.setattr(isolation, 'FAULTS', isolation.faults(FAULTS))


@pytest.mark.parametrize('mode', ['in_process', 'multi_processing'])
def test_the_direct_runner_rejects_only_the_images_a_step_fails_on(manifest, saved, tmp_path, monkeypatch, mode):
  """In its default mode, a command of its own: the workers' forkserver imports the steps' modules,
  reading the faults, as the command starts. In Beam's multi-process mode, in this process: the
  steps run in the SDK worker processes Beam starts, with its environment. One SDK worker: where
  the steps run is what this test is about, not how many workers share them (multi-process runs
  with two are test_training_ready.py's, test_console.py's and test_embeddings.py's)."""
  args = conversion_args(manifest, tmp_path / 'out', saved)
  if mode == 'in_process':
    result = run_cli(*args, '--runner=DirectRunner', environment={isolation.INJECT_FAULT: FAULTS})
    assert result.returncode == 0, result.stderr[-3000:]
  else:
    inject_here(monkeypatch)
    assert convert(*args, '--direct_running_mode=multi_processing', '--direct_num_workers=1') == 0
  assert_isolated(manifest, tmp_path / 'out')


def test_the_dataflow_job_rejects_only_the_images_a_step_fails_on(manifest, saved, tmp_path, monkeypatch):
  """In this process (dataflow_offline.convert): the job runs in the process that submits it."""
  (tmp_path / 'gcs').mkdir()
  inject_here(monkeypatch)
  with serving(str(tmp_path / 'gcs'), ('stage',)):
    assert dataflow_offline.convert(*conversion_args(manifest, tmp_path / 'out', saved), *DATAFLOW) == 0
  assert_isolated(manifest, tmp_path / 'out')
