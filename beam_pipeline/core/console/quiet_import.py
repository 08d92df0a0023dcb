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
too): well over a third of the import (benchmarks/README.md), in the workers'
forkserver on the way to the first image, and in inspect and verify. Nothing here
uses them but the embedding model, which imports Keras itself (Keras then
registers what it registers), so they stay hidden while TensorFlow is imported,
and import as usual afterwards; TensorFlow's TPU and GCE cluster resolvers, which
we never use, then see no API client.

tf.Transform imports tf_keras, whose data adapter imports pandas if it can, only so
that ``fit`` accepts DataFrames: a large part of tf.Transform's import, paid on
the way to the graph, which never fits anything. tensorflow_transform() leaves it
out for the worker step that writes the graph; users' own processes (the reader)
import tf.Transform as usual.
"""
import contextlib
import os
import sys
from types import ModuleType
from typing import Iterator, Tuple

# What the imports of TensorFlow and tf.Transform leave out (see the module docstring).
_LEFT_OUT = ('keras', 'matplotlib', 'googleapiclient')
_LEFT_OUT_BY_TRANSFORM = ('pandas',)


def tensorflow() -> ModuleType:
  if 'tensorflow' in sys.modules:
    return sys.modules['tensorflow']
  # As the command sets it (cli.quiet_libraries), also where the command did not start the
  # process (a Dataflow worker): the image decoders' stderr output must be theirs alone.
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
  sys.stderr.flush()
  saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
  try:
    os.dup2(devnull, 2)
    with left_out(_LEFT_OUT):
      import tensorflow  # pylint: disable=import-outside-toplevel
  finally:
    os.dup2(saved, 2)
    os.close(saved)
    os.close(devnull)
  return tensorflow


def tensorflow_transform() -> ModuleType:
  """tf.Transform, for a worker step: with TensorFlow imported quietly, and without pandas."""
  tensorflow()
  if 'tensorflow_transform' in sys.modules:
    return sys.modules['tensorflow_transform']
  with left_out(_LEFT_OUT_BY_TRANSFORM):
    import tensorflow_transform  # pylint: disable=import-outside-toplevel
  return tensorflow_transform


@contextlib.contextmanager
def left_out(names: Tuple[str, ...]) -> Iterator[None]:
  """Makes importing ``names`` raise ImportError meanwhile, unless imported already;
  for imports of optional dependencies that their importer passes on."""
  hidden = [name for name in names if name not in sys.modules]
  for name in hidden:
    sys.modules[name] = None  # the import system's own mark for "raise ImportError"
  try:
    yield
  finally:
    for name in hidden:
      if sys.modules.get(name, ...) is None:
        del sys.modules[name]
