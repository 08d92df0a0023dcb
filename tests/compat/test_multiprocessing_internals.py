"""multiprocessing's internals as compat/multiprocessing_internals.py uses them: a Python that
moves them fails here, instead of leaving forkservers running after bad options."""
import os
import subprocess
import sys

import pytest

from beam_pipeline.local import workers

from helpers import process_state

pytestmark = pytest.mark.skipif(not workers.available(), reason='no forkserver on this platform')


def test_the_forkserver_can_be_found_and_stopped_through_multiprocessings_private_state():
  """In a process of its own, as a command starts its forkserver (this one's may have served a
  pool: stop_forkserver keeps such a one)."""
  script = ('import time\n'
            'from beam_pipeline.compat import multiprocessing_internals\n'
            'from beam_pipeline.local import workers\n'
            'workers.start_forkserver()\n'
            'pid = multiprocessing_internals.forkserver_pid()\n'
            'while not open(f"/proc/{pid}/cmdline", "rb").read():  # not yet past its exec\n'
            '  time.sleep(0.01)\n'
            'print(pid, open(f"/proc/{pid}/cmdline", "rb").read(), flush=True)\n'
            'workers.stop_forkserver()\n'
            'print(multiprocessing_internals.forkserver_pid(), flush=True)\n'
            'input()\n')  # alive until the test has looked: the killed forkserver stays its zombie
  with subprocess.Popen([sys.executable, '-c', script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        text=True) as launcher:
    pid, cmdline = launcher.stdout.readline().split(' ', 1)
    assert 'multiprocessing.forkserver' in cmdline
    assert launcher.stdout.readline().strip() == pid
    assert process_state.ended(int(pid), timeout=60)
    launcher.communicate('\n', timeout=60)


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
