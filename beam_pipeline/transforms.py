"""The DoFns and step functions of the pipeline: thin Beam glue around plain functions."""
import collections
import itertools
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, NamedTuple, Optional, Tuple

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindows

from beam_pipeline import (dataset_info, examples, hash_order, images, inputs, labels, output_dir, reading, rejections,
                           schemas, sharding, splitting)
from beam_pipeline.schemas import UNLABELED
from beam_pipeline.inputs import InputItem
from beam_pipeline.options import Settings
from beam_pipeline.records import ImageRecord
from beam_pipeline.rejections import Rejected, Rejection
from beam_pipeline.sharding import ShardPlan

REJECTED = 'rejected'
DUPLICATES = 'duplicates'
LABELS = 'labels'
TRAINING_CLASS_NAMES = 'training_class_names'
_NAMESPACE = 'beam_pipeline'


def _rejected(rejection: Rejection) -> beam.pvalue.TaggedOutput:
  Metrics.counter(_NAMESPACE, f'rejected_{rejection.reason}').inc()
  return beam.pvalue.TaggedOutput(REJECTED, rejection)


class _ReadingDoFn(beam.DoFn):
  """A DoFn with a pool of --read_threads threads for reads that run ahead."""

  def __init__(self, settings: Settings):
    self._settings = settings
    self._pool = None

  def setup(self) -> None:
    self._pool = ThreadPoolExecutor(self._settings.read_threads, thread_name_prefix=type(self).__name__)

  def teardown(self) -> None:
    if self._pool:
      self._pool.shutdown()


class _Loaded(NamedTuple):
  item: InputItem
  label: Optional[str]
  data: bytes
  sha256: str


def list_input(spec: inputs.InputSpec) -> Iterator[Any]:
  """Batches of the input's items; a manifest row that names no usable input is rejected here."""
  for batch in inputs.list_input_batches(spec):
    yield _rejected(batch) if isinstance(batch, Rejection) else batch


class ValidateImages(_ReadingDoFn):
  """Reads, hashes and fully decodes batches of inputs; emits lists of metadata records, never bytes.

  Work overlaps: Cloud Storage reads run ahead on a thread pool (they are
  latency-bound), this thread plans each image (Pillow), and TensorFlow decodes
  the previous chunk of images on every core in a thread of its own, so a chunk's
  results are emitted while the next one is read, and the last in finish_bundle.
  A chunk is cut at CHUNK_BYTES: two chunks and the reads in flight bound memory.
  """
  CHUNK_BYTES = 32 * 2**20

  def __init__(self, settings: Settings):
    super().__init__(settings)
    self._decoder = None
    self._decoding = None

  def setup(self) -> None:
    super().setup()
    self._decoder = ThreadPoolExecutor(1, thread_name_prefix='ValidateImages-decode')

  def teardown(self) -> None:
    super().teardown()
    if self._decoder:
      self._decoder.shutdown()

  def start_bundle(self) -> None:
    self._decoding = None

  def process(self, batch: List[InputItem]) -> Iterator[Any]:
    chunk, chunk_bytes = [], 0
    window = reading.reads_in_flight((item.uri for item in batch), self._settings.read_threads)
    for item, loaded in reading.prefetched(self._load, batch, self._pool, window):
      if isinstance(loaded, Rejected):
        yield _rejected(Rejection.of(item.uri, loaded))
      else:
        chunk.append(loaded)
        chunk_bytes += len(loaded.data)
        if chunk_bytes >= self.CHUNK_BYTES:
          yield from self._decode(chunk)
          chunk, chunk_bytes = [], 0
    if chunk:
      yield from self._decode(chunk)

  def finish_bundle(self) -> Iterator[Any]:
    if self._decoding:
      for output in self._outputs(*self._decoding):
        if isinstance(output, beam.pvalue.TaggedOutput):
          yield beam.pvalue.TaggedOutput(output.tag, GlobalWindows.windowed_value(output.value))
        else:
          yield GlobalWindows.windowed_value(output)
      self._decoding = None

  def _decode(self, chunk: List[_Loaded]) -> Iterator[Any]:
    """Plans ``chunk``, hands it to the decoder thread, and emits the previous chunk's results."""
    max_pixels = self._settings.max_pixels
    planned = images.plan_images([loaded.data for loaded in chunk], max_pixels)
    previous, self._decoding = self._decoding, (chunk, self._decoder.submit(images.check_planned, planned, max_pixels))
    if previous:
      yield from self._outputs(*previous)

  def _load(self, item: InputItem) -> _Loaded:
    settings = self._settings
    label = labels.label_for(item.uri, item.label, settings.label_source)
    schemas.check_extras(dict(item.extras), settings.schema)
    data = reading.read_file(item.uri, settings.max_file_bytes)
    return _Loaded(item, label, data, images.sha256_hex(data))

  def _outputs(self, loaded_images: List[_Loaded], decoding: Future) -> Iterator[Any]:
    """The chunk's rejections one by one, and its records as one list: Beam's cost
    per element exceeds a record's own, so metadata moves in batches."""
    records: List[ImageRecord] = []
    source_formats = collections.Counter()  # reported once per chunk: each metric update looks up its cell
    for loaded, prepared in zip(loaded_images, decoding.result()):
      if isinstance(prepared, Rejected):
        yield _rejected(Rejection.of(loaded.item.uri, prepared))
        continue
      info = prepared.info
      source_formats[info.source_format] += 1
      records.append(ImageRecord(
          uri=loaded.item.uri, label=loaded.label, split=loaded.item.split, extras=loaded.item.extras,
          source_sha256=loaded.sha256,
          sha256=images.sha256_hex(prepared.stored) if info.reencoded else loaded.sha256,
          num_bytes=len(prepared.stored), format=info.format, height=info.height, width=info.width,
          channels=info.channels, reencoded=info.reencoded))
    if records:
      yield records
    Metrics.counter(_NAMESPACE, 'validated').inc(len(records))
    for source_format, count in source_formats.items():
      Metrics.counter(_NAMESPACE, f'source_format_{source_format}').inc(count)


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
  the label texts and the class names tf.Transform analyzes (those with training records).
  """

  def __init__(self, spec: splitting.SplitSpec):
    super().__init__()
    self._spec = spec

  def expand(self, buckets):
    placed = buckets | 'Place' >> _BucketOffsets(splitting.class_weights)
    return buckets | 'Assign' >> beam.FlatMap(assign_splits, self._spec, beam.pvalue.AsSingleton(placed)
                                              ).with_output_types(Tuple[str, List[ImageRecord]]).with_outputs(
                                                  LABELS, TRAINING_CLASS_NAMES, main='records')


def assign_splits(bucket: Tuple[str, List[splitting.ContentGroup]], spec: splitting.SplitSpec,
                  placed: hash_order.Offsets) -> Iterator[Any]:
  """One bucket's records with their splits, then its label texts and training class names."""
  texts, training_texts = set(), set()
  records = []
  for record in splitting.assign_splits(bucket[0], bucket[1], spec, placed):
    if record.label is not None:
      texts.add(record.label)
    if record.split == splitting.DEFAULT_SPLIT:
      training_texts.add(record.label or '')
    records.append(record)
  yield bucket[0], records
  for text in sorted(texts):
    yield beam.pvalue.TaggedOutput(LABELS, text)
  for text in sorted(training_texts):
    yield beam.pvalue.TaggedOutput(TRAINING_CLASS_NAMES, text)


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


class WriteShard(_ReadingDoFn):
  """Writes one planned shard in its planned order, reading each image again (read-ahead on a pool)."""

  def process(self, plan: ShardPlan, labels: List[str]) -> Iterator[Any]:
    settings = self._settings
    class_ids = {label: index for index, label in enumerate(labels)}
    writer = output_dir.ShardFileWriter(settings.output, plan.file_name(settings.compression),
                                        settings.compression)
    written = 0
    window = reading.reads_in_flight((record.uri for record in plan.records), settings.read_threads)
    for record, image in reading.prefetched(self._stored_image, plan.records, self._pool, window):
      if isinstance(image, Rejected):
        yield _rejected(Rejection.of(record.uri, image))
        continue
      writer.write(examples.encode_example(
          image=image, image_format=record.format, height=record.height, width=record.width,
          channels=record.channels, label_id=class_ids.get(record.label, UNLABELED),
          label=record.label, uri=record.uri, sha256=images.sha256_hex(image) if record.reencoded else record.sha256,
          extras=dict(record.extras), schema=settings.schema))
      written += 1
    num_bytes = writer.close()
    Metrics.counter(_NAMESPACE, 'written').inc(written)
    yield {'split': plan.split, 'file': plan.file_name(settings.compression),
           'num_examples': written, 'num_bytes': num_bytes}

  def _stored_image(self, record: ImageRecord) -> bytes:
    data = reading.read_file(record.uri, self._settings.max_file_bytes)
    if images.sha256_hex(data) != record.source_sha256:
      raise Rejected(rejections.CHANGED_DURING_RUN, 'file content changed after it was validated')
    if not record.reencoded:
      return data
    return images.prepare_image(data, self._settings.max_pixels).stored


def write_errors(rejected: List[Rejection], output: str) -> Dict[str, int]:
  """One errors file, sorted by uri so reruns produce the same bytes; returns counts per reason."""
  ordered = sorted(rejected)
  output_dir.write_text(output, output_dir.ERRORS_FILE, ''.join(r.to_json() + '\n' for r in ordered))
  return dict(collections.Counter(r.reason for r in ordered))


def commit(_, *, shards: List[Mapping[str, Any]], labels_list: List[str], errors_by_reason: Dict[str, int],
           duplicates: List[List[str]], transform_written: List[Any], settings: Settings, runner: str) -> None:
  """The last step: labels.txt, then dataset_info.json, once everything else is final."""
  dataset_info.check_error_budget(sum(shard['num_examples'] for shard in shards), errors_by_reason,
                                  settings.max_error_fraction,
                                  output_dir.path(settings.output, output_dir.ERRORS_FILE))
  output_dir.write_text(settings.output, output_dir.LABELS_TXT, labels.labels_txt(labels_list))
  info = dataset_info.build(shards=shards, labels=labels_list, errors_by_reason=errors_by_reason,
                            errors_file=output_dir.ERRORS_FILE, duplicates=duplicates,
                            dedupe=settings.dedupe, settings=settings.as_dict(), runner=runner)
  written = [shard['file'] for shard in shards] + [output_dir.LABELS_TXT, output_dir.ERRORS_FILE]
  written_dirs = () if settings.skip_transform else output_dir.TRANSFORM_DIRS
  output_dir.commit(settings.output, written, written_dirs, dataset_info.dumps(info))
