"""TensorFlow, imported without its start-up notices on standard error.

Before absl's logging is initialized, TensorFlow's C++ code writes every message
(CUDA probing, CPU features) straight to standard error, whatever
TF_CPP_MIN_LOG_LEVEL says; after it, that variable holds (cli.quiet_libraries sets
it). So the import runs with file descriptor 2 on /dev/null, as the worker
processes' forkserver does. A Python error still raises, and is printed after.
"""
import os
import sys
from types import ModuleType


def tensorflow() -> ModuleType:
  if 'tensorflow' in sys.modules:
    return sys.modules['tensorflow']
  sys.stderr.flush()
  saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
  try:
    os.dup2(devnull, 2)
    import tensorflow  # pylint: disable=import-outside-toplevel
  finally:
    os.dup2(saved, 2)
    os.close(saved)
    os.close(devnull)
  return tensorflow
