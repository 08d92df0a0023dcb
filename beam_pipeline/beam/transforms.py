"""The DoFns and step functions of the pipeline: thin Beam glue around the core's plain functions."""
import collections
import collections.abc
import functools
import itertools
import os
import shutil
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Deque, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindows

from beam_pipeline import progress
from beam_pipeline.beam import embedding, inputs, output_dir, workers
from beam_pipeline.core import (dataset_info, errors_output, hash_order, isolation, labels, reading, record_index,
                                 rejections, shard_name, sharding, splitting, steps, tfds_metadata, uris)
from beam_pipeline.core.records import (ContentGroup, ImageRecord, InputItem, OutputUnit, Rejection, ShardPlan,
                                        ShardWritten, TransformGraph, Validated)
from beam_pipeline.core.rejections import Rejected
from beam_pipeline.core.settings import InputSpec, Settings, SplitSpec

REJECTED = 'rejected'
TRANSFORM_STAGING = 'transform'  # where a worker writes the graph (output_dir.staging)
DUPLICATES = 'duplicates'
LABELS = 'labels'
TRANSFORM_WRITTEN = 'transform_written'
_NAMESPACE = 'beam_pipeline'


def records_per_key(stage: str) -> Metrics.DelegatingDistribution:
  """The distribution of how many records one key of a planning GroupByKey ``stage`` holds: its
  max is what one worker gathers, which the buckets' width keeps bounded (hash_order)."""
  return Metrics.distribution(_NAMESPACE, f'records_per_key_{stage}')


def bucket_by_content(records: List[ImageRecord], listed: int, records_per_bucket: int
                      ) -> Iterable[Tuple[str, List[ImageRecord]]]:
  """A list of validated records as (content bucket, records) pairs, the buckets as wide as
  ``listed`` inputs need."""
  digits = hash_order.prefix_digits(listed, splitting.CONTENT_BUCKET_DIGITS, records_per_bucket)
  return splitting.content_buckets(records, digits).items()


def _rejected(rejection: Rejection) -> beam.pvalue.TaggedOutput:
  Metrics.counter(_NAMESPACE, f'rejected_{rejection.reason}').inc()
  return beam.pvalue.TaggedOutput(REJECTED, rejection)


class _Task:
  """A step handed to the worker pool: what to run, the pool running it, and how often it was handed."""

  def __init__(self, step: Callable[..., Any], args: Tuple[Any, ...], then: Callable[[Any], Iterator[Any]]):
    self.step, self.args, self.then = step, args, then
    self.attempts = 0
    self.pool: Optional[Any] = None
    self.future: Optional[Future] = None

  def submit(self, pool: Any) -> '_Task':
    self.attempts += 1
    self.pool, self.future = pool, pool.submit(self.step, *self.args)
    return self


class _PooledDoFn(beam.DoFn):
  """A DoFn that hands a core step to the local worker pool (workers.py) when it can, or runs it inline.

  Pooled steps run ahead, up to AHEAD per worker, and what follows each (``then``)
  runs in the order they were handed out (the last ones from finish_bundle).
  Workers read and write local files only; a step that reads a remote file runs
  inline, with Beam's FileSystems to read it and --read_threads to read ahead on.

  A worker process that dies (killed by the system, for memory perhaps) takes the
  pool with it: a new pool then runs the tasks in flight again, as a runner
  retries a failed bundle. A task whose worker died ATTEMPTS times fails the run.
  """

  # Enough that a slow task at the head of the queue (a batch of large PNGs) leaves
  # no worker idle; a task in flight holds only its inputs' names and metadata.
  AHEAD = 4
  ATTEMPTS = 2

  def __init__(self, settings: Settings):
    self._settings = settings
    self._remote: Optional[reading.Remote] = None
    self._in_flight: Optional[Deque[_Task]] = None

  def setup(self) -> None:
    threads = self._settings.read_threads
    pool = ThreadPoolExecutor(threads, thread_name_prefix=type(self).__name__)
    self._remote = reading.Remote(inputs.open_image, pool, threads)

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
    """The outputs of ``then(step(*args))``, the step run in a worker unless a file it ``reads``
    is remote. Run here, a step that reads files gets remote reads as its last argument."""
    pool = workers.pool()
    if pool is None or (reads is not None and uris.any_remote(reads)):
      yield from then(step(*args) if reads is None else step(*args, self._remote))
      return
    self._in_flight.append(_Task(step, args, then).submit(pool))
    yield from self._completed(limit=self.AHEAD * workers.count())

  def _completed(self, limit: int) -> Iterator[Any]:
    while len(self._in_flight) > limit:
      task = self._in_flight[0]
      try:
        result = task.future.result()
      except BrokenProcessPool:
        if task.attempts >= self.ATTEMPTS:
          raise
        pool = workers.replace(task.pool)
        for broken in self._in_flight:
          if broken.pool is task.pool:
            broken.submit(pool)
        continue
      self._in_flight.popleft()
      yield from task.then(result)


def transform_graph(settings: Settings) -> List[TransformGraph]:
  """The tf.Transform graph to write beside the shards, if any."""
  if settings.skip_transform:
    return []
  spec = settings.embedding
  return [TransformGraph(settings.image_size, settings.schema, spec.output_shape if spec else (),
                         not (spec and spec.only))]


def input_parts(spec: InputSpec) -> Iterator[inputs.InputPart]:
  """The parts the input is listed in, counted for the progress line once all are known."""
  count = 0
  for count, part in enumerate(inputs.input_parts(spec), start=1):
    yield part
  progress.counts().parts_planned(count)


def list_input(part: inputs.InputPart, output: str) -> Iterator[Any]:
  """Batches of one part's items, but for the files of ``output``; a manifest row that names
  no usable input is rejected here."""
  counts = progress.counts()
  for batch in inputs.list_input_batches(part, output):
    if isinstance(batch, Rejection):
      counts.listed(1)
      counts.checked(1, rejected=1)
      yield _rejected(batch)
    else:
      counts.listed(len(batch))
      yield batch
  counts.part_listed()


class ValidateImages(_PooledDoFn):
  """Reads, hashes and fully decodes batches of inputs (core/validation.py); emits lists of
  metadata records, never bytes: Beam's cost per element exceeds a record's own."""

  def process(self, batch: List[InputItem]) -> Iterator[Any]:
    yield from self._run(steps.validate_batch, (batch, self._settings), self._emit, (item.uri for item in batch))

  def _emit(self, result: Validated) -> Iterator[Any]:
    progress.counts().checked(len(result.records) + len(result.rejections), rejected=len(result.rejections))
    for rejection in result.rejections:
      yield _rejected(rejection)
    if result.records:
      yield result.records
    # Reported once per batch: each metric update looks up its cell.
    Metrics.counter(_NAMESPACE, 'validated').inc(len(result.records))
    for source_format, count in result.source_formats.items():
      Metrics.counter(_NAMESPACE, f'source_format_{source_format}').inc(count)


class WriteOutputs(_PooledDoFn):
  """Writes each OutputUnit, a planned shard (core/shard_writer.py) or the tf.Transform graph,
  to local disk, and stages it in the output for the commit; the shards go to the main output,
  the graph's directory names to TRANSFORM_WRITTEN. A worker pool writes them side by side."""

  def __init__(self, settings: Settings):
    super().__init__(settings)
    self._scratch = ''  # where shards and the graph are staged for a remote output

  def setup(self) -> None:
    super().setup()
    if uris.is_remote(self._settings.output):
      self._scratch = tempfile.mkdtemp(prefix='beam_pipeline-')

  def teardown(self) -> None:
    super().teardown()
    if self._scratch:
      shutil.rmtree(self._scratch, ignore_errors=True)

  def process(self, unit: OutputUnit, class_names: List[str]) -> Iterator[Any]:
    settings = self._settings
    if isinstance(unit, ShardPlan):
      name = shard_name.file_name(unit, settings.compression)
      staged = output_dir.staging(settings.output, name, self._scratch)
      step = embedding.write_shard if settings.embedding else steps.write_shard
      yield from self._run(step, (unit, staged, settings, class_names),
                           functools.partial(self._shard_written, staged), (record.uri for record in unit.records))
    else:
      staged = output_dir.staging(settings.output, TRANSFORM_STAGING, self._scratch)
      yield from self._run(steps.write_graph, (staged, unit, class_names),
                           functools.partial(self._graph_written, staged))

  def _shard_written(self, staged: str, result: ShardWritten) -> Iterator[Any]:
    progress.counts().rejected(len(result.rejections))
    for rejection in result.rejections:
      yield _rejected(rejection)
    output_dir.stage(self._settings.output, result.shard['file'], staged)
    if 'index_file' in result.shard:
      output_dir.stage(self._settings.output, result.shard['index_file'], staged + record_index.SUFFIX)
    progress.counts().written(result.shard['num_examples'])
    Metrics.counter(_NAMESPACE, 'written').inc(result.shard['num_examples'])
    yield result.shard

  def _graph_written(self, staged: str, _) -> Iterator[Any]:
    for name in TransformGraph.DIRECTORIES:
      output_dir.stage(self._settings.output, name, os.path.join(staged, name))
    yield beam.pvalue.TaggedOutput(TRANSFORM_WRITTEN, list(TransformGraph.DIRECTORIES))


class GroupCopies(beam.DoFn):
  """Finds the identical files of one content bucket; reports and maybe drops copies.

  Emits the bucket's content groups, all classes together, as one (bucket, groups) element."""

  def __init__(self, dedupe: bool):
    self._dedupe = dedupe

  def process(self, bucket: Tuple[str, Iterable[List[ImageRecord]]]) -> Iterator[Any]:
    groups = []
    records = list(itertools.chain.from_iterable(bucket[1]))
    records_per_key('GroupByContent').update(len(records))
    for copies in splitting.same_content(records):
      grouped = isolation.run(isolation.GROUP, [record.uri for record in copies], splitting.group_duplicates, copies,
                              self._dedupe)
      if isinstance(grouped, Rejected):
        progress.counts().rejected(len(copies))
        for record in copies:
          yield _rejected(Rejection.of(record.uri, grouped))
        continue
      group, dropped = grouped
      if len(copies) > 1:
        Metrics.counter(_NAMESPACE, 'duplicate_groups').inc()
        yield beam.pvalue.TaggedOutput(DUPLICATES, sorted(r.uri for r in copies))
      progress.counts().rejected(len(dropped))
      for rejection in dropped:
        yield _rejected(rejection)
      groups.append(group)
    yield bucket[0], groups


class _BucketOffsets(beam.PTransform):
  """Every (bucket, items) element's ((key, bucket), weight) pairs, summed up per key into
  (key, hash_order.KeyOffsets) for a side input looked up key by key (_PerKey); ``weights``
  is the plain function that weighs a bucket. A key holds one number per bucket of its own."""

  def __init__(self, weights: Callable[[str, Any], Iterable[Tuple[Tuple[str, str], int]]]):
    super().__init__()
    self._weights = weights

  def expand(self, buckets):
    return (buckets
            | 'Weights' >> beam.FlatMapTuple(self._weights)
            | 'ByKey' >> beam.MapTuple(lambda key_bucket, weight: (key_bucket[0], (key_bucket[1], weight)))
            | 'SumPerBucket' >> beam.CombinePerKey(_BucketWeights())
            | 'Offsets' >> beam.MapTuple(lambda key, weights: (key, hash_order.key_offsets(weights))))


def _only(view: Mapping[Any, Iterable[Any]], key: Any) -> Any:
  """The one value of ``key`` in a multimap side input."""
  return next(iter(view[key]))


class _BucketWeights(beam.CombineFn):
  """One key's weight per bucket, from (bucket, weight) pairs."""

  def create_accumulator(self) -> Dict[str, int]:
    return {}

  def add_input(self, accumulator: Dict[str, int], pair: Tuple[str, int]) -> Dict[str, int]:
    bucket, weight = pair
    accumulator[bucket] = accumulator.get(bucket, 0) + weight
    return accumulator

  def merge_accumulators(self, accumulators: Iterable[Dict[str, int]]) -> Dict[str, int]:
    merged: Dict[str, int] = {}
    for accumulator in accumulators:
      for pair in accumulator.items():
        self.add_input(merged, pair)
    return merged

  def extract_output(self, accumulator: Dict[str, int]) -> Dict[str, int]:
    return accumulator


class _PerKey(collections.abc.Mapping):
  """A multimap side input of (key, KeyOffsets) as hash_order.Offsets. Beam's multimap is
  fetched key by key on Dataflow and FnApiRunner, where AsDict or AsSingleton would load
  every class's offsets on every worker."""

  def __init__(self, view: Mapping[str, Iterable[hash_order.KeyOffsets]]):
    self._view = view

  def __getitem__(self, key: str) -> hash_order.KeyOffsets:
    return _only(self._view, key)

  def __iter__(self) -> Iterator[str]:
    return iter(self._view)

  def __len__(self) -> int:
    return len(list(self._view))


class AssignSplits(beam.PTransform):
  """(order bucket, records) with every record's split, from (content bucket, content groups).

  Every bucket reports its images per class first; with those totals each bucket
  assigns its own groups, so no worker holds a whole class. The records then go
  on by order bucket, for the shards. Also outputs, tagged, the label texts.
  """

  def __init__(self, spec: SplitSpec, listed: beam.pvalue.AsSingleton,
               records_per_bucket: int = hash_order.RECORDS_PER_BUCKET):
    super().__init__()
    self._spec = spec
    self._listed = listed  # how many inputs were listed: the order buckets are as wide as they need
    self._records_per_bucket = records_per_bucket

  def expand(self, buckets):
    placed = buckets | 'Place' >> _BucketOffsets(splitting.class_weights)
    return buckets | 'Assign' >> beam.FlatMap(assign_splits, self._spec, beam.pvalue.AsMultiMap(placed),
                                              self._listed, self._records_per_bucket
                                              ).with_output_types(Tuple[str, List[ImageRecord]]).with_outputs(
                                                  LABELS, main='records')


def assign_splits(bucket: Tuple[str, List[ContentGroup]], spec: SplitSpec,
                  placed: Mapping[str, Iterable[hash_order.KeyOffsets]], listed: int,
                  records_per_bucket: int = hash_order.RECORDS_PER_BUCKET) -> Iterator[Any]:
  """One content bucket's records with their splits, by order bucket (as wide as ``listed``
  inputs need), then its label texts."""
  records = list(splitting.assign_splits(bucket[0], bucket[1], spec, _PerKey(placed)))
  digits = hash_order.prefix_digits(listed, sharding.ORDER_BUCKET_DIGITS, records_per_bucket)
  yield from sharding.order_buckets(records, digits).items()
  for text in sorted({record.label for record in records if record.label is not None}):
    yield beam.pvalue.TaggedOutput(LABELS, text)


class PlanShards(beam.PTransform):
  """One ShardPlan per shard, from (order bucket, records) pairs whose records have their splits.

  Every pair reports its bytes per split first; with those totals each order
  bucket, gathered from its pairs, places its own records, and the shards'
  GroupByKey spreads them over workers.
  """

  def __init__(self, target_bytes: int, sizes: sharding.RecordSizes = sharding.RecordSizes()):
    super().__init__()
    self._target_bytes = target_bytes
    self._sizes = sizes

  def expand(self, pairs):
    placed = pairs | 'Place' >> _BucketOffsets(functools.partial(sharding.split_bytes, sizes=self._sizes))
    shards = (pairs
              | 'GroupByOrder' >> beam.GroupByKey().with_output_types(Tuple[str, Iterable[List[ImageRecord]]])
              | 'Assign' >> beam.FlatMap(assign_shards, self._target_bytes, beam.pvalue.AsMultiMap(placed),
                                         self._sizes).with_output_types(Tuple[Tuple[str, int], List[ImageRecord]]))
    # Gap-free numbers: which planned shards of each chunk hold records, and per split
    # the running totals over its chunks.
    in_use = (shards
              | 'Planned' >> beam.Keys()
              | 'ByChunk' >> beam.Map(lambda shard: (sharding.numbering_chunk(*shard), shard[1]))
              | 'GroupByChunk' >> beam.GroupByKey()
              | 'InUse' >> beam.MapTuple(lambda chunk, indexes: (chunk, sorted(set(indexes)))))
    chunks = in_use | 'NumberChunks' >> _BucketOffsets(sharding.chunk_weights)
    return (shards
            | 'GroupByShard' >> beam.GroupByKey()
            | 'Plan' >> beam.Map(plan_shard, beam.pvalue.AsMultiMap(in_use), beam.pvalue.AsMultiMap(chunks)
                                 ).with_output_types(ShardPlan))


def assign_shards(bucket: Tuple[str, Iterable[List[ImageRecord]]], target_bytes: int,
                  placed: Mapping[str, Iterable[hash_order.KeyOffsets]], sizes: sharding.RecordSizes
                  ) -> Iterable[Tuple[Tuple[str, int], List[ImageRecord]]]:
  records = list(itertools.chain.from_iterable(bucket[1]))
  records_per_key('GroupByOrder').update(len(records))
  return sharding.assign_shards(bucket[0], records, target_bytes, _PerKey(placed), sizes).items()


def plan_shard(shard: Tuple[Tuple[str, int], Iterable[List[ImageRecord]]],
               in_use: Mapping[Tuple[str, str], Iterable[List[int]]],
               chunks: Mapping[str, Iterable[hash_order.KeyOffsets]]) -> ShardPlan:
  (split, planned_index), batches = shard
  records = list(itertools.chain.from_iterable(batches))
  records_per_key('GroupByShard').update(len(records))
  in_chunk = _only(in_use, sharding.numbering_chunk(split, planned_index))
  return sharding.plan_shard(split, sharding.number(planned_index, in_chunk, _only(chunks, split)), records)


class WriteErrors(beam.PTransform):
  """Every Rejection into the errors files (core/errors_output.py), staged for the commit;
  outputs one element: how many files, and the rejections' counts by reason. No element
  holds them all: they are counted first, then gathered file by file, and every file is
  written, even one the hash left empty."""

  def __init__(self, output: str, per_file: int = errors_output.REJECTIONS_PER_FILE):
    super().__init__()
    self._output = output
    self._per_file = per_file

  def expand(self, rejected):
    num_files = (rejected
                 | 'Count' >> beam.combiners.Count.Globally()
                 | 'NumFiles' >> beam.Map(errors_output.num_files, self._per_file))
    every_file = num_files | 'EveryFile' >> beam.FlatMap(_every_errors_file).with_output_types(
        Tuple[int, List[Rejection]])
    by_file = rejected | 'ByFile' >> beam.Map(_errors_file_of, beam.pvalue.AsSingleton(num_files)).with_output_types(
        Tuple[int, List[Rejection]])
    return ((every_file, by_file)
            | 'Flatten' >> beam.Flatten()
            | 'GroupByFile' >> beam.GroupByKey()
            | 'Write' >> beam.Map(write_errors_file, beam.pvalue.AsSingleton(num_files), self._output)
            | 'Sum' >> beam.CombineGlobally(_sum_errors_written))


def _every_errors_file(num_files: int) -> Iterator[Tuple[int, List[Rejection]]]:
  for index in range(num_files):
    yield index, []


def _errors_file_of(rejection: Rejection, num_files: int) -> Tuple[int, List[Rejection]]:
  return errors_output.file_index(rejection.uri, num_files), [rejection]


def write_errors_file(item: Tuple[int, Iterable[List[Rejection]]], num_files: int, output: str) -> Dict[str, Any]:
  """One errors file, staged for the commit: what it holds, by reason."""
  index, batches = item
  rejected = list(itertools.chain.from_iterable(batches))
  records_per_key('GroupByFile').update(len(rejected))
  output_dir.stage_text(output, errors_output.file_name(index, num_files), errors_output.file_text(rejected))
  return {'num_files': 1, 'by_reason': errors_output.by_reason(rejected)}


def _sum_errors_written(written: Iterable[Mapping[str, Any]]) -> Dict[str, Any]:
  num_files, by_reason = 0, collections.Counter()
  for part in written:
    num_files += part['num_files']
    by_reason.update(part['by_reason'])
  return {'num_files': num_files, 'by_reason': dict(by_reason)}


class DuplicateGroups(beam.CombineFn):
  """Every group of identical files, summed up as beam_pipeline.json lists them: how many
  groups and extra copies, and the first MAX_LISTED_DUPLICATE_GROUPS groups (sorted), never
  more of them at once."""
  _LISTED = dataset_info.MAX_LISTED_DUPLICATE_GROUPS

  def create_accumulator(self) -> Tuple[int, int, List[List[str]]]:
    return 0, 0, []

  def add_input(self, accumulator, group: List[str]):
    num_groups, num_extra, listed = accumulator
    listed.append(group)
    if len(listed) > 2 * self._LISTED:
      listed = sorted(listed)[:self._LISTED]
    return num_groups + 1, num_extra + len(group) - 1, listed

  def merge_accumulators(self, accumulators):
    num_groups, num_extra, listed = self.create_accumulator()
    for groups, extra, more in accumulators:
      num_groups, num_extra = num_groups + groups, num_extra + extra
      listed = sorted(listed + more)[:self._LISTED]
    return num_groups, num_extra, listed

  def extract_output(self, accumulator) -> Dict[str, Any]:
    num_groups, num_extra, listed = accumulator
    return {'num_groups': num_groups, 'num_extra_copies': num_extra, 'groups': sorted(listed)[:self._LISTED]}


class WrittenTotals(beam.CombineFn):
  """Every written shard's report, summed up as beam_pipeline.json needs it
  (dataset_info.written_totals)."""

  def create_accumulator(self) -> Dict[str, Any]:
    return dataset_info.written_totals([])

  def add_input(self, accumulator, shard: Mapping[str, Any]):
    return dataset_info.add_shard(accumulator, shard)

  def merge_accumulators(self, accumulators):
    return functools.reduce(dataset_info.add_totals, accumulators, self.create_accumulator())

  def extract_output(self, accumulator) -> Dict[str, Any]:
    return accumulator


def commit(_, *, written: Mapping[str, Any], labels_list: List[str], errors: Mapping[str, Any],
           duplicates: Mapping[str, Any], transform_written: List[List[str]], settings: Settings, runner: str) -> None:
  """The last step, once every shard, the graph and the errors files are staged: the error
  budget, labels.txt, then the output's commit (output_dir.commit). Copies that --dedupe
  dropped are listed with the rejections, but are no errors."""
  errors_by_reason = {reason: count for reason, count in errors['by_reason'].items() if reason != rejections.DUPLICATE}
  removed = errors['by_reason'].get(rejections.DUPLICATE, 0)
  num_errors_files = errors['num_files']
  shards = [name for split in written['splits'].values() for shard in split['shards']
            for name in (shard['file'], shard.get('index_file')) if name]
  dataset_info.check_error_budget(sum(split['num_examples'] for split in written['splits'].values()),
                                  errors_by_reason, removed,
                                  settings.max_error_fraction,
                                  output_dir.temp_path(settings.output, errors_output.pattern(num_errors_files)))
  output_dir.stage_text(settings.output, output_dir.LABELS_TXT, labels.labels_txt(labels_list))
  info = dataset_info.build(written=written, labels=labels_list, errors_by_reason=errors_by_reason,
                            num_errors_files=num_errors_files, duplicates=duplicates,
                            dedupe=settings.dedupe, num_removed=removed, settings=settings.as_dict(), runner=runner,
                            embedding=dataset_info.embedding_info(settings.embedding, settings.schema))
  tfds_files = tfds_metadata.files(info)  # TensorFlow Datasets' metadata; its dataset_info.json is its marker
  for name, text in tfds_files.items():
    output_dir.stage_text(settings.output, name, text)
  last = [name for name in tfds_files if name == tfds_metadata.DATASET_INFO]
  files = (shards + [output_dir.LABELS_TXT] + errors_output.file_names(num_errors_files) +
           [name for name in tfds_files if name not in last])
  written_dirs = [directory for directories in transform_written for directory in directories]
  output_dir.commit(settings.output, files, written_dirs, info.to_json(), last)
