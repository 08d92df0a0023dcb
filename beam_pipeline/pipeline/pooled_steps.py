"""The DoFns of the two heavy steps, validating images and writing outputs, and how they hand
the core's step functions to the local worker pool (beam_pipeline/local) when they are given one."""
import collections
import contextlib
import dataclasses
import functools
import os
import shutil
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import BinaryIO, Any, Callable, Deque, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindows

from beam_pipeline.pipeline import model_files, tags
from beam_pipeline.pipeline.output import output_dir, output_lock
from beam_pipeline.core import steps, uris
from beam_pipeline.core.console import progress_counts
from beam_pipeline.core.inputs import reading
from beam_pipeline.core.output import output_layout, run_totals
from beam_pipeline.core.messages import (InputItem, OutputUnit, ShardPlan, ShardRewrite, ShardWritten, TransformGraph,
                                         Validated)
from beam_pipeline.core.settings import Settings
from beam_pipeline.local import workers


TRANSFORM_STAGING = 'transform'  # where a worker writes the graph (output_dir.staging)


def open_image(uri: str) -> BinaryIO:
  """A remote image's bytes as stored (the core's reading.Remote.open): a photo named
  x.jpg.gz must not be silently gunzipped."""
  return FileSystems.open(uri, compression_type=CompressionTypes.UNCOMPRESSED)


class _Task:
  """A step handed to the worker pool: what to run, the pool running it, and how often it was handed."""

  def __init__(self, step: Callable[..., Any], args: Tuple[Any, ...], then: Callable[[Any], Iterator[Any]]):
    self.step, self.args, self.then = step, args, then
    self.attempts = 0
    self.pool: Optional[Any] = None
    self.future: Optional[Future] = None

  def submit(self, pool: Any) -> '_Task':
    self.pool, self.future = pool, pool.submit(self.step, *self.args)
    self.attempts += 1
    return self

  def succeeded(self) -> bool:
    """Its result came back (a pool broken later leaves a finished future as it was)."""
    return self.future.done() and not self.future.cancelled() and self.future.exception() is None


class _PooledDoFn(beam.DoFn):
  """A DoFn that hands a core step to the local worker pool when it is ``pooled`` and can, or
  runs it inline (Dataflow, Beam's multi-process mode, a test pipeline).

  Pooled steps run ahead, up to AHEAD per worker, and what follows each (``then``)
  runs in the order they were handed out, as soon as each is done (the last ones from
  finish_bundle). Until the pool's first worker is forked (workers.forked) the steps wait
  here, not handed out, so that the bundle goes on (the listing) while the forkserver imports.
  Workers read and write local files only; a step that reads a remote file runs
  inline, with Beam's FileSystems to read it and --read_threads to read ahead on.

  A worker process that dies (killed by the system, for memory perhaps) takes the
  pool with it: a new pool then runs the tasks in flight again, as a runner
  retries a failed bundle, whether a task in flight reports the death or the pool refuses
  the next task (it knows of the death before any task's result is taken). A task whose
  worker died ATTEMPTS times fails the run.
  """

  # Enough that a slow task at the head of the queue (a batch of large PNGs) leaves
  # no worker idle; a task in flight holds only its inputs' names and metadata.
  AHEAD = 4
  ATTEMPTS = 2

  def __init__(self, settings: Settings, pooled: bool = False):
    self._settings = settings
    self._pooled = pooled  # the launcher started the pool in this process (local/workers.py)
    self._remote: Optional[reading.Remote] = None
    self._in_flight: Optional[Deque[_Task]] = None

  def setup(self) -> None:
    output_lock.keep_alive(self._settings.output, self._settings.run_id)  # a job's workers keep its lease
    threads = self._settings.read_threads
    pool = ThreadPoolExecutor(threads, thread_name_prefix=type(self).__name__)
    self._remote = reading.Remote(open_image, pool, threads)

  def teardown(self) -> None:
    if self._remote:
      self._remote.pool.shutdown()

  def start_bundle(self) -> None:
    self._in_flight = collections.deque()

  def finish_bundle(self) -> Iterator[Any]:
    for output in self._completed(limit=0):
      if isinstance(output, beam.pvalue.TaggedOutput):
        yield beam.pvalue.TaggedOutput(output.tag, GlobalWindows.windowed_value(output.value))
      else:
        yield GlobalWindows.windowed_value(output)

  def _run(self, step: Callable[..., Any], args: Tuple[Any, ...], then: Callable[[Any], Iterator[Any]],
           reads: Optional[Iterable[str]] = None) -> Iterator[Any]:
    """The outputs of ``then(step(*args))``, the step run in a worker unless a file it reads is remote.

    Args:
      step: the core step to run (core/steps.py).
      args: ``step``'s arguments; run here, a step that reads files gets remote reads (reading.Remote) as its
        last argument.
      then: makes this DoFn's outputs of the step's result, here, in the order the steps were handed out.
      reads: the files the step reads, None if it reads none: a remote one keeps the step out of the pool, whose
        workers read local files only.
    """
    pool = workers.pool() if self._pooled else None
    if pool is None or (reads is not None and uris.any_remote(reads)):
      self._handing(args)
      yield from then(step(*args) if reads is None else step(*args, self._remote))
      return
    self._in_flight.append(_Task(step, args, then))
    if workers.forked():
      self._handed_out(pool)
    yield from self._completed(limit=self.AHEAD * workers.count())

  def _handed_out(self, pool: Any) -> None:
    """Hands the pool the steps in flight that wait to be, in order."""
    for task in self._in_flight:
      if task.future is None:
        self._handing(task.args)
        try:
          task.submit(pool)
        except BrokenProcessPool:  # not an attempt: the task never reached a worker
          pool = self._replaced(pool)
          task.submit(pool)

  def _handing(self, args: Tuple[Any, ...]) -> None:
    """Called as a step with ``args`` is handed to a worker, or run here."""

  def _completed(self, limit: int) -> Iterator[Any]:
    """What follows the steps in flight, in order: of those done already, and of as many more
    as must end for at most ``limit`` to stay in flight (handed out first, if they wait)."""
    while self._in_flight and (len(self._in_flight) > limit or self._done_first()):
      task = self._in_flight[0]
      if task.future is None:
        self._handed_out(workers.pool())
      try:
        result = task.future.result()
      except BrokenProcessPool:
        if task.attempts >= self.ATTEMPTS:
          raise
        self._replaced(task.pool)
        continue
      self._in_flight.popleft()
      yield from task.then(result)

  def _done_first(self) -> bool:
    first = self._in_flight[0].future
    return first is not None and first.done()

  def _replaced(self, broken: Any) -> Any:
    """A new pool in place of ``broken``, with the tasks in flight on it handed to it again,
    but for those whose result came back before the death."""
    pool = workers.replace(broken)
    for task in self._in_flight:
      if task.pool is broken and not task.succeeded():
        task.submit(pool)
    return pool


def transform_graph(settings: Settings) -> List[TransformGraph]:
  """The tf.Transform graph to write beside the shards, if any."""
  if settings.skip_transform:
    return []
  spec = settings.embedding
  return [TransformGraph(settings.image_size, settings.schema, spec.output_shape if spec else (),
                         not (spec and spec.only), settings.multi_label)]


# The input bytes one task of validation takes at most where a batch is divided among the pool's
# workers (divided): a batch of small photos stays one task, a batch of large images is spread.
TASK_BYTES = 2 * 2**20


def divided(items: List[InputItem], sizes: List[int], task_bytes: int = TASK_BYTES) -> List[List[InputItem]]:
  """``items`` in consecutive tasks of about equal input bytes (``sizes``, each item's), as few as
  keep each near ``task_bytes``: a listing batch holds a fixed number of files, and sixteen 8K
  images in one task would keep one worker decoding while the others wait, and the progress
  count still for a minute."""
  total = sum(sizes)
  tasks = min(len(items), -(-total // task_bytes)) or 1
  if tasks == 1:
    return [items]
  target = total / tasks
  divisions: List[List[InputItem]] = [[]]
  filled = 0
  for item, size in zip(items, sizes):
    if divisions[-1] and filled + size / 2 > target * len(divisions) and len(divisions) < tasks:
      divisions.append([])
    divisions[-1].append(item)
    filled += size
  return divisions


def _local_size(uri: str) -> int:
  try:
    return os.stat(uri).st_size
  except (OSError, ValueError):
    return 0  # its read will say why


class ValidateImages(_PooledDoFn):
  """Reads, hashes and fully decodes batches of inputs (core/images/validation.py); emits lists of
  metadata records, never bytes: Beam's cost per element exceeds a record's own. In the worker
  pool, a batch of large files is divided among the workers (divided)."""

  # The listing hands its batches to this step as it makes them, in the same stage, and goes on
  # only while this step takes them: held to validation's pace, it would not know the input's
  # size until validation nearly ended, and the console could tell neither how many images are
  # left nor how long they take. A task in flight holds its items' names (and, done behind a
  # slower one, its records' metadata), so the listing may run this far ahead.
  AHEAD = 256

  def process(self, batch: List[InputItem]) -> Iterator[Any]:
    # An --incremental run keeps each rejected input's fingerprint in the errors files.
    fingerprints = {item.uri: item.fingerprint for item in batch} if self._settings.incremental else {}
    pooled = self._pooled and workers.pool() is not None and not uris.any_remote(item.uri for item in batch)
    for task in divided(batch, [_local_size(item.uri) for item in batch]) if pooled else [batch]:
      yield from self._run(steps.validate_batch, (task, self._settings), functools.partial(self._emit, fingerprints),
                           (item.uri for item in task))

  def _handing(self, args: Tuple[Any, ...]) -> None:
    progress_counts.counts().handed(len(args[0]))

  def _emit(self, fingerprints: Dict[str, str], result: Validated) -> Iterator[Any]:
    progress_counts.counts().checked(len(result.records) + len(result.rejections), rejected=len(result.rejections))
    for rejection in result.rejections:
      yield tags.rejected(rejection._replace(fingerprint=fingerprints.get(rejection.uri, '')))
    for rejection in result.annotation_problems or []:
      yield tags.rejected(rejection)
    if result.records:
      yield result.records
    # Reported once per batch: each metric update looks up its cell.
    Metrics.counter(tags.NAMESPACE, 'validated').inc(len(result.records))
    for source_format, count in result.source_formats.items():
      Metrics.counter(tags.NAMESPACE, f'source_format_{source_format}').inc(count)


class WriteOutputs(_PooledDoFn):
  """Writes each OutputUnit, a planned shard (core/writing/shard_writer.py) or the tf.Transform graph,
  to local disk, and stages it in the output for the commit; the shards go to the main output,
  the graph's directory names to tags.TRANSFORM_WRITTEN, the catalog entries whose lookup lines
  change (--incremental) to tags.CATALOGUED. A worker pool writes them side by side."""

  def __init__(self, settings: Settings, pooled: bool = False):
    super().__init__(settings, pooled)
    self._scratch = ''  # where shards and the graph are staged for a remote output
    self._held: Optional[contextlib.ExitStack] = None
    self._model_path: Optional[str] = None  # a local path of --embedding_model

  def setup(self) -> None:
    super().setup()
    if uris.is_remote(self._settings.output):
      self._scratch = tempfile.mkdtemp(prefix='beam_pipeline-')
    self._held = contextlib.ExitStack()
    if self._settings.embedding:
      self._model_path = self._held.enter_context(model_files.local_copy(self._settings.embedding.model))

  def teardown(self) -> None:
    super().teardown()
    if self._scratch:
      shutil.rmtree(self._scratch, ignore_errors=True)
    if self._held:
      self._held.close()

  def process(self, unit: OutputUnit, class_names: List[str],
              checked: Optional[Tuple[int, Mapping[str, Tuple[int, str]]]] = None, num_listed: int = 0
              ) -> Iterator[Any]:
    """Writes ``unit``; first, if the listing's and the images' checks already rejected too many
    inputs, fails the run instead.

    Args:
      unit: a planned shard, a shard an update writes again without its lost records, or the tf.Transform graph.
      class_names: the label texts in class order (labels.txt's lines), whose places are the labels' ids.
      checked: how many rows the listing rejected, which are inputs beside the ``num_listed`` items, and each
        reason's count and first uri (RejectionCounts); None for an update, whose budget only its commit can tell.
      num_listed: how many items the listing gave.
    """
    settings = self._settings
    if checked is not None:
      rows, by_reason = checked
      run_totals.check_budget_before_writing(num_listed + rows, by_reason, settings.max_error_fraction)
    if isinstance(unit, ShardPlan):
      name = output_layout.shard_file(unit, settings.compression)
      staged = output_dir.staging(settings.output, settings.run_id, name, self._scratch)
      yield from self._run(steps.write_shard, (unit, staged, settings, class_names, self._model_path),
                           functools.partial(self._shard_written, staged, ()), (record.uri for record in unit.records))
    elif isinstance(unit, ShardRewrite):
      staged = output_dir.staging(settings.output, settings.run_id, unit.file, self._scratch)
      if unit.catalog_only:  # the shard itself is neither read nor downloaded: only its size is needed
        unit = dataclasses.replace(unit, num_bytes=output_dir.size(settings.output, unit.file) or 0)
      earlier = [(None if unit.catalog_only else self._local(name), self._local(output_layout.catalog_file(name)))
                 for name in unit.sources]
      downloaded = [path for pair in earlier for path in pair if path] if self._scratch else []
      yield from self._run(steps.rewrite_shard, (unit, earlier, staged, settings),
                           functools.partial(self._shard_written, staged, downloaded))
    else:
      staged = output_dir.staging(settings.output, settings.run_id, TRANSFORM_STAGING, self._scratch)
      yield from self._run(steps.write_graph, (staged, unit, class_names),
                           functools.partial(self._graph_written, staged))

  def _local(self, name: str) -> str:
    """A local path of the output's file ``name``: itself, or a copy in the scratch folder of a remote output's."""
    if not self._scratch:
      return output_dir.path(self._settings.output, name)
    local = os.path.join(self._scratch, 'earlier', name)
    output_dir.download(output_dir.path(self._settings.output, name), local)
    return local

  def _shard_written(self, staged: str, downloaded: Iterable[str], result: ShardWritten) -> Iterator[Any]:
    progress_counts.counts().rejected(len(result.rejections))
    for rejection in result.rejections:
      yield tags.rejected(rejection)
    output, run = self._settings.output, self._settings.run_id
    if not result.shard.catalog_only:
      output_dir.stage(output, run, result.shard.file, staged)
    if result.shard.index_file and not result.shard.catalog_only:
      output_dir.stage(output, run, result.shard.index_file, output_layout.index_file(staged))
    if result.shard.catalog_file:
      output_dir.stage(output, run, result.shard.catalog_file, output_layout.catalog_beside(staged, result.shard.file))
    for local in downloaded:
      os.remove(local)
    progress_counts.counts().written(result.shard.num_examples)
    Metrics.counter(tags.NAMESPACE, 'written').inc(result.shard.num_examples)
    yield result.shard
    yield from result.replaced
    if result.catalogued:
      yield beam.pvalue.TaggedOutput(tags.CATALOGUED, (result.shard.shard_id, list(result.catalogued)))

  def _graph_written(self, staged: str, _) -> Iterator[Any]:
    for name in output_layout.TRANSFORM_DIRECTORIES:
      output_dir.stage(self._settings.output, self._settings.run_id, name, os.path.join(staged, name))
    yield beam.pvalue.TaggedOutput(tags.TRANSFORM_WRITTEN, list(output_layout.TRANSFORM_DIRECTORIES))
