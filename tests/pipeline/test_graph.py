"""The pipeline graph on Beam's in-process runner, below the command line."""
import random
from typing import List, Tuple

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from beam_pipeline.pipeline import coders, graph, local_runner
from beam_pipeline.pipeline.output import output_dir
from beam_pipeline.pipeline.planning import content_groups
from beam_pipeline.pipeline.planning.steps import BeamSteps
from beam_pipeline.cli import options
from beam_pipeline.core.planning import hash_order, sharding
from beam_pipeline.core.messages import CheckedImage

from helpers import photos
from helpers.values import chunked_numbers, image_record


def test_shards_planned_bucket_by_bucket_on_the_runner_match_one_ranking_of_each_split():
  """Shards planned on Beam (bucket totals as a side input, a GroupByKey per shard, gap-free
  numbers) plans what ranking each whole split in one place plans, even when a huge record
  leaves planned shards empty."""
  rng = random.Random(5)
  records = [image_record(f'/d/{i}.jpg', 'cat', rng.choice(['train', 'test']), f'{rng.getrandbits(256):064x}',
                          2 * 10**6 if i == 7 else rng.randint(1000, 9000)) for i in range(1500)]
  target = 200_000
  placed = hash_order.offsets(sharding.split_bytes('', records))
  planned = sharding.assign_shards('', records, target, placed)
  numbered = chunked_numbers(planned)
  expected = [sharding.plan_shard(split, numbered[split, index], shard) for (split, index), shard in planned.items()]
  assert len(expected) < sum(sharding.shard_count(key.total, target) for key in placed.values())

  coders.register()
  p = beam.Pipeline(runner=local_runner.runner_for(PipelineOptions([])))
  pieces = [(bucket, batch[i:i + 7]) for bucket, batch in sharding.order_buckets(records).items()
            for i in range(0, len(batch), 7)]  # as content buckets hand them on: many pieces per order bucket
  pairs = p | beam.Create(pieces).with_output_types(Tuple[str, List[CheckedImage]])
  plans = BeamSteps(p).composite('PlanShards', content_groups.shards_planned, pairs, target)
  assert_that(plans, equal_to(expected))
  p.run().wait_until_finish()


def test_metrics_count_validated_written_and_rejected_images(tmp_path):
  """Beam metrics, counted per batch (300 images: a full batch and the one emitted at the
  end of the bundle), add up to what was written and rejected."""
  files = {f'cat/{i}.jpg': data for i, data in enumerate(photos.jpegs(300))}
  files.update({'cat/empty.jpg': b'', 'dog/page.jpg': b'<html></html>',
                'dog/1.png': photos.encode(photos.image(1, 32, 24), 'PNG')})
  photos.write_files(tmp_path / 'in', files)
  beam_options, settings, *_ = options.parse([f'--input={tmp_path}/in', f'--output={tmp_path}/out',
                                              '--max_error_fraction=1'])
  with output_dir.claim(settings.output, settings.run_id, 'launcher'):
    p = beam.Pipeline(runner=local_runner.runner_for(beam_options), options=beam_options)
    graph.build(p, settings, 'DirectRunner')
    result = p.run()
    result.wait_until_finish()
  counters = {c.key.metric.name: c.committed for c in result.metrics().query(MetricsFilter())['counters']}
  assert counters['validated'] == counters['written'] == 301
  assert (counters['source_format_JPEG'], counters['source_format_PNG']) == (300, 1)
  assert (counters['rejected_empty'], counters['rejected_not_image']) == (1, 1)
