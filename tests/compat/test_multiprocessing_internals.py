"""multiprocessing's internals as compat/multiprocessing_internals.py uses them: a Python that
moves them fails here, instead of leaving forkservers running after bad options."""
import os
import subprocess
import sys

import pytest

from beam_pipeline.compat import multiprocessing_internals
from beam_pipeline.local import workers

from helpers import process_state

pytestmark = pytest.mark.skipif(not workers.available(), reason='no forkserver on this platform')


def test_the_forkserver_can_be_found_and_stopped_through_multiprocessings_private_state():
  workers.start_forkserver()
  pid = multiprocessing_internals.forkserver_pid()
  with open(f'/proc/{pid}/cmdline', 'rb') as f:
    assert b'multiprocessing.forkserver' in f.read()
  workers.stop_forkserver()
  assert process_state.ended(pid, timeout=60)  # killed; multiprocessing reaps it when a pool next starts one


def test_a_file_descriptor_reaches_a_worker_and_the_socket_directory_goes(tmp_path):
  """PassedFd hands the launcher's standard error to each worker (workers._initialize_worker);
  remove_forkserver_socket removes multiprocessing's temporary directory for os._exit."""
  script = ('import os, sys, multiprocessing\n'
            'from multiprocessing import util\n'
            'from beam_pipeline.compat import multiprocessing_internals as m\n'
            'def write(fd):\n'
            '  os.write(fd.detach(), b"from the worker")\n'
            'if __name__ == "__main__":\n'
            '  m.start_forkserver()\n'
            '  context = multiprocessing.get_context("forkserver")\n'
            '  worker = context.Process(target=write, args=(m.PassedFd(2),))\n'
            '  worker.start(); worker.join()\n'
            '  where = util.get_temp_dir()\n'
            '  m.remove_forkserver_socket()\n'
            '  print(os.path.exists(where), flush=True)\n'
            '  os._exit(worker.exitcode)\n')
  (tmp_path / 'passed.py').write_text(script)  # a file: forkserver workers import their target from __main__
  done = subprocess.run([sys.executable, str(tmp_path / 'passed.py')], capture_output=True, text=True, timeout=120,
                        check=False, env={**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)})
  assert (done.returncode, done.stdout, done.stderr[-200:]) == (0, 'False\n', 'from the worker')
