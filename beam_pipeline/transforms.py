"""The DoFns and step functions of the pipeline: thin Beam glue around plain functions."""
import collections
import itertools
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Deque, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindows

from beam_pipeline import dataset_info, hash_order, inputs, labels, output_dir, sharding, splitting, uris, workers
from beam_pipeline.records import ImageRecord, InputItem
from beam_pipeline.rejections import Rejection
from beam_pipeline.settings import Settings
from beam_pipeline.sharding import OutputUnit, ShardPlan

REJECTED = 'rejected'
DUPLICATES = 'duplicates'
LABELS = 'labels'
TRANSFORM_WRITTEN = 'transform_written'
_NAMESPACE = 'beam_pipeline'


def _rejected(rejection: Rejection) -> beam.pvalue.TaggedOutput:
  Metrics.counter(_NAMESPACE, f'rejected_{rejection.reason}').inc()
  return beam.pvalue.TaggedOutput(REJECTED, rejection)


class _PooledDoFn(beam.DoFn):
  """A DoFn that hands work to the local worker pool (workers.py) when it can, or does it inline.

  Pooled work runs ahead, up to AHEAD tasks per worker, and its outputs are
  emitted in the order it was handed out (the last ones from finish_bundle).
  Inline work reads Cloud Storage objects ahead on a thread pool of --read_threads.
  """

  # Enough that a slow task at the head of the queue (a batch of large PNGs) leaves
  # no worker idle; a task in flight holds only its inputs' names and metadata.
  AHEAD = 4

  def __init__(self, settings: Settings):
    self._settings = settings
    self._read_pool = None
    self._in_flight: Optional[Deque[Tuple[Any, Future]]] = None

  def setup(self) -> None:
    self._read_pool = ThreadPoolExecutor(self._settings.read_threads, thread_name_prefix=type(self).__name__)

  def teardown(self) -> None:
    if self._read_pool:
      self._read_pool.shutdown()

  def start_bundle(self) -> None:
    self._in_flight = collections.deque()

  def finish_bundle(self) -> Iterator[Any]:
    for output in self._completed(limit=0):
      if isinstance(output, beam.pvalue.TaggedOutput):
        yield beam.pvalue.TaggedOutput(output.tag, GlobalWindows.windowed_value(output.value))
      else:
        yield GlobalWindows.windowed_value(output)

  def _run(self, unit: Any, task: workers.Task, args: Tuple[Any, ...], local: bool,
           reads: bool = True) -> Iterator[Any]:
    """Outputs of ``task(*args)`` for ``unit``: in a worker if its files are ``local``, else here
    (where a task that ``reads`` files gets the read-ahead thread pool)."""
    pool = workers.pool()
    if pool is None or not local:
      yield from self._outputs(unit, task(*args, self._read_pool) if reads else task(*args))
      return
    self._in_flight.append((unit, pool.submit(task, *args)))
    yield from self._completed(limit=self.AHEAD * workers.count())

  def _completed(self, limit: int) -> Iterator[Any]:
    while len(self._in_flight) > limit:
      unit, future = self._in_flight.popleft()
      yield from self._outputs(unit, future.result())

  def _outputs(self, unit: Any, result: Any) -> Iterator[Any]:
    raise NotImplementedError


_VALIDATE = workers.Task('beam_pipeline.validation', 'validate_batch')
_WRITE_SHARD = workers.Task('beam_pipeline.shard_writer', 'write_shard')
_WRITE_GRAPH = workers.Task('beam_pipeline.transform', 'write_graph')
TRANSFORM_STAGING = 'transform'  # where the graph is written, under the output's temporary directory


def list_input(spec: inputs.InputSpec) -> Iterator[Any]:
  """Batches of the input's items; a manifest row that names no usable input is rejected here."""
  for batch in inputs.list_input_batches(spec):
    yield _rejected(batch) if isinstance(batch, Rejection) else batch


class ValidateImages(_PooledDoFn):
  """Reads, hashes and fully decodes batches of inputs (validation.py); emits lists of
  metadata records, never bytes: Beam's cost per element exceeds a record's own."""

  def process(self, batch: List[InputItem]) -> Iterator[Any]:
    yield from self._run(None, _VALIDATE, (batch, self._settings), not uris.any_remote(item.uri for item in batch))

  def _outputs(self, unit: Any, result: Any) -> Iterator[Any]:
    for rejection in result.rejections:
      yield _rejected(rejection)
    if result.records:
      yield result.records
    # Reported once per batch: each metric update looks up its cell.
    Metrics.counter(_NAMESPACE, 'validated').inc(len(result.records))
    for source_format, count in result.source_formats.items():
      Metrics.counter(_NAMESPACE, f'source_format_{source_format}').inc(count)


class WriteOutputs(_PooledDoFn):
  """Writes each OutputUnit, a planned shard (shard_writer.py) or the tf.Transform graph,
  then moves its files into place; the shards go to the main output, the graph's
  directory names to TRANSFORM_WRITTEN. A worker pool writes them side by side."""

  def process(self, unit: OutputUnit, class_names: List[str]) -> Iterator[Any]:
    settings, plan = self._settings, unit.plan
    if plan is None:
      staging = output_dir.temp_path(settings.output, TRANSFORM_STAGING)
      yield from self._run(unit, _WRITE_GRAPH, (staging, settings.image_size, class_names),
                           not uris.is_remote(settings.output), reads=False)
    else:
      local = not uris.any_remote(itertools.chain([settings.output], (record.uri for record in plan.records)))
      file_path = output_dir.temp_path(settings.output, plan.file_name(settings.compression))
      yield from self._run(unit, _WRITE_SHARD, (plan, file_path, settings, class_names), local)

  def _outputs(self, unit: OutputUnit, result: Any) -> Iterator[Any]:
    output = self._settings.output
    if unit.plan is None:
      for name in output_dir.TRANSFORM_DIRS:
        output_dir.publish_tree(output, f'{TRANSFORM_STAGING}/{name}', name)
      yield beam.pvalue.TaggedOutput(TRANSFORM_WRITTEN, list(output_dir.TRANSFORM_DIRS))
      return
    for rejection in result.rejections:
      yield _rejected(rejection)
    output_dir.publish(output, result.shard['file'])
    Metrics.counter(_NAMESPACE, 'written').inc(result.shard['num_examples'])
    yield result.shard


class GroupCopies(beam.DoFn):
  """Finds the identical files of one content bucket; reports and maybe drops copies.

  Emits the bucket's content groups, all classes together, as one (bucket, groups) element."""

  def __init__(self, dedupe: bool):
    self._dedupe = dedupe

  def process(self, bucket: Tuple[str, Iterable[List[ImageRecord]]]) -> Iterator[Any]:
    groups = []
    for copies in splitting.same_content(itertools.chain.from_iterable(bucket[1])):
      group, dropped = splitting.group_duplicates(copies, self._dedupe)
      if len(copies) > 1:
        Metrics.counter(_NAMESPACE, 'duplicate_groups').inc()
        yield beam.pvalue.TaggedOutput(DUPLICATES, sorted(r.uri for r in copies))
      for rejection in dropped:
        yield _rejected(rejection)
      groups.append(group)
    yield bucket[0], groups


class _BucketOffsets(beam.PTransform):
  """Every (bucket, items) element's ((key, bucket), weight) pairs, gathered into one
  hash_order.Offsets for a side input; ``weights`` is the plain function that weighs a bucket."""

  def __init__(self, weights: Callable[[str, Any], Iterable[Tuple[Tuple[str, str], int]]]):
    super().__init__()
    self._weights = weights

  def expand(self, buckets):
    return (buckets
            | 'Weights' >> beam.FlatMapTuple(self._weights)
            | 'All' >> beam.combiners.ToList()
            | 'Offsets' >> beam.Map(hash_order.offsets))


class AssignSplits(beam.PTransform):
  """(bucket, records) with every record's split, from (bucket, content groups).

  Every bucket reports its images per class first; with those totals each bucket
  assigns its own groups, so no worker holds a whole class. Also outputs, tagged,
  the label texts.
  """

  def __init__(self, spec: splitting.SplitSpec):
    super().__init__()
    self._spec = spec

  def expand(self, buckets):
    placed = buckets | 'Place' >> _BucketOffsets(splitting.class_weights)
    return buckets | 'Assign' >> beam.FlatMap(assign_splits, self._spec, beam.pvalue.AsSingleton(placed)
                                              ).with_output_types(Tuple[str, List[ImageRecord]]).with_outputs(
                                                  LABELS, main='records')


def assign_splits(bucket: Tuple[str, List[splitting.ContentGroup]], spec: splitting.SplitSpec,
                  placed: hash_order.Offsets) -> Iterator[Any]:
  """One bucket's records with their splits, then its label texts."""
  records = list(splitting.assign_splits(bucket[0], bucket[1], spec, placed))
  yield bucket[0], records
  for text in sorted({record.label for record in records if record.label is not None}):
    yield beam.pvalue.TaggedOutput(LABELS, text)


class PlanShards(beam.PTransform):
  """One ShardPlan per shard, from (bucket, records) with splits.

  Every bucket reports its bytes per split first; with those totals each bucket
  places its own records, and the shards' GroupByKey spreads them over workers.
  """

  def __init__(self, target_bytes: int):
    super().__init__()
    self._target_bytes = target_bytes

  def expand(self, buckets):
    placed = buckets | 'Place' >> _BucketOffsets(sharding.split_bytes)
    shards = buckets | 'Assign' >> beam.FlatMap(assign_shards, self._target_bytes, beam.pvalue.AsSingleton(
        placed)).with_output_types(Tuple[Tuple[str, int], List[ImageRecord]])
    numbered = (shards
                | 'Planned' >> beam.Keys()
                | 'AllPlanned' >> beam.combiners.ToList()
                | 'Number' >> beam.Map(sharding.numbering))
    return (shards
            | 'GroupByShard' >> beam.GroupByKey()
            | 'Plan' >> beam.Map(plan_shard, beam.pvalue.AsSingleton(numbered)).with_output_types(ShardPlan))


def assign_shards(bucket: Tuple[str, List[ImageRecord]], target_bytes: int,
                  placed: hash_order.Offsets) -> Iterable[Tuple[Tuple[str, int], List[ImageRecord]]]:
  return sharding.assign_shards(bucket[0], bucket[1], target_bytes, placed).items()


def plan_shard(shard: Tuple[Tuple[str, int], Iterable[List[ImageRecord]]],
               numbered: Dict[Tuple[str, int], Tuple[int, int]]) -> ShardPlan:
  (split, planned_index), batches = shard
  return sharding.plan_shard(split, planned_index, itertools.chain.from_iterable(batches), numbered)


def write_errors(rejected: List[Rejection], output: str) -> Dict[str, int]:
  """One errors file, sorted by uri so reruns produce the same bytes; returns counts per reason."""
  ordered = sorted(rejected)
  output_dir.write_text(output, output_dir.ERRORS_FILE, ''.join(r.to_json() + '\n' for r in ordered))
  return dict(collections.Counter(r.reason for r in ordered))


def commit(_, *, shards: List[Mapping[str, Any]], labels_list: List[str], errors_by_reason: Dict[str, int],
           duplicates: List[List[str]], transform_written: List[List[str]], settings: Settings, runner: str) -> None:
  """The last step: labels.txt, then dataset_info.json, once everything else is final."""
  dataset_info.check_error_budget(sum(shard['num_examples'] for shard in shards), errors_by_reason,
                                  settings.max_error_fraction,
                                  output_dir.path(settings.output, output_dir.ERRORS_FILE))
  output_dir.write_text(settings.output, output_dir.LABELS_TXT, labels.labels_txt(labels_list))
  info = dataset_info.build(shards=shards, labels=labels_list, errors_by_reason=errors_by_reason,
                            errors_file=output_dir.ERRORS_FILE, duplicates=duplicates,
                            dedupe=settings.dedupe, settings=settings.as_dict(), runner=runner)
  written = [shard['file'] for shard in shards] + [output_dir.LABELS_TXT, output_dir.ERRORS_FILE]
  written_dirs = [directory for directories in transform_written for directory in directories]
  output_dir.commit(settings.output, written, written_dirs, dataset_info.dumps(info))
