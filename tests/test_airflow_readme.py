"""deploy/README.md's try of the DAG on this machine, as written (but its `make airflow`), in a real
Airflow of its own: a file apart from test_airflow.py, whose tests share one Airflow home, so
that the two slowest Airflow parts can run on both cores."""
import os
import subprocess

from helpers import readme
from helpers.airflow_logs import AIRFLOW_BIN, TIMEOUT, assert_logged_as_information
from helpers.commands import ROOT
from helpers.dataset_reader import read_output
from helpers.photos import write_sample_set


def test_the_readmes_local_try_runs_the_dag_as_written(tmp_path):
  """deploy/README.md's block that tries the DAG on this machine, but its `make airflow` (which built
  .venv-airflow already), in a folder laid out as the repository after `make run` (its sample
  set: 86 files, 2 of them rejected and Thumbs.db skipped)."""
  block = next(block for block in readme.blocks() if 'airflow dags test' in block.text)
  script = '\n'.join(line for line in block.text.splitlines() if not line.startswith('make '))
  (tmp_path / '.venv-airflow').symlink_to(AIRFLOW_BIN.parent)
  (tmp_path / '.venv').symlink_to(readme.VENV)
  (tmp_path / 'deploy').symlink_to(ROOT / 'deploy')
  write_sample_set(str(tmp_path / 'work' / 'sample-images'))
  environment = {name: value for name, value in os.environ.items() if not name.startswith(('AIRFLOW', 'TF_'))}
  done = subprocess.run(['bash', '-euo', 'pipefail', '-c', script], cwd=tmp_path, env=environment,
                        capture_output=True, text=True, timeout=TIMEOUT, check=False)
  log = done.stdout + done.stderr
  assert done.returncode == 0 and 'state=success' in log, log[-8000:]
  info, _ = read_output(tmp_path / 'work' / 'airflow-tfrecords')
  assert info['num_examples'] == 83
  assert_logged_as_information(log, 83, 85)
