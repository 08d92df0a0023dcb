"""The DoFns driven directly, without a runner: what they hold and when they emit."""
import os
import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.utils.windowed_value import WindowedValue

from beam_pipeline import hash_order, images, options, reading, rejections, splitting, transforms, validation, workers
from beam_pipeline.inputs import InputItem
from beam_pipeline.records import ImageRecord
from beam_pipeline.rejections import Rejected
from beam_pipeline.splitting import ContentGroup
from beam_pipeline.sample_images import encode, synthetic_photo

import cyclic_garbage


def _photo_items(root, count):
  rng = random.Random(0)
  items = []
  for i in range(count):
    path = root / 'cat' / f'{i}.jpg'
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(encode(synthetic_photo(rng, 64, 48), 'JPEG'))
    items.append(InputItem(str(path)))
  return items


def test_validation_decodes_a_batch_in_chunks_of_bounded_bytes(tmp_path, monkeypatch):
  """Ten photos and a damaged file: TensorFlow gets them in chunks of at most the chunk
  size plus one image, and every input comes back once, as a record or a rejection."""
  items = _photo_items(tmp_path, 10)
  (tmp_path / 'cat' / 'bad.jpg').write_bytes(b'<html>')
  items.insert(4, InputItem(str(tmp_path / 'cat' / 'bad.jpg')))
  settings = options.validate(PipelineOptions([f'--input={tmp_path}', f'--output={tmp_path}/out']))
  chunks = []
  prepare_images = images.prepare_images
  monkeypatch.setattr(images, 'prepare_images', lambda datas, max_pixels: chunks.append(
      [len(d) for d in datas]) or prepare_images(datas, max_pixels))
  size = os.path.getsize(items[0].uri)
  result = validation.validate_batch(items, settings, chunk_bytes=2 * size)
  assert all(sum(chunk[:-1]) < 2 * size for chunk in chunks) and sum(map(len, chunks)) == 11
  assert [r.uri for r in result.records] == [item.uri for item in items if 'bad' not in item.uri]
  assert [(r.uri, r.reason) for r in result.rejections] == [(items[4].uri, 'not_image')]
  assert result.source_formats == {'JPEG': 10}


@pytest.mark.parametrize('pooled', [False, True])
def test_validation_runs_ahead_in_the_worker_pool_and_emits_every_batch_once(tmp_path, pooled):
  """Without a pool (Dataflow) each batch's records come out of process; with one,
  up to AHEAD batches per worker run ahead, and what is still running at the end
  of the bundle comes out of finish_bundle, windowed."""
  items = _photo_items(tmp_path, 12)
  settings = options.validate(PipelineOptions([f'--input={tmp_path}', f'--output={tmp_path}/out']))
  batches = [items[i:i + 2] for i in range(0, 12, 2)]
  validate = transforms.ValidateImages(settings)
  if pooled:
    workers.start(1)
  try:
    validate.setup()
    validate.start_bundle()
    from_process = [output for batch in batches for output in validate.process(batch)]
    from_finish = list(validate.finish_bundle())
  finally:
    validate.teardown()
    workers.shutdown()
  ahead = transforms.ValidateImages.AHEAD
  assert (len(from_process), len(from_finish)) == ((6 - ahead, ahead) if pooled else (6, 0))
  assert all(isinstance(output, WindowedValue) for output in from_finish)
  emitted = from_process + [output.value for output in from_finish]
  assert [[r.uri for r in records] for records in emitted] == [[item.uri for item in batch] for batch in batches]


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
  assert [(o.tag, o.value) for o in tagged] == [('labels', 'cat'), ('labels', 'dog')]
