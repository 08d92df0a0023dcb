"""What the Airflow tests share: Airflow's own environment (.venv-airflow, which `make airflow`
builds) and what a conversion task's log must show."""
import re

from helpers.commands import ROOT

AIRFLOW_BIN = ROOT / '.venv-airflow' / 'bin'
TIMEOUT = 600


def assert_logged_as_information(log: str, written: int, inputs: int) -> None:
  """The command's progress and summary at INFO in the task's log, and no warning about a
  Dataflow configuration on another runner (the provider's, for every run, before)."""
  assert re.search(rf'\[info\s*\] progress: writing done: {written} images', log), log[-8000:]
  assert re.search(rf'\[info\s*\] Wrote {written} examples of {inputs} images', log), log[-8000:]
  assert not re.search(r'\[warning\s*\] progress: ', log), log[-8000:]
  assert 'dataflow_config is defined but runner is different' not in log
