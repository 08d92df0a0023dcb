"""The local worker pool: who imports what, and which flags use it."""
import random
import subprocess
import sys
from pathlib import Path

import pytest
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from beam_pipeline import options, uris, workers
from beam_pipeline.records import InputItem
from beam_pipeline.sample_images import encode, synthetic_photo

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize('argv, in_process', [
    ([], True),
    (['--runner=DirectRunner'], True),
    (['--runner', 'direct', '--direct_num_workers=2'], True),
    (['--direct_running_mode=multi_threading'], True),
    (['--direct_running_mode=multi_processing', '--direct_num_workers=2'], False),
    (['--runner=DataflowRunner', '--project=p'], False),
])
def test_the_pool_serves_runs_whose_dofns_run_in_the_launching_process(argv, in_process):
  assert workers.runs_in_process(['--input=x', '--output=y', *argv]) == in_process


def test_a_local_run_keeps_tensorflow_out_of_the_launcher(tmp_path):
  """The launcher of a local run validates, writes shards and traces the tf.Transform
  graph through its workers, so it never imports TensorFlow (2 s at start-up)."""
  rng = random.Random(3)
  for i in range(6):
    path = tmp_path / 'in' / ('cat', 'dog')[i % 2] / f'{i}.jpg'
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode(synthetic_photo(rng, 40, 30), 'JPEG'))
  script = ('import sys\n'
            'from beam_pipeline import workers\n'
            'workers.start_forkserver()\n'
            'from beam_pipeline import cli\n'
            'code = cli.main(sys.argv[1:])\n'
            'print(code, "tensorflow" in sys.modules)\n')
  done = subprocess.run([sys.executable, '-c', script, f'--input={tmp_path}/in', f'--output={tmp_path}/out'],
                        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
  assert done.stdout.splitlines()[-1:] == ['0 False'], done.stdout[-2000:] + done.stderr[-3000:]
  assert (tmp_path / 'out' / 'transform_fn' / 'saved_model.pb').exists()


def test_workers_validate_without_importing_beam(tmp_path):
  """Worker processes import TensorFlow (in the forkserver, once) but never Beam (0.6 s
  each): what a task receives and does for local files needs neither."""
  path = tmp_path / 'cat' / '1.jpg'
  path.parent.mkdir()
  path.write_bytes(encode(synthetic_photo(random.Random(1), 40, 30), 'JPEG'))
  settings = options.validate(PipelineOptions([f'--input={tmp_path}', f'--output={tmp_path}/out']))
  pool = workers.start(1)
  try:
    validated = pool.submit(workers.Task('beam_pipeline.validation', 'validate_batch'),
                            [InputItem(str(path))], settings).result()
    modules = pool.submit(workers.Task('worker_probe', 'imported'), ['tensorflow', 'apache_beam']).result()
  finally:
    workers.shutdown()
  assert [record.label for record in validated.records] == ['cat']
  assert modules == {'tensorflow': True, 'apache_beam': False}


@pytest.mark.parametrize('uri', ['/data/x.jpg', 'data/x.jpg', 'gs://b/x.jpg', ' gs://b/x.jpg', 'GS://b/x.jpg',
                                 's3://b/x', 'hdfs://h/x', 'x.y+z://a', '/data/gs://x.jpg', 'c:\\x.jpg', '1s://x',
                                 'file:///x', 'gs:/x', ''])
def test_remote_uris_are_the_ones_beam_sees_a_scheme_in(uri):
  assert uris.is_remote(uri) == (FileSystems.get_scheme(uri) is not None)
