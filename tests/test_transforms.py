"""The DoFns driven directly, without a runner: what they hold and when they emit."""
import random
from concurrent.futures import ThreadPoolExecutor

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.utils.windowed_value import WindowedValue

from beam_pipeline import hash_order, options, reading, rejections, splitting, transforms
from beam_pipeline.inputs import InputItem
from beam_pipeline.records import ImageRecord
from beam_pipeline.rejections import Rejected
from beam_pipeline.splitting import ContentGroup
from beam_pipeline.sample_images import encode, synthetic_photo

import cyclic_garbage


def test_validation_decodes_chunks_of_bounded_bytes_while_reading_the_next(tmp_path):
  """Ten 1-chunk images: each chunk's records come out, as one list, while the next is read
  (nine from process), the last from finish_bundle; a batch is never held whole."""
  rng = random.Random(0)
  items = []
  for i in range(10):
    path = tmp_path / 'cat' / f'{i}.jpg'
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(encode(synthetic_photo(rng, 64, 48), 'JPEG'))
    items.append(InputItem(str(path)))
  settings = options.validate(PipelineOptions([f'--input={tmp_path}', f'--output={tmp_path}/out']))
  validate = transforms.ValidateImages(settings)
  validate.CHUNK_BYTES = 1
  validate.setup()
  try:
    validate.start_bundle()
    from_process = list(validate.process(items))
    from_finish = list(validate.finish_bundle())
  finally:
    validate.teardown()
  assert len(from_process) == 9 and len(from_finish) == 1
  assert isinstance(from_finish[0], WindowedValue)
  assert all(len(records) == 1 for records in from_process + [from_finish[0].value])
  uris = [records[0].uri for records in from_process] + [from_finish[0].value[0].uri]
  assert uris == [item.uri for item in items]


def test_reads_run_ahead_when_any_input_of_a_batch_is_remote():
  """A batch whose first row was rejected, or that mixes local and gs:// files, still reads
  its Cloud Storage objects concurrently; an all-local batch reads one at a time."""
  assert reading.reads_in_flight(['/data/cat/1.jpg', 'gs://b/cat/2.jpg'], 32) == 32
  assert reading.reads_in_flight(['/data/cat/1.jpg', '/data/cat/2.jpg'], 32) == 0
  assert reading.reads_in_flight([], 32) == 0


def test_reads_run_ahead_in_order_and_rejections_hold_no_reads():
  """prefetched keeps the input order with reads in flight, returns a Rejected in place of
  its result, and that Rejected carries no traceback whose frames would keep the reads
  in flight (image bytes) alive in a reference cycle."""

  def read(i):
    if i % 3 == 0:
      raise Rejected(rejections.UNREADABLE, f'item {i}')
    return bytes(20_000)

  with ThreadPoolExecutor(4) as pool:
    for window in (0, 4):
      with cyclic_garbage.collected() as garbage:
        results = list(reading.prefetched(read, range(12), pool, window))
        assert [i for i, _ in results] == list(range(12))
        assert [r.detail for _, r in results if isinstance(r, Rejected)] == ['item 0', 'item 3', 'item 6', 'item 9']
        del results
      assert not [o for o in garbage if isinstance(o, (bytes, Rejected))]


def test_split_assignment_emits_a_bucket_as_one_element_then_its_labels():
  spec = splitting.parse_splits('train=0.5,test=0.5')
  records = [ImageRecord(f'/d/{label}/{i}.jpg', label, None, (), f'{i:064x}', f'{i:064x}', 10, 'jpeg', 1, 1, 3, False)
             for i, label in enumerate(['cat'] * 20 + ['dog'] * 2)]
  groups = [ContentGroup((r,)) for r in records]
  placed = hash_order.offsets(splitting.class_weights('00', groups))
  out = list(transforms.assign_splits(('00', groups), spec, placed))
  (bucket, assigned), tagged = out[0], out[1:]
  assert bucket == '00' and sorted(r.uri for r in assigned) == sorted(r.uri for r in records)
  assert {r.split for r in assigned if r.label == 'cat'} == {'train', 'test'}
  assert [(o.tag, o.value) for o in tagged] == [('labels', 'cat'), ('labels', 'dog'),
                                                ('training_class_names', 'cat'), ('training_class_names', 'dog')]
