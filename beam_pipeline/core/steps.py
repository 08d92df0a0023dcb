"""The three heavy steps, as the DoFns call them inline and hand them to worker processes.

Naming one of these costs no import, so the launcher of a local run can hand
them to its workers (which find them by module and name) without importing
TensorFlow itself: each imports its module, and TensorFlow with it, where it
runs (quietly: quiet_import). Worker processes have those modules imported
already (workers.PRELOAD).
"""
from typing import List, Optional, Sequence

from beam_pipeline.core import quiet_import

from beam_pipeline.core.reading import Remote
from beam_pipeline.core.records import InputItem, ShardPlan, ShardWritten, TransformGraph, Validated
from beam_pipeline.core.settings import Settings


def validate_batch(items: Sequence[InputItem], settings: Settings, remote: Optional[Remote] = None) -> Validated:
  quiet_import.tensorflow()
  from beam_pipeline.core import validation  # pylint: disable=import-outside-toplevel
  return validation.validate_batch(items, settings, remote)


def write_shard(plan: ShardPlan, file_path: str, settings: Settings, class_names: List[str],
                remote: Optional[Remote] = None) -> ShardWritten:
  quiet_import.tensorflow()
  from beam_pipeline.core import shard_writer  # pylint: disable=import-outside-toplevel
  return shard_writer.write_shard(plan, file_path, settings, class_names, remote)


def write_graph(directory: str, graph: TransformGraph, class_names: List[str]) -> None:
  quiet_import.tensorflow_transform()
  from beam_pipeline.core import transform  # pylint: disable=import-outside-toplevel
  transform.write_graph(directory, graph, class_names)
