"""What the worker processes' forkserver runs before it forks them (workers.PRELOAD).

First a watch on the launcher (workers.start_forkserver names it): importing
TensorFlow takes seconds, and a launcher killed meanwhile must not leave the
forkserver importing on. Then TensorFlow (quiet_import: without Keras), which every worker step
imports, and the modules of the steps the workers run (core/steps.py); the
tf.Transform graph's, written once a run, is not among them.
"""
import os

from beam_pipeline.local import workers
from beam_pipeline.core.console import quiet_import

workers.end_with(int(os.environ.get(workers.LAUNCHER, os.getppid())))
quiet_import.tensorflow()

from beam_pipeline.core.images import validation  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import
from beam_pipeline.core.writing import (shard_writer)  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import
