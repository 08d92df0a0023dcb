"""What the worker processes' forkserver imports before it forks them (workers.PRELOAD).

TensorFlow first, as every worker step imports it (quiet_import: without Keras),
then the modules of the steps the workers run (core/steps.py); the tf.Transform
graph's, written once a run, is not among them.
"""
from beam_pipeline.core import quiet_import

quiet_import.tensorflow()

from beam_pipeline.core import shard_writer, validation  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import
