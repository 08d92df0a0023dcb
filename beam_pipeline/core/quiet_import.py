"""TensorFlow, imported without its start-up notices on standard error, and without Keras.

Before absl's logging is initialized, TensorFlow's C++ code writes every message
(CUDA probing, CPU features) straight to standard error, whatever
TF_CPP_MIN_LOG_LEVEL says; after it, that variable holds (cli.quiet_libraries sets
it). So the import runs with file descriptor 2 on /dev/null, as the worker
processes' forkserver does. A Python error still raises, and is printed after.

``import tensorflow`` also imports all of Keras 3, to register its optimizers for
SavedModels (the end of tensorflow/__init__.py; it passes on an ImportError),
Keras imports matplotlib's pyplot for its plotting helpers, and TensorFlow's GCE
cluster resolver imports the Google API client (both pass on an ImportError
too): 1.1 of the import's 2.9 s, in the workers' forkserver on the way to the
first image, and in inspect and verify. Nothing here uses them but the embedding
model, which imports Keras itself (Keras then registers what it registers), so
they stay hidden while TensorFlow is imported, and import as usual afterwards;
TensorFlow's TPU and GCE cluster resolvers, which we never use, then see no API
client.
"""
import contextlib
import os
import sys
from types import ModuleType
from typing import Iterator

# What the import of TensorFlow leaves out (see the module docstring).
_LEFT_OUT = ('keras', 'matplotlib', 'googleapiclient')


def tensorflow() -> ModuleType:
  if 'tensorflow' in sys.modules:
    return sys.modules['tensorflow']
  sys.stderr.flush()
  saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
  try:
    os.dup2(devnull, 2)
    with _left_out():
      import tensorflow  # pylint: disable=import-outside-toplevel
  finally:
    os.dup2(saved, 2)
    os.close(saved)
    os.close(devnull)
  return tensorflow


@contextlib.contextmanager
def _left_out() -> Iterator[None]:
  """Makes importing _LEFT_OUT raise ImportError meanwhile, unless it is imported already."""
  hidden = [name for name in _LEFT_OUT if name not in sys.modules]
  for name in hidden:
    sys.modules[name] = None  # the import system's own mark for "raise ImportError"
  try:
    yield
  finally:
    for name in hidden:
      if sys.modules.get(name, ...) is None:
        del sys.modules[name]
