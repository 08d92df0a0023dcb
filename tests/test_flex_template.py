"""The Flex Template (deploy/dataflow): its metadata against the command's options, its
entry file run the way the launcher runs it, and its image's Dockerfile."""
import argparse
import json
import os
import re
import subprocess
import sys

import pytest
from google.cloud.dataflow_v1beta3 import TemplateMetadata

from beam_pipeline.cli import arguments
from beam_pipeline.cli import options
from beam_pipeline.core.user_errors import UsageError

from beam_pipeline import version
from helpers import gcs_emulator, readme
from helpers.commands import ROOT, convert
from helpers.dataflow import OPTIONS as DATAFLOW, assert_submitted_as_airflow_expects, run_offline
from helpers.dataset_reader import assert_same_dataset, bucket_files

DEPLOY = ROOT / 'deploy' / 'dataflow'
METADATA = json.loads((DEPLOY / 'metadata.json').read_text())
PARAMETERS = {parameter['name']: parameter for parameter in METADATA['parameters']}
# Options a template's user does not set: the entry file returns at submission anyway.
NOT_PARAMETERS = {'no_wait'}
# Values each parameter's regexes must accept (and the command too), and values they must refuse.
SAMPLES = {
    'input': (['gs://b/PetImages', 'gs://b/imgs/**/*.jpg', 'gs://b/images.csv'], ['/local/dir', 'PetImages', '']),
    'output': (['gs://b/tfrecords/pets'], ['/tmp/out', 'out', '']),
    'label_source': (['parent_dir', 'none', 'regex:^([a-z]+)\\.'], ['folder', 'regex:', 'labels']),
    'splits': (['train=0.8,validation=0.2', 'train=1'], ['train', 'train=0.8;test=0.2', 'Train=1']),
    'dedupe': (['true', 'false'], ['yes please', 'True!', '']),
    'annotations': (['gs://b/coco/instances_train.json', 'gs://b/voc/Annotations'], ['/local/coco.json', 'gs://b', '']),
    'input_root': (['gs://b', 'gs://b/images', 'gs://b/images/'], ['/local/images', 'images', 'gs://', '']),
    'multi_label': (['true', 'false'], ['yes please', '']),
    'drop_unannotated': (['true', 'false'], ['yes please', '']),
    'include_masks': (['true', 'false'], ['masks', '']),
    'schema': (['default', 'simple'], ['tfds', '']),
    'target_shard_mb': (['150', '0.5', '1.5', '.5'], ['0', '-1', 'abc', '']),
    'num_shards': (['8', '1', '0'], ['-1', '2.5', 'many']),
    'overwrite': (['true', 'false'], ['maybe']),
    'incremental': (['true', 'false'], ['maybe']),
    'rebuild': (['true', 'false'], ['maybe']),
    'compression': (['none', 'gzip'], ['zstd', '']),
    'index_files': (['true', 'false'], ['maybe']),
    'image_format': (['original', 'jpeg', 'png'], ['webp', 'JPEG', '']),
    'jpeg_quality': (['95', '1', '100'], ['0', '101', '9.5', 'high']),
    'exif_orientation': (['apply', 'ignore'], ['rotate', 'Apply', '']),
    'max_side': (['512', '1'], ['0', '-1', '51.2', 'big']),
    'min_side': (['1', '32'], ['0', '-1', '3.5', 'small']),
    'strict_jpeg': (['true', 'false'], ['strict']),
    'near_copies': (['group', 'drop', 'off'], ['', 'near', 'Group', 'group,drop']),
    'near_distance': (['1', '8', '20'], ['', '0', '21', '8.5', '-1']),
    'reject_quality': (['dark', 'dark,blurry', 'grayscale_as_rgb,low_information'],
                       ['', 'dim', 'dark,', 'dark blurry']),
    'embedding_model': (['gs://b/models/efficientnet_b0.keras', 'gs://b/models/saved'], ['/local/model.keras', '']),
    'embedding_image_size': (['224', '32'], ['0', '22.5', 'big']),
    'embedding_only': (['true', 'false'], ['maybe']),
    'embedding_batch_size': (['32', '1'], ['0', '-2', 'lots']),
    'max_pixels': (['100000000', '1'], ['0', '-5', '1e8x', '']),
    'max_file_mb': (['100', '0.25'], ['0', '0.0', 'lots']),
    'image_size': (['224', '32'], ['0', '22.5', 'big']),
    'skip_transform': (['true', 'false'], ['maybe']),
    'max_error_fraction': (['0', '0.05', '1', '1.0', '.5'], ['1.5', '-0.1', '2', 'x']),
    'read_threads': (['32', '1'], ['0', 'many']),
}


def _matches(name: str, value: str) -> bool:
  return all(re.fullmatch(regex, value) for regex in PARAMETERS[name].get('regexes', []))


def test_the_metadata_is_what_the_dataflow_client_reads():
  metadata = TemplateMetadata.from_json((DEPLOY / 'metadata.json').read_text())
  assert metadata.name and metadata.description
  assert [p.name for p in metadata.parameters] == list(PARAMETERS)
  assert all(p.label and p.help_text and p.regexes for p in metadata.parameters)


def test_every_parameter_is_an_option_and_every_option_a_parameter():
  parser = argparse.ArgumentParser()
  arguments.add_conversion_options(parser)
  assert set(PARAMETERS) == set(vars(parser.parse_args([]))) - NOT_PARAMETERS
  required = {name for name, parameter in PARAMETERS.items() if not parameter.get('isOptional')}
  assert required == {'input', 'output'}
  assert set(SAMPLES) == set(PARAMETERS)


@pytest.mark.parametrize('name', sorted(SAMPLES))
def test_the_regexes_accept_what_the_command_accepts_and_refuse_the_rest(name, tmp_path, monkeypatch):
  """A good value passes the template's regexes and the command's own checks; a bad one
  stops at the regexes, before a launcher VM starts."""
  (tmp_path / 'in' / 'cat').mkdir(parents=True)
  (tmp_path / 'in' / 'cat' / '1.jpg').write_bytes(b'x')
  good, bad = SAMPLES[name]
  # gs:// paths are checked against the emulator in the job tests; the model is loaded by the launcher.
  paths = ('input', 'output', 'embedding_model', 'annotations', 'input_root')
  given = [f'--input={tmp_path}/in', f'--output={tmp_path}/out']
  if name in ('drop_unannotated', 'include_masks'):
    (tmp_path / 'coco.json').write_text('{"images": [], "annotations": [], "categories": []}')
    given.append(f'--annotations={tmp_path}/coco.json')
  if name == 'multi_label':  # reads a manifest's rows
    (tmp_path / 'in' / 'labels.jsonl').write_text('{"uri": "cat/1.jpg", "labels": ["cat", "pet"]}\n')
    given[0] = f'--input={tmp_path}/in/labels.jsonl'
  if name.startswith('embedding_') and name not in paths:
    given.append('--embedding_model=gs://b/models/m.keras')
  if name == 'rebuild':  # of an --incremental run
    given.append('--incremental')
  for value in good:
    assert _matches(name, value), (name, value)
    if name not in paths:
      options.parse([*given, f'--{name}={value}'])
  for value in bad:
    assert not _matches(name, value), (name, value)
    if name not in paths and value:
      with pytest.raises(UsageError):
        options.parse([*given, f'--{name}={value}'])


def test_the_entry_file_run_as_the_launcher_runs_it_submits_the_job_and_returns(tmp_path):
  """The launcher runs FLEX_TEMPLATE_PYTHON_PY_FILE with every parameter as --name=value
  (booleans as true/false) and Dataflow's own options; the job it submits writes what
  the same options give on the DirectRunner."""
  with gcs_emulator.serving(str(tmp_path), ('stage',)):
    gcs_emulator.upload_photo_set('flex', 'in/', ('cat', 'dog'), per_class=10)
    parameters = {'input': 'gs://flex/in', 'input_root': 'gs://flex/in', 'label_source': 'parent_dir',
                  'splits': 'train=0.8,validation=0.2', 'dedupe': 'false', 'schema': 'default',
                  'target_shard_mb': '0.01', 'compression': 'gzip', 'skip_transform': 'true', 'max_error_fraction': '0'}
    assert all(_matches(name, value) for name, value in parameters.items())
    launched = run_offline('--output=gs://flex/template', *(f'--{name}={value}' for name, value in parameters.items()),
                           *DATAFLOW, '--sdk_container_image=us-docker.pkg.dev/p/r/tfrecords:1',
                           '--job_name=images-to-tfrecords', entry=[str(DEPLOY / 'main.py')])
    assert launched.returncode == 0, launched.stderr[-4000:]
    assert_submitted_as_airflow_expects(launched)
    assert launched.stdout.strip().splitlines()[-1].startswith('Submitted; not waiting')
    assert convert('--output=gs://flex/direct', *(f'--{name}={value}' for name, value in parameters.items())) == 0
    assert_same_dataset(bucket_files('flex', 'template'), bucket_files('flex', 'direct'))


def test_the_dockerfile_passes_the_linter_and_matches_the_pinned_beam():
  linted = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'hadolint'), str(DEPLOY / 'Dockerfile')],
                          capture_output=True, text=True, timeout=60, check=False)
  assert linted.returncode == 0, linted.stdout + linted.stderr
  dockerfile = (DEPLOY / 'Dockerfile').read_text()
  beam = re.search(r'^apache-beam\[gcp\]==(\S+)$', (ROOT / 'requirements.txt').read_text(), re.M).group(1)
  assert f'ARG BEAM_VERSION={beam}\n' in dockerfile
  assert 'FROM apache/beam_python3.11_sdk:${BEAM_VERSION}' in dockerfile
  assert 'ENV FLEX_TEMPLATE_PYTHON_PY_FILE=/template/main.py' in dockerfile
  assert 'COPY deploy/dataflow/main.py ./main.py' in dockerfile


def test_the_build_context_holds_what_the_dockerfile_copies_and_no_virtual_environment():
  """The image builds from the repository root, whose .venv alone is about 3 GB: .dockerignore
  lets through exactly the paths the Dockerfile copies (an allowlist, as Docker reads it)."""
  rules = [line for line in (ROOT / '.dockerignore').read_text().splitlines() if line and not line.startswith('#')]
  assert rules[0] == '*'
  allowed = {rule[1:].rstrip('/') for rule in rules if rule.startswith('!')}
  copied = set()
  for line in (DEPLOY / 'Dockerfile').read_text().splitlines():
    if line.startswith('COPY ') and '--from=' not in line:
      copied.update(line.split()[1:-1])
  assert copied == allowed


def test_the_readmes_image_tag_is_the_packages_version():
  """deploy/README.md's variables, run as a reader runs them: the image's tag is this package's version,
  not a number written down once."""
  block = next(block.text for block in readme.blocks() if 'IMAGE=' in block.text)
  done = subprocess.run(['bash', '-ec', block + '\necho "$IMAGE"'], cwd=ROOT, capture_output=True, text=True,
                        env=readme.shell_environment(), check=True)
  assert done.stdout.strip().endswith(f'/tfrecords/images-to-tfrecords:{version.__version__}')
