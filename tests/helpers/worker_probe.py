"""A task for the worker pool's tests: which of some modules a worker process has imported."""
import sys
from typing import Dict, Iterable


def imported(modules: Iterable[str]) -> Dict[str, bool]:
  return {name: name in sys.modules for name in modules}
