"""Planning's steps run in memory (InMemorySteps, the DirectRunner's) plan what they plan as Beam
transforms (BeamSteps), bucket by bucket: the two executors cannot drift apart."""
import collections
import gc
import functools
import random
from typing import Any, Dict, List, Optional

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from beam_pipeline.pipeline import coders, graph, incremental, local_runner
from beam_pipeline.pipeline.planning import planner
from beam_pipeline.pipeline.tags import DUPLICATES, LABELS, NEAR_COPIES, REJECTED
from beam_pipeline.core import option_table, schemas
from beam_pipeline.core.images import image_quality
from beam_pipeline.core.inputs import labels, manifest_rows
from beam_pipeline.core.messages import CheckedImage
from beam_pipeline.core.output import catalog_entries, incremental_update
from beam_pipeline.core.settings import InputSpec, SplitSpec

from helpers.values import image_record, settings

CLASSES = ('cat', 'dog', 'bird')


def _records(seed: int) -> List[CheckedImage]:
  """1,200 photos of three classes, some of uneven size; 60 identical copies (a third of them
  under another class); 80 near copies (two bits of another's hash flipped, one family in
  three of three files, some across classes); 20 featureless frames of one hash."""
  rng = random.Random(seed)

  def record(index: int, label: str, sha: Optional[str] = None, phash: Optional[str] = None, **fields: Any):
    return image_record(f'/in/{label}/{index}.jpg', label, None, sha or f'{rng.getrandbits(256):064x}',
                        rng.choice([900, 5_000, 40_000]), phash=phash or f'{rng.getrandbits(64):016x}', **fields)

  photos = [record(i, rng.choice(CLASSES)) for i in range(1200)]
  copies = [record(2000 + i, rng.choice(CLASSES) if i % 3 == 0 else original.label, original.source_sha256,
                   original.phash) for i, original in enumerate(rng.sample(photos, 60))]
  near = []
  for i, original in enumerate(rng.sample(photos, 60)):
    for j in range(2 if i % 3 == 0 else 1):
      flipped = int(original.phash, 16) ^ (1 << rng.randrange(64)) ^ (1 << rng.randrange(64))
      near.append(record(3000 + 2 * i + j, rng.choice(CLASSES) if i % 4 == 0 else original.label,
                         phash=f'{flipped:016x}'))
  blank = [record(4000 + i, 'cat', phash='0' * 16, quality=(image_quality.LOW_INFORMATION,)) for i in range(20)]
  everything = photos + copies + near + blank
  rng.shuffle(everything)
  return everything


def _batches(records: List[CheckedImage], size: int = 37) -> List[List[CheckedImage]]:
  return [records[i:i + size] for i in range(0, len(records), size)]


@pytest.mark.parametrize('near_copies, dedupe, records_per_bucket', [
    ('group', False, 100), ('drop', True, 100), ('off', True, 100), ('group', True, 10**6)])
def test_the_plans_in_memory_are_the_beam_planners_on_the_runner(near_copies, dedupe, records_per_bucket):
  """The same records, in batches, planned in memory as plain calls, as Beam transforms and by
  the in-memory step on the runner: the same shards with the same records, labels, rejections
  and summaries of copies and near copies. Buckets narrow enough to have dozens of each, and
  shards small enough to be many."""
  records = _records(7)
  chosen = settings(splits=SplitSpec(('train', 'validation', 'test'), (0.8, 0.1, 0.1)), dedupe=dedupe,
                    near_copies=near_copies, target_shard_bytes=200_000)
  batches = _batches(records)
  expected = planner.in_memory(batches, len(records), chosen, records_per_bucket)
  assert len(expected[None]) > 50 and expected[DUPLICATES][0]['num_groups'] >= 50
  assert (near_copies == 'off') == (NEAR_COPIES not in expected)
  if near_copies != 'off':
    assert expected[NEAR_COPIES][0]['num_groups'] >= 50
  assert bool(expected.get(REJECTED)) == (dedupe or near_copies == 'drop')

  for one_machine in (False, True):
    coders.register()
    p = beam.Pipeline(runner=local_runner.runner_for(PipelineOptions([])))
    batched = p | 'Records' >> beam.Create(batches).with_output_types(List[CheckedImage])
    listed = p | 'Listed' >> beam.Create([len(records)])
    planned = graph.plan(batched, listed, chosen, records_per_bucket, one_machine=one_machine)
    assert_that(planned.plans, equal_to(expected[None]), label='Plans')
    assert_that(planned.rejected | 'Rejected' >> beam.Flatten(), equal_to(expected.get(REJECTED, [])),
                label='Rejections')
    summaries = (p | 'Once' >> beam.Create([None])
                 | 'Summaries' >> beam.Map(lambda _, texts, duplicates: {LABELS: texts, DUPLICATES: duplicates},
                                           planned.labels, planned.duplicates))
    assert_that(summaries, equal_to([{LABELS: expected[LABELS][0], DUPLICATES: expected[DUPLICATES][0]}]),
                label='Summaries')
    if near_copies == 'off':
      assert planned.near_copies is None
    else:
      assert_that(planned.near_copies, equal_to(expected[NEAR_COPIES]), label='NearCopies')
    p.run().wait_until_finish()


def test_a_manifests_source_ids_and_an_updates_kept_records_are_planned_as_the_beam_planner_plans(tmp_path):
  """A manifest that gives source ids (a few given twice, by rows of one image and of two),
  converted as an --incremental update: kept records counted per class and split, new records
  whose split is given (as new copies of kept pictures are), earlier classes first, new shards
  numbered into the indexes merges freed. The in-memory step plans what the Beam planner plans."""
  rng = random.Random(11)
  key = schemas.source_id_key(option_table.default('schema'))
  records = []
  for i, record in enumerate(_records(3)[:600]):
    source_id = str(i - 1 if i and i % 50 == 0 else i)  # every fiftieth row repeats the row before's id
    if i and i % 100 == 0:  # ... and every hundredth names that row's image again
      record = record._replace(uri=records[-1].uri, source_sha256=records[-1].source_sha256,
                               sha256=records[-1].sha256)
    records.append(record._replace(extras=((key, source_id),), row=i + 1,
                                   split='validation' if i % 37 == 0 else None))
  kept = [catalog_entries.Entry(f'/in/old/{i}.jpg', 'f', f'{i:064x}', rng.choice(['train', 'validation']),
                                    rng.choice(('dog', 'zebra')), (), (), 10, 100, False, False, False, False)
          for i in range(300)]
  decision = incremental_update.Decision(True, labels=('zebra', 'dog'), numbering=(
      ('train', incremental_update.Numbering(7, (2, 5))), ('validation', incremental_update.Numbering(3))))
  chosen = settings(input=InputSpec('csv', str(tmp_path / 'list.csv')), incremental=True, target_shard_bytes=100_000,
                    splits=SplitSpec(('train', 'validation'), (0.75, 0.25)))
  batches = _batches(records)
  counts = collections.Counter((entry.stratum, entry.split) for entry in kept)
  options = planner.PlanOptions(manifest_rows.row_names(chosen.input), key,
                                           functools.partial(labels.extended_labels, list(decision.labels)),
                                           decision.numbered)
  expected = planner.in_memory(batches, len(records), chosen, 50, options,
                                     [(stratum, (split, count)) for (stratum, split), count in counts.items()])
  assert len(expected[REJECTED]) >= 10 and expected[LABELS][0][:2] == ['zebra', 'dog']
  assert {plan.split for plan in expected[None]} == {'train', 'validation'} and len(expected[None]) > 10
  assert DUPLICATES not in expected and NEAR_COPIES not in expected  # graph.build lists the dataset's instead

  for one_machine in (False, True):
    coders.register()
    p = beam.Pipeline(runner=local_runner.runner_for(PipelineOptions([])))
    changes = incremental.Changes(None, p | 'Kept' >> beam.Create([((e.stratum, e.split), 1) for e in kept]), None,
                                  None, None, None, None, None, None)
    batched = p | 'Records' >> beam.Create(batches).with_output_types(List[CheckedImage])
    listed = p | 'Listed' >> beam.Create([len(records)])
    planned = graph.plan(batched, listed, chosen, 50, decision, changes, one_machine)
    assert_that(planned.plans, equal_to(expected[None]), label='Plans')
    assert_that(planned.rejected | 'Rejected' >> beam.Flatten(), equal_to(expected[REJECTED]), label='Rejections')
    texts = p | 'Once' >> beam.Create([None]) | 'Labels' >> beam.Map(lambda _, texts: texts, planned.labels)
    assert_that(texts, equal_to(expected[LABELS]), label='Labels')
    assert planned.duplicates is None and planned.near_copies is None
    p.run().wait_until_finish()


def test_an_empty_input_plans_nothing_and_sums_up_nothing():
  """No records: no plans, no labels, and summaries of nothing, as the Beam planner's defaults give."""
  planned: Dict[Any, List[Any]] = planner.in_memory([], 0, settings(), 100)
  assert planned[None] == [] and planned[LABELS] == [[]] and not planned.get(REJECTED)
  assert planned[DUPLICATES] == [{'num_groups': 0, 'num_extra_copies': 0, 'num_label_conflicts': 0, 'groups': []}]
  assert planned[NEAR_COPIES][0]['num_groups'] == 0


@pytest.mark.parametrize('enabled', [True, False])
def test_planning_pauses_the_collector_and_leaves_it_as_it_found_it(enabled, monkeypatch):
  during = []
  monkeypatch.setattr(planner, 'in_memory', lambda *arguments: during.append(gc.isenabled()) or {None: []})
  was = gc.isenabled()
  (gc.enable if enabled else gc.disable)()
  try:
    assert list(planner._planned(None)) == []  # pylint: disable=protected-access
    assert during == [False]
    assert gc.isenabled() == enabled
  finally:
    (gc.enable if was else gc.disable)()
