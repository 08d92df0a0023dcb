"""The real command, in this process or in a subprocess, as users, Airflow and CI run it."""
import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Optional

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 300
# What TensorFlow and its decoders printed on the console before the command kept them off
# it: CUDA probing on a machine without a GPU, absl's start-up notice, decoder warnings.
CHATTER = ('cuInit', 'cuda', 'absl::InitializeLog', 'oneDNN', 'jpeg_mem.cc', 'Premature end of JPEG',
           'Corrupt JPEG data', 'PNG warning', 'Improper call to JPEG library', 'cpu_feature_guard')


def chatter(text: str) -> List[str]:
  """The CHATTER that ``text`` holds."""
  return [word for word in CHATTER if word in text]


def error_line(stderr: str) -> str:
  """The line of a failed command's standard error that says what went wrong (the lines after it
  say what became of the output and where the details are)."""
  errors = [line for line in stderr.splitlines() if line.startswith('error: ')]
  assert len(errors) == 1, stderr[-3000:]
  return errors[0]


def convert(*args: object) -> int:
  """A conversion in this process, on the DirectRunner: the exit code ``python -m beam_pipeline ARGS`` gives."""
  from beam_pipeline import cli  # pylint: disable=import-outside-toplevel
  return cli.main([*map(str, args), '--runner=DirectRunner'])


def in_process(argv: List[str], capfd, caplog) -> subprocess.CompletedProcess:
  """``cli.main(argv)`` in this process, as the command's completed process would be: its standard
  error also holds the log records that reached the root logger, as the handler Beam's
  logging.basicConfig gives the command would have printed them (pytest captures them instead)."""
  from beam_pipeline import cli  # pylint: disable=import-outside-toplevel
  code = cli.main(argv)
  out, err = capfd.readouterr()
  err += ''.join(f'{record.levelname}:{record.name}:{record.getMessage()}\n' for record in caplog.records)
  return subprocess.CompletedProcess(argv, code, out, err)


def command(*args: object) -> List[str]:
  """``python -m beam_pipeline ARGS``."""
  return [sys.executable, '-m', 'beam_pipeline', *map(str, args)]


def user_environment() -> Dict[str, str]:
  """This environment without the TensorFlow settings the tests' own process uses: whatever
  quiets TensorFlow in a command must be the command's own doing."""
  return {name: value for name, value in os.environ.items() if not name.startswith('TF_')}


def run_cli(*args: object, environment: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
  """Runs ``python -m beam_pipeline ARGS`` to its end, its output captured as text;
  ``environment`` adds to the user's."""
  return subprocess.run(command(*args), cwd=ROOT, env={**user_environment(), **(environment or {})},
                        capture_output=True, text=True, timeout=TIMEOUT, check=False)


@contextlib.contextmanager
def started(argv: List[str], log: Path) -> Iterator[subprocess.Popen]:
  """Starts ``argv`` in a session of its own, its output to ``log``; on the way out, whatever
  is left of its process group (workers, a forkserver) is killed, so no failed test leaves
  processes behind."""
  with open(log, 'w') as log_file:
    process = subprocess.Popen(argv, cwd=ROOT, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
  try:
    yield process
  finally:
    if process.poll() is None:
      os.killpg(process.pid, signal.SIGKILL)
      process.wait()
