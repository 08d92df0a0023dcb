"""The unchanged command on DataflowRunner, offline: staging into the storage emulator, and
only the call that submits the job replaced by running the job Dataflow would get
(helpers/dataflow_offline.py), with the job's own options. Its output must account for
every input file (written or rejected, once), and be the DirectRunner's, byte for byte.

The tests run the command, with the same stand-in, in this process (dataflow_offline.convert and
in_process), which saves each a start-up of Beam and TensorFlow; test_airflow.py runs it as a
process of its own, as Airflow does, and test_flex_template.py the Flex Template's entry file."""
import io
import json
import os
import shutil

import pytest
from PIL import Image
import tensorflow as tf
import tensorflow_transform as tft

from beam_pipeline import cli
from beam_pipeline.core.output import output_layout
from beam_pipeline.core.planning import near_index
from beam_pipeline.pipeline import earlier_copies
from beam_pipeline.pipeline.planning import near_copy_groups
from helpers import dataflow_offline, gcs_emulator, photos
from helpers.commands import convert
from helpers.dataflow import OPTIONS as DATAFLOW, assert_every_input_accounted_for, assert_submitted_as_airflow_expects
from helpers.dataset_reader import assert_same_dataset, bucket_files, local_files

OPTIONS = ('--max_error_fraction=0.5', '--splits=train=0.75,validation=0.25', '--target_shard_mb=0.1')


@pytest.fixture(scope='module')
def gcs(tmp_path_factory):
  """The storage emulator, with the environment pointed at it (for this process and its
  children) and the buckets 'stage' (Dataflow's staging) and 'data'."""
  with gcs_emulator.serving(str(tmp_path_factory.mktemp('gcs')), ('stage', 'data')) as url:
    yield url


def assert_graph_works(files: dict, directory) -> None:
  """The tf.Transform graph, copied out of the output, transforms the output's own records."""
  for name, data in files.items():
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
  output = tft.TFTransformOutput(str(directory))
  shard = next(name for name in files if name.startswith('train-'))
  records = tf.constant([r.numpy() for r in tf.data.TFRecordDataset(str(directory / shard))])
  transformed = output.transform_features_layer()(tf.io.parse_example(records, output.raw_feature_spec()))
  assert transformed['image'].shape[1:] == (224, 224, 3)
  labels = [tf.train.Example.FromString(r.numpy()).features.feature['image/class/label'].int64_list.value[0]
            for r in records]
  assert transformed['label'].numpy().tolist() == labels


def test_a_dataflow_job_on_local_paths_writes_what_the_direct_runner_writes(gcs, sample_set, tmp_path, capfd, caplog):
  assert convert(f'--input={sample_set}', f'--output={tmp_path}/direct', *OPTIONS) == 0
  result = dataflow_offline.in_process([f'--input={sample_set}', f'--output={tmp_path}/dataflow', *OPTIONS, *DATAFLOW,
                                        '--setup_file=./setup.py'], capfd, caplog)
  assert result.returncode == 0, result.stderr[-4000:]
  assert_submitted_as_airflow_expects(result)
  assert 'Wrote 27 examples' in result.stdout  # and waited for the job to report what it wrote
  # Beam's stager builds setup.py's package with its own standard error: it printed 'No module named build'.
  assert 'No module named' not in result.stderr and 'Traceback' not in result.stderr, result.stderr[-3000:]
  inputs = [str(sample_set / name) for name in local_files(sample_set)]
  assert len(inputs) == 30
  assert_every_input_accounted_for(local_files(tmp_path / 'dataflow'), inputs)
  assert_same_dataset(local_files(tmp_path / 'dataflow'), local_files(tmp_path / 'direct'))
  assert len([name for name in local_files(tmp_path / 'direct') if name.startswith('train-')]) >= 2
  staged = gcs_emulator.list_names('stage', 'tmp/')
  assert [name for name in staged if name.endswith('/workflow.tar.gz')], staged  # the package, from setup.py
  assert [name for name in staged if name.endswith('/pipeline.pb')], staged


def test_a_dataflow_job_on_cloud_storage_writes_what_the_direct_runner_writes(gcs, sample_set, tmp_path, capfd,
                                                                              caplog):
  """gs:// input and output, the tf.Transform graph included (uploaded through Beam's FileSystems)."""
  inputs = local_files(sample_set)
  gcs_emulator.upload('data', {f'in/{name}': data for name, data in inputs.items()})
  assert convert('--input=gs://data/in', '--output=gs://data/direct', *OPTIONS) == 0
  result = dataflow_offline.in_process(['--input=gs://data/in', '--output=gs://data/dataflow', *OPTIONS, *DATAFLOW],
                                       capfd, caplog)
  assert result.returncode == 0, result.stderr[-4000:]
  assert_submitted_as_airflow_expects(result)
  files = bucket_files('data', 'dataflow')
  assert_every_input_accounted_for(files, [f'gs://data/in/{name}' for name in inputs])
  assert_same_dataset(files, bucket_files('data', 'direct'))
  assert {'transform_fn/saved_model.pb', 'transformed_metadata/schema.pbtxt', 'metadata/schema.pbtxt'} <= set(files)
  assert not [name for name in files if name.startswith('.beam_pipeline-tmp/')]
  assert_graph_works(files, tmp_path / 'copy')


def test_an_incremental_update_as_a_dataflow_job_writes_what_the_direct_runner_writes(gcs, sample_set):
  """The same --incremental update of a gs:// output, one on each runner, after one photo came and
  one went: the job reads the earlier record and catalog where they lie, and writes again only
  the shard that lost its record. Both start from one conversion, copied: an update compares no
  output path."""
  inputs = local_files(sample_set)
  gcs_emulator.upload('data', {f'inc/{name}': data for name, data in inputs.items()})
  assert convert('--input=gs://data/inc', '--output=gs://data/inc-direct', '--incremental', *OPTIONS) == 0
  bucket = gcs_emulator.client().bucket('data')
  for blob in bucket.list_blobs(prefix='inc-direct/'):
    bucket.copy_blob(blob, bucket, 'inc-dataflow/' + blob.name[len('inc-direct/'):])
  gone = next(name for name in sorted(inputs) if name.endswith('.jpg'))
  bucket.blob(f'inc/{gone}').delete()
  gcs_emulator.upload('data', {'inc/Cat/new.jpg': inputs[gone]})  # the same picture under a new name
  assert convert('--input=gs://data/inc', '--output=gs://data/inc-direct', '--incremental', *OPTIONS) == 0
  assert dataflow_offline.convert('--input=gs://data/inc', '--output=gs://data/inc-dataflow', '--incremental',
                                  *OPTIONS, *DATAFLOW) == 0
  files = bucket_files('data', 'inc-dataflow')
  assert_same_dataset(files, bucket_files('data', 'inc-direct'))
  update = json.loads(files['beam_pipeline.json'])['update']
  assert (update['added'], update['removed'], update['shards_rewritten']) == (1, 1, 1)


def test_a_dry_run_and_a_classic_template_translate_the_job_and_touch_no_output(gcs, sample_set, tmp_path, capsys):
  """In this process: neither submits a job, so nothing of the offline stand-in is needed."""
  (tmp_path / 'out').mkdir()
  (tmp_path / 'out' / 'beam_pipeline.json').write_text('{"from": "an earlier run"}')
  for extra, message in ((['--dry_run=True'], 'Dry run: the job was translated'),
                         (['--template_location=gs://stage/templates/images.json'],
                          'Wrote a classic template to gs://stage/templates/images.json')):
    capsys.readouterr()
    code = cli.main([f'--input={sample_set}', f'--output={tmp_path}/out', *DATAFLOW, *extra])
    out, err = capsys.readouterr()
    assert code == 0, err[-4000:]
    assert out.strip().splitlines()[-1].startswith(message), out
    assert 'Traceback' not in err
  assert os.listdir(tmp_path / 'out') == ['beam_pipeline.json']
  template = json.loads(gcs_emulator.download('stage', 'templates/images.json'))
  options = template['environment']['sdkPipelineOptions']['options']
  assert options['input'] == str(sample_set) and options['pipelineUrl'].startswith('gs://stage/tmp/')


def test_no_wait_returns_once_the_job_is_submitted(gcs, sample_set, tmp_path, capfd, caplog):
  result = dataflow_offline.in_process([f'--input={sample_set}', f'--output={tmp_path}/out', *DATAFLOW,
                                        '--max_error_fraction=0.5', '--no_wait'], capfd, caplog)
  assert result.returncode == 0, result.stderr[-4000:]
  assert_submitted_as_airflow_expects(result)
  assert result.stdout.strip().splitlines()[-1].startswith('Submitted; not waiting for the job')
  assert 'Wrote' not in result.stdout


@pytest.mark.parametrize('drop, add, message', [
    ('--project=test-project', (), 'error: DataflowRunner needs --project'),
    ('--temp_location=gs://stage/tmp', (), 'error: DataflowRunner needs --temp_location=gs://BUCKET/tmp'),
    ('--temp_location=gs://stage/tmp', ('--temp_location=/tmp/x',), 'error: --temp_location=/tmp/x: DataflowRunner'),
])
def test_what_dataflow_needs_is_checked_before_any_work(sample_set, tmp_path, capsys, drop, add, message):
  # In this process: the checks come before anything of Dataflow's (no job, nothing staged) runs.
  capsys.readouterr()
  assert cli.main([f'--input={sample_set}', f'--output={tmp_path}/out', *[a for a in DATAFLOW if a != drop],
                   *add]) == 2
  stderr = capsys.readouterr().err
  errors = [line for line in stderr.splitlines() if line.startswith('error')]
  assert len(errors) == 1 and errors[0].startswith(message), stderr[-2000:]
  assert not (tmp_path / 'out').exists()


def _resaved(data: bytes, quality: int = 60) -> bytes:
  """A JPEG saved again at another quality: a near copy of its picture."""
  buffer = io.BytesIO()
  with Image.open(io.BytesIO(data)) as image:
    image.save(buffer, 'JPEG', quality=quality)
  return buffer.getvalue()


def _index_files(files: dict) -> dict:
  """An output's near-copy index files, by name."""
  return {name: data for name, data in files.items() if name.startswith(output_layout.NEAR_INDEX_DIR + '/')}


def test_updates_as_dataflow_jobs_group_near_copies_through_the_index_as_the_direct_runner_does(
    gcs, tmp_path, monkeypatch, capfd):
  """--incremental updates of one output as Dataflow jobs, each beside the same update on the
  DirectRunner (which groups every near-copy hash of a small dataset in memory), and beside it on
  the DirectRunner of a dataset as large as earlier_copies.INDEXED_FROM, which keeps the index as
  the jobs do. The first job groups every hash and
  builds the near-copy index; the next ones query it for the files that changed only (new near
  copies of kept pictures, a new picture and its copy, a group's best picture removed, whose
  copies find another). One whose index files would hold more than the index keeps drops it, and
  the next builds it again; so does one whose grouping's distance is not the index's. Each writes
  what the DirectRunner writes: the same records in the same splits, and the same groups of near
  copies in beam_pipeline.json; the DirectRunner that keeps the index writes the job's index files,
  from its grouping in memory, without the jobs' grouping shuffles.
  A band file damaged since: the next update that reads it refuses, naming it, and leaves the
  output as it was."""
  queries = []
  queried = near_index.queried
  monkeypatch.setattr(near_index, 'queried', lambda *args, **kwargs: queries.append(1) or queried(*args, **kwargs))
  monkeypatch.chdir(tmp_path)
  files = photos.labelled(['cat', 'dog'], 12, seed=5, size=(64, 48))
  photos.write_files(tmp_path / 'imgs', files)
  options = ('--input=imgs', '--incremental', '--skip_transform', '--splits=train=0.5,validation=0.5')
  assert convert(*options, '--output=direct') == 0
  shutil.copytree(tmp_path / 'direct', tmp_path / 'job')
  shutil.copytree(tmp_path / 'direct', tmp_path / 'local')
  names = sorted(files)
  near = {f'{name.split("/")[0]}/near.{i}.jpg': _resaved(files[name], 40 + i) for i, name in enumerate(names)}
  new = {'cat/new.jpg': photos.jpeg(90, 64, 48), 'dog/new.copy.jpg': _resaved(photos.jpeg(90, 64, 48))}
  rounds = [  # (files added, files removed, what the job does with the index: built, queried or dropped)
      ({name: near[name] for name in list(near)[0:3]}, [], 'built'),
      ({**new, **{name: near[name] for name in list(near)[3:5]}}, [names[0]], 'queried'),  # a group's best
      ({'dog/late.jpg': _resaved(files[names[4]], 30)}, ['cat/new.jpg', names[2]], 'queried'),
      ({name: near[name] for name in list(near)[5:7]}, [names[6]], 'dropped'),  # its files would be too large
      ({name: near[name] for name in list(near)[7:9]}, [], 'built'),
      ({name: near[name] for name in list(near)[9:11]}, [names[9]], 'built again'),  # of another distance
  ]
  for added, removed, index_kept in rounds:
    photos.write_files(tmp_path / 'imgs', added)
    for name in removed:
      (tmp_path / 'imgs' / name).unlink()
    queries.clear()
    monkeypatch.setattr(near_index, 'MOST_ROWS', 5 if index_kept == 'dropped' else 250_000)
    if index_kept == 'built again':
      for output in ('job', 'local'):
        record = json.loads((tmp_path / output / 'beam_pipeline.json').read_text())
        record['catalog_lookup']['near_index']['distance'] = 6
        (tmp_path / output / 'beam_pipeline.json').write_text(json.dumps(record))
    assert convert(*options, '--output=direct') == 0
    assert dataflow_offline.convert(*options, '--output=job', *DATAFLOW) == 0
    with monkeypatch.context() as large:
      large.setattr(earlier_copies, 'INDEXED_FROM', 0)
      large.setattr(near_copy_groups.NearCopies, 'expand', None)
      assert convert(*options, '--output=local') == 0
    job, direct, local = (local_files(tmp_path / output) for output in ('job', 'direct', 'local'))
    assert_same_dataset(job, direct)
    assert_same_dataset(local, direct)
    assert (json.loads(local['beam_pipeline.json'])['catalog_lookup'].get('near_index') ==
            json.loads(job['beam_pipeline.json'])['catalog_lookup'].get('near_index'))
    assert _index_files(local) == _index_files(job)
    record = json.loads(job['beam_pipeline.json'])
    assert record['near_duplicates']['num_groups'] >= 2, record['near_duplicates']
    assert bool(queries) == (index_kept in ('queried', 'dropped')), index_kept
    index = record['catalog_lookup'].get('near_index')
    indexed = set(_index_files(job))
    if index_kept == 'dropped':
      assert index is None and not indexed
      continue
    assert index['distance'] == record['near_duplicates']['distance'] == 10
    assert {found['file'] for found in index['nodes'] + index['bands']} == indexed
    assert 'near_index' not in json.loads(direct['beam_pipeline.json'])['catalog_lookup']
  damaged = tmp_path / 'job' / index['bands'][0]['file']
  data = bytearray(damaged.read_bytes())
  data[len(data) // 2] ^= 0xFF
  damaged.write_bytes(bytes(data))
  before = (tmp_path / 'job/beam_pipeline.json').read_bytes()
  photos.write_files(tmp_path / 'imgs', {'cat/later.jpg': _resaved(files[names[3]], 35)})
  capfd.readouterr()
  assert dataflow_offline.convert(*options, '--output=job', *DATAFLOW) == 1
  err = [line for line in capfd.readouterr().err.splitlines() if line.startswith(('error:', '  Convert'))]
  assert err[0].startswith(f'error: the output is damaged: {index["bands"][0]["file"]} is not the near-copy index '
                           'file the run wrote: its checksum differs'), err
  assert err[1] == '  Convert again with --incremental --rebuild: it converts the input whole into --output=job.'
  assert (tmp_path / 'job/beam_pipeline.json').read_bytes() == before
