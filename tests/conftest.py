"""Shared fixtures; test helpers (tests/helpers) import as the package ``helpers`` (pyproject.toml
puts tests/ on pytest's path)."""
import contextlib
import gc
import os
from pathlib import Path
from typing import Iterator, List

import pytest

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')  # as the command sets it (cli.quiet_libraries)

from helpers import extra_venvs, fault_proxy, gcs_emulator  # noqa: E402  pylint: disable=wrong-import-position

TESTS = Path(__file__).parent
# Folders whose tests each run a whole pipeline, as the end-to-end files of tests/ run the command.
PIPELINE_FOLDERS = (TESTS / 'pipeline', TESTS / 'local')


def pytest_collection_modifyitems(items: List[pytest.Item]) -> None:
  """The end-to-end files (tests/test_*.py, each running the command) before the unit tests'
  folders: pytest-xdist hands out whole files in this order (make test: --dist loadfile
  --no-loadscope-reorder), so the long files start first and the many short ones even out the
  end on every worker, instead of a long file running alone at the end. Those and the tests
  that run a pipeline are marked slow, which make test-fast leaves out."""
  items.sort(key=lambda item: item.path.parent != TESTS)  # stable: files and tests keep their order
  for item in items:
    if item.path.parent == TESTS or item.path.parent in PIPELINE_FOLDERS:
      item.add_marker(pytest.mark.slow)


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure() -> None:
  """Keeps this process's objects out of the full garbage collections pytest makes as the
  session ends (to report exceptions raised by finalizers): in a test worker that holds
  TensorFlow, Beam and half a million objects they took 1-2 s of CPU each, on every worker at
  once, at the end of the run, and the process exits right after."""
  gc.freeze()


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup():
  """Fixtures run without pytest's variable naming the current test (see pytest_pyfunc_call)."""
  with _without_current_test_name():
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call():
  """Tests run without PYTEST_CURRENT_TEST, which pytest sets anew for every test and phase: a
  conversion in this process keeps its worker pool for the next only if the environment is the
  same (local/workers.py), and that one variable would give every test new workers."""
  with _without_current_test_name():
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport():
  """Under `make test` (extra_venvs.required), a test that skipped for want of .venv-dali or
  .venv-models fails: CI must read the records with those readers, not pass without them."""
  report = yield
  if report.skipped and extra_venvs.required() and extra_venvs.BUILT_BY_MAKE_TEST in str(report.longrepr):
    report.outcome = 'failed'
    report.longrepr = f'skipped under make test, which builds the environment first: {report.longrepr}'
  return report


@contextlib.contextmanager
def _without_current_test_name() -> Iterator[None]:
  name = os.environ.pop('PYTEST_CURRENT_TEST', None)
  try:
    yield
  finally:
    if name is not None:
      os.environ['PYTEST_CURRENT_TEST'] = name


@pytest.fixture(scope='session', autouse=True)
def offline_credentials(tmp_path_factory):
  """Google credentials that never leave this machine (the emulator's static token) for every
  test: a run that names a gs:// path checks it has credentials (an offline Dataflow job has
  no emulator), and a developer's own credentials stay out of the tests."""
  environment = gcs_emulator.credentials_environment(str(tmp_path_factory.mktemp('credentials')))
  with gcs_emulator.environment_set({'GOOGLE_APPLICATION_CREDENTIALS': environment['GOOGLE_APPLICATION_CREDENTIALS']}):
    yield


@pytest.fixture(scope='module')
def proxy(tmp_path_factory):
  """The emulator behind a fault proxy; the environment points every client at the proxy."""
  with gcs_emulator.running_emulator() as url, fault_proxy.FaultProxy(url) as running, \
      gcs_emulator.pointed_at(running.url, str(tmp_path_factory.mktemp('gcs'))):
    yield running


@pytest.fixture
def plan(proxy):  # pylint: disable=redefined-outer-name
  """The proxy's fault plan, empty at the start and end of every test."""
  proxy.plan.reset()
  yield proxy.plan
  proxy.plan.reset()


@pytest.fixture(scope='session')
def cnn():
  """A tiny Keras CNN with random weights (helpers/models.py)."""
  from helpers import models  # pylint: disable=import-outside-toplevel  # Keras only for the tests that use it
  return models.tiny_cnn()


@pytest.fixture(scope='session')
def saved(cnn, tmp_path_factory):  # pylint: disable=redefined-outer-name
  """``cnn`` saved every way users save models, by helpers.models.SAVERS' names: {name: path}."""
  from helpers import models  # pylint: disable=import-outside-toplevel
  directory = tmp_path_factory.mktemp('models')
  return {name: str(save(cnn, directory)) for name, save in models.SAVERS.items()}


@pytest.fixture(scope='module')
def sample_set(tmp_path_factory):
  """The set `make run` converts, 12 photos a class: 27 images written, 2 files rejected, Thumbs.db skipped."""
  from helpers.photos import write_sample_set  # pylint: disable=import-outside-toplevel  # its noise seeded
  root = tmp_path_factory.mktemp('sample-set')
  write_sample_set(str(root), per_class=12)
  return root
