"""The command on DataflowRunner, offline (dataflow_offline.py), and what its runs must show."""
import subprocess
import sys
from typing import Sequence

from helpers.commands import ROOT, TIMEOUT

OPTIONS = ('--runner=DataflowRunner', '--project=test-project', '--region=us-central1', '--temp_location=gs://stage/tmp')
OFFLINE = str(ROOT / 'tests' / 'helpers' / 'dataflow_offline.py')
JOB_ID = '2026-11-24_00_00_00-1234567890123456789'


def run_offline(*args: object, entry: Sequence[str] = ('-m', 'beam_pipeline')) -> subprocess.CompletedProcess:
  """``python -m beam_pipeline ARGS`` (or an entry file's), as DataflowRunner has Dataflow run it."""
  return subprocess.run([sys.executable, OFFLINE, *entry, *map(str, args)], cwd=ROOT, capture_output=True,
                        text=True, timeout=TIMEOUT, check=False)


def assert_submitted_as_airflow_expects(result: subprocess.CompletedProcess) -> None:
  """The job id, in Beam's own log lines (Airflow's Beam operator reads it there) and in the
  console link the command prints; none of the Dataflow client's other chatter."""
  assert f'Created job with id: [{JOB_ID}]' in result.stderr
  assert f'Submitted job: {JOB_ID}' in result.stderr
  assert (f'Dataflow job {JOB_ID}: https://console.cloud.google.com/dataflow/jobs/us-central1/{JOB_ID}'
          f'?project=test-project') in result.stdout
  assert 'Create job: <' not in result.stderr and 'Staging' not in result.stderr
