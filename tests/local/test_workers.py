"""The local worker pool: who imports what, which runs use it, and how it ends."""
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Callable

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beam_pipeline.pipeline import local_runner
from beam_pipeline.compat import multiprocessing_internals
from beam_pipeline.local import workers
from beam_pipeline.core import steps
from beam_pipeline.core.messages import InputItem
from beam_pipeline.core.user_errors import ModelError

from helpers import models, photos, process_state, worker_probe
from helpers.commands import ROOT, convert
from helpers.values import settings


@pytest.mark.parametrize('argv, in_process', [
    ([], True),
    (['--runner=DirectRunner'], True),
    (['--runner', 'direct', '--direct_num_workers=2'], True),
    (['--direct_running_mode=multi_threading'], True),
    (['--direct_running_mode=multi_processing', '--direct_num_workers=2'], False),
    (['--runner=DataflowRunner', '--project=p'], False),
])
def test_the_pool_serves_runs_whose_dofns_run_in_the_launching_process(argv, in_process):
  assert local_runner.runs_in_process(PipelineOptions(argv)) == in_process


# What a worker imports to write shards, their embeddings and the tf.Transform graph; and Beam.
_WRITERS = ['apache_beam', 'beam_pipeline.core.writing.shard_writer', 'beam_pipeline.core.writing.embedding_model',
            'tensorflow_transform']


@pytest.mark.parametrize('embedding', [False, True])
def test_a_local_run_keeps_tensorflow_and_pandas_out_of_the_launcher_and_beam_out_of_its_workers(
    saved, tmp_path, embedding):
  """The launcher of a local run validates, writes shards and traces the tf.Transform
  graph through its workers, so it never imports TensorFlow (2 s at start-up); nor
  does it to check an --embedding_model. Beam is imported without pandas, which
  its type hints would import for DataFrames (launch.py). The workers that wrote the
  shards, their embeddings and the graph never import Beam (asked after the run, which leaves
  its pool to the next)."""
  model = [f'--embedding_model={saved["keras"]}',
           f'--embedding_image_size={models.SIZE}'] if embedding else []
  photos.write_files(tmp_path / 'in', {f'{("cat", "dog")[i % 2]}/{i}.jpg': data
                                       for i, data in enumerate(photos.jpegs(6, size=(40, 30)))})
  script = ('import json, sys\n'
            'from beam_pipeline.local import workers\n'
            'workers.start_forkserver()\n'
            'from beam_pipeline import cli\n'
            'from helpers import worker_probe\n'
            'code = cli.main(sys.argv[1:])\n'
            f'print(json.dumps(worker_probe.imported_in_each(workers.pool(), workers.count(), {_WRITERS!r})))\n'
            'workers.shutdown()\n'
            'print(code, "tensorflow" in sys.modules, "pandas" in sys.modules)\n')
  done = subprocess.run([sys.executable, '-c', script, f'--input={tmp_path}/in', f'--output={tmp_path}/out', *model],
                        cwd=ROOT, env={**os.environ, 'PYTHONPATH': str(ROOT / 'tests')},
                        capture_output=True, text=True, timeout=300, check=False)
  assert done.stdout.splitlines()[-1:] == ['0 False False'], done.stdout[-2000:] + done.stderr[-3000:]
  assert (tmp_path / 'out' / 'transform_fn' / 'saved_model.pb').exists()
  each = json.loads(done.stdout.splitlines()[-2])
  assert len(each) == len(os.sched_getaffinity(0)) and not any(worker['apache_beam'] for worker in each)
  assert any(worker['beam_pipeline.core.writing.shard_writer'] for worker in each)
  assert any(worker['tensorflow_transform'] for worker in each)
  assert any(worker['beam_pipeline.core.writing.embedding_model'] for worker in each) == embedding


def test_workers_validate_without_importing_beam(tmp_path):
  """Worker processes import TensorFlow (in the forkserver, once) but never Beam (0.6 s
  each): what a step receives and does for local files needs neither."""
  photos.write_files(tmp_path, {'cat/1.jpg': photos.jpeg(1, 40, 30)})
  pool = workers.start(1)
  try:
    validated = pool.submit(steps.validate_batch, [InputItem(str(tmp_path / 'cat' / '1.jpg'))], settings()).result()
    modules = pool.submit(worker_probe.imported, ['tensorflow', 'apache_beam']).result()
  finally:
    workers.shutdown()
  assert [record.label for record in validated.records] == ['cat']
  assert modules == {'tensorflow': True, 'apache_beam': False}


def test_a_forkserver_still_importing_tensorflow_ends_with_its_killed_launcher():
  """The forkserver imports TensorFlow for seconds before it serves a worker. A launcher
  SIGKILLed meanwhile (Ctrl-C twice, the OOM killer, Airflow's timeout) runs no code to
  stop it, and multiprocessing's forkserver notices its client's end only once its
  preload is done: the watch that workers.end_with starts first in the preload ends it
  at once instead. The launcher here is killed as soon as the forkserver is spawned,
  before the preload begins, when the forkserver's parent is no longer the launcher."""
  if not workers.available():
    pytest.skip('no forkserver on this platform')
  script = ('import os, signal\n'
            'from beam_pipeline.local import workers\n'
            'workers.start_forkserver()\n'
            'from beam_pipeline.compat import multiprocessing_internals\n'
            'pid = multiprocessing_internals.forkserver_pid()\n'
            'print(pid, flush=True)\n'
            'os.kill(os.getpid(), signal.SIGKILL)\n')
  # Its output is a file: the forkserver inherits it, and a pipe would stay open with it.
  with tempfile.TemporaryFile() as output:
    launcher = subprocess.run([sys.executable, '-c', script], cwd=ROOT, stdout=output, stderr=subprocess.DEVNULL,
                              timeout=300, check=False)
    killed = time.monotonic()
    output.seek(0)
    pid = int(output.read().split()[0])
  assert launcher.returncode == -9
  assert process_state.ended(pid, timeout=60)
  lived = time.monotonic() - killed
  assert lived < 3, f'the forkserver went on importing for {lived:.1f}s after its launcher was killed'


def test_a_command_that_ends_ends_the_forkserver_its_pool_used():
  """Left to notice its launcher's end, a forkserver that served a pool tears down an
  interpreter holding TensorFlow, and holds the command's standard output open meanwhile,
  which a reader (a pipe, Airflow's log) waits for: the command's end kills it instead. Here
  the launcher stays, so only that can end it."""
  if not workers.available():
    pytest.skip('no forkserver on this platform')
  script = ('import os, sys, time\n'
            'from beam_pipeline.compat import multiprocessing_internals\n'
            'from beam_pipeline.local import workers\n'
            'workers.start_forkserver()\n'
            'workers.start(1).submit(os.getpid).result()\n'
            'workers.shutdown()\n'
            'pid = multiprocessing_internals.forkserver_pid()\n'
            'workers.stop_forkserver(served_too=True)\n'
            'print(pid, flush=True)\n'
            'time.sleep(120)\n')
  launcher = subprocess.Popen([sys.executable, '-c', script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
  try:
    pid = int(launcher.stdout.readline())
    assert process_state.ended(pid, timeout=60), 'the forkserver outlived the command that used it'
  finally:
    launcher.kill()
    launcher.wait()


def test_the_workers_start_with_fixed_malloc_thresholds_and_the_launcher_keeps_its_environment():
  """glibc reads its malloc tunables as a process starts: the forkserver's environment holds them
  (a value the user set is kept), so every worker keeps a batch's freed memory for the next instead
  of taking fresh pages; the launcher's own environment is left as it was."""
  if not workers.available() or not os.path.exists('/proc/self/environ'):
    pytest.skip('no forkserver or /proc on this platform')
  script = ('import os\n'
            'from beam_pipeline.compat import multiprocessing_internals\n'
            'from beam_pipeline.local import workers\n'
            'workers.start_forkserver()\n'
            'workers.start(1).submit(os.getpid).result()\n'
            'pid = multiprocessing_internals.forkserver_pid()\n'
            'environ = open(f"/proc/{pid}/environ", "rb").read().decode().split("\\0")\n'
            'print(sorted(e for e in environ if e.startswith("MALLOC_")), "MALLOC_MMAP_THRESHOLD_" in os.environ)\n'
            'workers.shutdown()\n'
            'workers.stop_forkserver(served_too=True)\n')
  env = {**os.environ, 'MALLOC_TRIM_THRESHOLD_': '12345'}
  env.pop('MALLOC_MMAP_THRESHOLD_', None)
  out = subprocess.run([sys.executable, '-c', script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
  ours = workers.MALLOC_TUNABLES['MALLOC_MMAP_THRESHOLD_']
  assert out.stdout.split('\n')[0] == f"['MALLOC_MMAP_THRESHOLD_={ours}', 'MALLOC_TRIM_THRESHOLD_=12345'] False", (
      out.stderr[-2000:])


def test_a_refused_run_keeps_the_forkserver_an_earlier_run_of_this_process_used(sample_set, tmp_path):
  """The API called again: a run refused for a bad option stops no forkserver that is done
  importing, or the next run would import TensorFlow again (a command's own forkserver, not yet
  used, is stopped: test_multiprocessing_internals)."""
  assert convert(f'--input={sample_set}', f'--output={tmp_path}/out', '--max_error_fraction=1') == 0
  pid = multiprocessing_internals.forkserver_pid()
  assert convert(f'--input={sample_set}', f'--output={tmp_path}/refused', '--splits=train=2') == 2
  assert multiprocessing_internals.forkserver_pid() == pid
  assert not process_state.ended(pid, timeout=1)
  assert convert(f'--input={sample_set}', f'--output={tmp_path}/next', '--max_error_fraction=1') == 0
  assert multiprocessing_internals.forkserver_pid() == pid


def test_a_run_that_ended_well_leaves_its_workers_to_the_next_run_of_this_process(sample_set, tmp_path, monkeypatch):
  """The API called again (a notebook, this suite) finds the workers of the run before, warm,
  unless they were started in another environment, or that run failed; idle, they end."""
  def run(output, *more):
    return convert(f'--input={sample_set}', f'--output={tmp_path}/{output}', *more)

  assert run('first', '--max_error_fraction=1') == 0
  kept = workers.pool()
  assert kept is not None
  assert run('second', '--max_error_fraction=1') == 0
  assert workers.pool() is kept
  monkeypatch.setenv('BEAM_PIPELINE_TEST_SETTING', 'changed')
  assert run('third', '--max_error_fraction=1') == 0
  assert workers.pool() not in (None, kept)
  assert run('failed') == 1  # the sample set's two broken files are over the error budget
  assert workers.pool() is None
  monkeypatch.setattr(workers, 'IDLE_SECONDS', 0.2)
  assert run('last', '--max_error_fraction=1') == 0
  scratch = workers.pool().submit(os.getenv, 'TMPDIR').result()  # the workers' own, removed with them
  assert os.path.isdir(scratch)
  assert _within(30, lambda: workers.pool() is None) and not os.path.exists(scratch)


def test_a_run_without_the_pool_stops_its_forkserver_before_checking_the_model(tmp_path, monkeypatch):
  """On Dataflow or in Beam's multi-process mode the launcher loads --embedding_model itself to
  check it: a forkserver importing TensorFlow meanwhile would only take the other core from it."""
  called = []
  monkeypatch.setattr(workers, 'stop_forkserver', lambda: called.append('stop_forkserver'))

  def check_model(*_):
    called.append('check_model')
    raise ModelError('is not a model')

  monkeypatch.setattr(steps, 'check_model', check_model)
  (tmp_path / 'model.keras').write_bytes(b'not a model')
  photos.write_files(tmp_path / 'in', {'cat/1.jpg': photos.jpeg(1, 40, 30)})
  assert convert(f'--input={tmp_path}/in', f'--output={tmp_path}/out', f'--embedding_model={tmp_path}/model.keras',
                 '--direct_running_mode=multi_processing', '--direct_num_workers=2') == 2
  assert called[:2] == ['stop_forkserver', 'check_model']


def test_workers_left_waiting_by_a_launcher_that_ended_abruptly_end_and_remove_their_directory(sample_set):
  """A launcher that ends with os._exit (as Airflow's task processes do) runs no exit handler,
  while the pool its last run released waits for another run: the workers end with it, and
  remove the temporary directory they were given."""
  script = ('import os, sys\n'
            'from beam_pipeline import cli\n'
            'from beam_pipeline.local import workers\n'
            'code = cli.main(sys.argv[1:])\n'
            'print(code, workers.pool().submit(os.getenv, "TMPDIR").result(), flush=True)\n'
            'os._exit(0)\n')
  with tempfile.TemporaryDirectory() as out:
    done = subprocess.run([sys.executable, '-c', script, f'--input={sample_set}', f'--output={out}/out',
                           '--max_error_fraction=1'], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False)
  code, scratch = done.stdout.split()[-2:]
  assert code == '0', done.stderr[-3000:]
  assert _within(30, lambda: not os.path.exists(scratch))


def _within(seconds: float, condition: Callable[[], bool]) -> bool:
  """Whether ``condition`` holds within ``seconds``: a bound that only a hang reaches."""
  deadline = time.monotonic() + seconds
  while not condition() and time.monotonic() < deadline:
    time.sleep(0.05)
  return condition()
