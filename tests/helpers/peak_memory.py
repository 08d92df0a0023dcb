"""How much this process's peak resident memory grows over a block: the work a call did,
in pixels allocated, rather than the time it took (which a slow machine stretches)."""
import contextlib
from typing import Iterator, List


def _status_mb(field: str) -> float:
  with open('/proc/self/status') as f:
    for line in f:
      if line.startswith(field + ':'):
        return int(line.split()[1]) / 1024
  raise KeyError(field)


@contextlib.contextmanager
def growth() -> Iterator[List[float]]:
  """Yields a list that holds, once the block ends, the growth in MB of the peak RSS over the
  RSS at its start; the peak is reset first (Linux's /proc/self/clear_refs)."""
  with open('/proc/self/clear_refs', 'w') as f:
    f.write('5')
  start = _status_mb('VmRSS')
  grown: List[float] = []
  yield grown
  grown.append(_status_mb('VmHWM') - start)
