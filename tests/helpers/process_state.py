"""A process's state as Linux reports it, for tests that end processes they did not start."""
import time
from typing import Optional


def state(pid: int) -> Optional[str]:
  """The state letter of /proc/PID/stat ('R', 'S', 'Z', ...); None once the process is gone."""
  try:
    with open(f'/proc/{pid}/stat') as f:
      return f.read().rsplit(')', 1)[1].split()[0]
  except FileNotFoundError:
    return None


def ended(pid: int, timeout: float) -> bool:
  """Whether the process has ended (a zombie or gone) within ``timeout`` seconds: a bound that
  only a hang reaches."""
  deadline = time.monotonic() + timeout
  while state(pid) not in ('Z', None) and time.monotonic() < deadline:
    time.sleep(0.01)
  return state(pid) in ('Z', None)
