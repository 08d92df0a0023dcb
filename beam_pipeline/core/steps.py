"""The heavy steps, as the DoFns call them inline and hand them to worker processes.

Naming one of these costs no import, so the launcher of a local run can hand
them to its workers (which find them by module and name) without importing
TensorFlow itself: each imports its module, and TensorFlow with it, where it
runs (quietly: quiet_import). Worker processes have those modules imported
already (workers.PRELOAD).
"""
from typing import List, Optional, Sequence, Tuple

from beam_pipeline.core.console import quiet_import

from beam_pipeline.core.inputs.reading import Remote
from beam_pipeline.core.messages import InputItem, ShardPlan, ShardRewrite, ShardWritten, TransformGraph, Validated
from beam_pipeline.core.settings import EmbeddingSpec, Settings


def validate_batch(items: Sequence[InputItem], settings: Settings, remote: Optional[Remote] = None) -> Validated:
  quiet_import.tensorflow()
  from beam_pipeline.core.images import validation  # pylint: disable=import-outside-toplevel
  return validation.validate_batch(items, settings, remote)


def write_shard(plan: ShardPlan, file_path: str, settings: Settings, class_names: List[str],
                model_path: Optional[str] = None, remote: Optional[Remote] = None) -> ShardWritten:
  """Writes a shard; with --embedding_model, its images embedded by the model at ``model_path``.

  Args:
    plan: the shard's records, in the order they are written, and its place among its split's shards.
    file_path: the local file to write, under a temporary name: the Beam side moves or uploads it into place.
    settings: the run's settings.
    class_names: the run's classes, each one's id its index in the list.
    model_path: a local path of --embedding_model (a copy of a remote one); None without it.
    remote: what reads Cloud Storage objects (ahead); None in a process that reads local files only.
  """
  quiet_import.tensorflow()
  from beam_pipeline.core.writing import shard_writer  # pylint: disable=import-outside-toplevel
  embed = None
  if settings.embedding:
    from beam_pipeline.core.writing import embedding_model  # pylint: disable=import-outside-toplevel
    embed = embedding_model.embedder(settings.embedding, model_path)
  return shard_writer.write_shard(plan, file_path, settings, class_names, remote, embed=embed)


def rewrite_shard(unit: ShardRewrite, earlier: Sequence[Tuple[str, str]], file_path: str,
                  settings: Settings) -> ShardWritten:
  """Writes an --incremental output's shard again, its kept records copied as they are, their images unread.

  Args:
    unit: the shard to write again: its name, the earlier shards whose records it holds, the uris whose records go.
    earlier: each of ``unit.sources`` as a local (shard, catalog) pair of paths, in order.
    file_path: the local file to write, under a temporary name: the Beam side moves or uploads it into place.
    settings: the run's settings.
  """
  quiet_import.tensorflow()
  from beam_pipeline.core.writing import shard_rewriter  # pylint: disable=import-outside-toplevel
  return shard_rewriter.rewrite_shard(unit, earlier, file_path, settings)


def check_model(spec: EmbeddingSpec, model_path: str) -> Tuple[int, ...]:
  """The shape of one embedding of the model at the local ``model_path``; ModelError unless it
  embeds images. The process keeps the model it loaded, for the shards it writes."""
  quiet_import.tensorflow()
  from beam_pipeline.core.writing import embedding_model  # pylint: disable=import-outside-toplevel
  return embedding_model.check(spec, model_path)


def write_graph(directory: str, graph: TransformGraph, class_names: List[str]) -> None:
  quiet_import.tensorflow_transform()
  from beam_pipeline.core.writing import transform_graph  # pylint: disable=import-outside-toplevel
  transform_graph.write_graph(directory, graph, class_names)
