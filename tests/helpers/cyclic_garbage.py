"""What only reference cycles keep alive: a leak there holds memory until a full collection."""
import contextlib
import gc
from typing import Iterator, List


@contextlib.contextmanager
def collected() -> Iterator[List[object]]:
  """Fills the yielded list, when the block ends, with the objects that reference cycles
  made in the block keep alive; other threads' cycles may be among them, so tests look
  for their own types."""
  gc.collect()
  gc.disable()
  found: List[object] = []
  try:
    yield found
    gc.set_debug(gc.DEBUG_SAVEALL)
    gc.collect()
    found.extend(gc.garbage)
  finally:
    gc.set_debug(0)
    gc.garbage.clear()
    gc.enable()
