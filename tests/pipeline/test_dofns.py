"""The DoFns driven directly, without a runner: what they hold and when they emit."""
import os
import signal
import threading
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from typing import Any, List, Tuple

import pytest
from apache_beam.utils.windowed_value import WindowedValue

from beam_pipeline.pipeline import pooled_steps
from beam_pipeline.pipeline.planning import content_groups
from beam_pipeline.cli import options
from beam_pipeline.local import workers
from beam_pipeline.core.console import progress_counts
from beam_pipeline.core.planning import hash_order, sharding, splitting
from beam_pipeline.core.messages import ContentGroup, InputItem, Validated

from helpers import photos
from helpers.values import image_record


@pytest.mark.parametrize('pooled', [False, True])
def test_validation_runs_ahead_in_the_worker_pool_and_emits_every_batch_once(tmp_path, pooled, monkeypatch):
  """Without a pool (Dataflow) each batch's records come out of process; with one,
  up to AHEAD batches per worker run ahead, and what is still running at the end
  of the bundle comes out of finish_bundle, windowed."""
  monkeypatch.setattr(pooled_steps.ValidateImages, 'AHEAD', 2)
  photos.write_files(tmp_path, {f'cat/{i}.jpg': data for i, data in enumerate(photos.jpegs(12, size=(64, 48)))})
  items = [InputItem(str(tmp_path / 'cat' / f'{i}.jpg')) for i in range(12)]
  settings = options.parse([f'--input={tmp_path}', f'--output={tmp_path}/out']).settings
  batches = [items[i:i + 2] for i in range(0, 12, 2)]
  validate = pooled_steps.ValidateImages(settings, pooled)
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
  assert len(from_finish) <= (pooled_steps.ValidateImages.AHEAD if pooled else 0)
  assert all(isinstance(output, WindowedValue) for output in from_finish)
  emitted = from_process + [output.value for output in from_finish]
  assert [[r.uri for r in records] for records in emitted] == [[item.uri for item in batch] for batch in batches]


def _validated(items: List[InputItem]) -> Validated:
  """What validation gives of ``items`` that are all good JPEGs: a stand-in pool's result."""
  return Validated([image_record(item.uri) for item in items], [], {'JPEG': len(items)})


def test_the_listing_runs_ahead_of_validation_whose_results_come_in_order_as_soon_as_each_is_done(tmp_path,
                                                                                                  monkeypatch):
  """The listing hands its batches to validation in the same stage, and goes on only while
  validation takes them: held to the workers' pace, the console would learn the input's size
  only as validation ended. So process waits for no result while fewer than AHEAD batches
  per worker are in flight, and emits each result, in the order the batches came, as soon as
  it and those before it are done. The pool here is a stand-in whose results the test gives."""
  photos.write_files(tmp_path, {f'cat/{i}.jpg': data for i, data in enumerate(photos.jpegs(14, size=(16, 12)))})
  batches = [[InputItem(str(tmp_path / 'cat' / f'{i}.jpg')) for i in (j, j + 1)] for j in range(0, 14, 2)]
  settings = options.parse([f'--input={tmp_path}', f'--output={tmp_path}/out']).settings
  handed: List[Tuple[List[InputItem], Future]] = []
  waited = []

  class Pool:
    def submit(self, _step, items, _settings):
      handed.append((items, Future()))
      return handed[-1][1]

  def done(*positions: int) -> None:
    for position in positions:
      items, future = handed[position]
      future.set_result(_validated(items))

  def gave_up_waiting() -> None:  # were process to wait for a result, the results would come from here
    waited.append(True)
    done(*(position for position, (_, future) in enumerate(handed) if not future.done()))

  def uris(emitted: List[Any]) -> List[List[str]]:
    return [[record.uri for record in records] for records in emitted]

  monkeypatch.setattr(workers, 'pool', Pool)
  monkeypatch.setattr(workers, 'count', lambda: 1)
  validate = pooled_steps.ValidateImages(settings, True)
  validate.setup()
  validate.start_bundle()
  timer = threading.Timer(30, gave_up_waiting)
  timer.start()
  try:
    emitted = [output for batch in batches[:5] for output in validate.process(batch)]
    assert (emitted, len(handed)) == ([], 5)  # five in flight, none done, none waited for
    done(1)
    assert list(validate.process(batches[5])) == []  # the second is done, not the first: the order holds
    done(0, 3)
    assert uris(validate.process(batches[6])) == uris([batches[0], batches[1]]) and len(handed) == 7
    done(2, 4, 5, 6)
    emitted = [output.value for output in validate.finish_bundle()]
  finally:
    timer.cancel()
    validate.teardown()
  assert not waited
  assert uris(emitted) == [[item.uri for item in batch] for batch in batches[2:]]


def test_until_the_first_worker_is_forked_the_batches_wait_and_the_listing_goes_on(tmp_path, monkeypatch):
  """The pool's first worker forks once the forkserver has imported TensorFlow; a batch handed
  to the pool before then would hold the listing on the launcher's thread. So batches wait,
  in order, until workers.forked(), and are handed out (and counted as handed, which starts
  checking's clock) at the next batch; one over the limit in flight, or the bundle's end,
  hands them out whatever, the pool then waiting for the fork itself."""
  photos.write_files(tmp_path, {f'cat/{i}.jpg': data for i, data in enumerate(photos.jpegs(8, size=(16, 12)))})
  batches = [[InputItem(str(tmp_path / 'cat' / f'{i}.jpg')) for i in (j, j + 1)] for j in range(0, 8, 2)]
  settings = options.parse([f'--input={tmp_path}', f'--output={tmp_path}/out']).settings
  handed: List[List[InputItem]] = []
  forked = [False]

  class Pool:
    def submit(self, _step, items, _settings):
      handed.append(items)
      future: Future = Future()
      future.set_result(_validated(items))
      return future

  monkeypatch.setattr(workers, 'pool', Pool)
  monkeypatch.setattr(workers, 'count', lambda: 1)
  monkeypatch.setattr(workers, 'forked', lambda: forked[0])
  counted: List[int] = []

  class Counts(progress_counts.Counts):
    def handed(self, count: int) -> None:
      counted.append(count)

  monkeypatch.setattr(progress_counts, 'counts', Counts)
  validate = pooled_steps.ValidateImages(settings, True)
  validate.setup()
  validate.start_bundle()
  try:
    emitted = [output for batch in batches[:2] for output in validate.process(batch)]
    assert (emitted, handed, counted) == ([], [], [])
    forked[0] = True
    emitted += validate.process(batches[2])
    assert handed == batches[:3] and counted == [2, 2, 2]
    forked[0] = False
    emitted += validate.process(batches[3])
    emitted += [output.value for output in validate.finish_bundle()]
  finally:
    validate.teardown()
  assert handed == batches
  assert [[record.uri for record in records] for records in emitted] == [[item.uri for item in batch]
                                                                          for batch in batches]


def test_a_pool_that_lost_its_worker_before_the_next_batch_is_replaced_and_every_batch_emitted_once(tmp_path):
  """A worker killed (by the system, for memory) while no result is being waited for: the pool
  knows of it first, and refuses the next batch. Expected: a new pool takes that batch (the
  batch before it had its result before the death, and keeps it), and every batch comes out
  once, as for a death a result reports."""
  photos.write_files(tmp_path, {f'cat/{i}.jpg': data for i, data in enumerate(photos.jpegs(6, size=(64, 48)))})
  batches = [[InputItem(str(tmp_path / 'cat' / f'{i}.jpg')) for i in (j, j + 1)] for j in range(0, 6, 2)]
  settings = options.parse([f'--input={tmp_path}', f'--output={tmp_path}/out']).settings
  validate = pooled_steps.ValidateImages(settings, True)
  workers.start(1)
  try:
    validate.setup()
    validate.start_bundle()
    emitted = list(validate.process(batches[0]))
    broken = workers.pool()
    os.kill(broken.submit(os.getpid).result(), signal.SIGKILL)
    with pytest.raises(BrokenProcessPool):  # the pool's own thread notices the death
      broken.submit(os.getpid).result(timeout=60)
    for batch in batches[1:]:
      emitted += validate.process(batch)
    emitted += [output.value for output in validate.finish_bundle()]
    assert workers.pool() is not broken
  finally:
    validate.teardown()
    workers.shutdown()
  assert [[r.uri for r in records] for records in emitted] == [[item.uri for item in batch] for batch in batches]


def test_split_assignment_hands_a_content_bucket_on_by_order_bucket_then_its_labels():
  spec = splitting.parse_splits('train=0.5,test=0.5')
  records = [image_record(f'/d/{label}/{i}.jpg', label, sha256=f'{i:064x}')
             for i, label in enumerate(['cat'] * 40 + ['dog'] * 2)]
  groups = [ContentGroup((r,)) for r in records]
  placed = {key: [offsets] for key, offsets in hash_order.offsets(splitting.class_weights('00', groups)).items()}
  out = list(content_groups.assign_splits(('00', groups), spec, placed, len(records)))
  by_order, tagged = [o for o in out if isinstance(o, tuple)], [o for o in out if not isinstance(o, tuple)]
  assert len(by_order) > 1 and all(r.order_key.startswith(bucket) for bucket, batch in by_order for r in batch)
  assigned = [r for _, batch in by_order for r in batch]
  assert sorted(r.uri for r in assigned) == sorted(r.uri for r in records)
  assert {r.split for r in assigned if r.label == 'cat'} == {'train', 'test'}
  assert [(o.tag, o.value) for o in tagged] == [('labels', 'cat'), ('labels', 'dog')]
  assert len(by_order) <= 16 ** sharding.ORDER_BUCKET_DIGITS


def test_a_batch_of_large_files_is_divided_among_the_workers_in_order():
  items = [InputItem(f'/in/{i}.png') for i in range(6)]
  assert pooled_steps.divided(items, [1000] * 6, task_bytes=2**20) == [items]  # small photos: one task
  assert pooled_steps.divided(items, [2**20] * 6, task_bytes=2**20) == [[item] for item in items]
  assert pooled_steps.divided(items, [2**20] * 6, task_bytes=2 * 2**20) == [items[0:2], items[2:4], items[4:6]]
  # Cut where the bytes so far pass a multiple of a third of the total (a file counted at its middle).
  assert pooled_steps.divided(items, [3 * 2**20, 2**19, 2**19, 2**19, 2**19, 2**20], task_bytes=2**21) == [
      items[0:1], items[1:3], items[3:6]]
  assert pooled_steps.divided([], [], task_bytes=2**20) == [[]]
