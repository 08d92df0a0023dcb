"""Planning at scale, simulated: N synthetic metadata records (no pixels) through the real
planning transforms (beam_pipeline.pipeline.graph.plan), on the in-process runner and in
multi-process mode.

Usage: python -m benchmarks.planning [--records 100000,1000000,5000000] [--modes in_process,multi_processing]
       python -m benchmarks.planning --incremental [--records 1000000] [--change-pct 1]
         (an --incremental update's planning: benchmarks/incremental_planning.py)

Each (N, mode) runs in a child process under benchmarks.measure (peak memory of the
largest process, CPU over all of them). The child generates the records inside the
pipeline, a thousand at a time, so no list of N travels in the job graph, plans them
into 150 MiB shards with three splits, and reports the largest number of records one
key of each planning GroupByKey held (Beam distributions) and the time per record.
The table, and its extrapolation to 100 million images on Dataflow (formula in
``extrapolate``), go to standard output and work/bench-results/planning.json.
"""
import argparse
import hashlib
import json
import logging
import math
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np

RESULTS = Path(__file__).resolve().parents[1] / 'work' / 'bench-results'
CHUNK = 1000  # records generated per element
CLASSES = 1000
SPLITS = 'train=0.8,validation=0.1,test=0.1'
DUPLICATE_EVERY = 100  # one record in a hundred is a copy of another
STAGES = ('GroupByContent', 'GroupByOrder', 'GroupByShard')


def synthetic_chunk(start: int, count: int) -> List[Any]:
  """Records ``start`` to ``start + count``, as validation would make them of a web-scraped
  photo collection: long-tailed classes (Zipf over CLASSES), sizes around 110 KB
  (log-normal), bucket paths of 60-80 characters, a copy every DUPLICATE_EVERY records."""
  from beam_pipeline.core.planning import sharding  # pylint: disable=import-outside-toplevel
  from beam_pipeline.core.messages import CheckedImage  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(start)
  classes = np.minimum(rng.zipf(1.3, count), CLASSES) - 1
  sizes = rng.lognormal(math.log(110_000), 0.6, count).astype(int)
  records = []
  for offset in range(count):
    index = start + offset
    label = f'class_{classes[offset]:04d}'
    uri = f'gs://photo-collection/scraped/2026/{label}/{index:010d}_{rng.integers(1 << 32):08x}.jpg'
    content = (records[-1].source_sha256 if offset % DUPLICATE_EVERY == DUPLICATE_EVERY - 1 and records
               else hashlib.sha256(index.to_bytes(8, 'little')).hexdigest())
    records.append(CheckedImage(uri, label, None, (), content, content, int(sizes[offset]), 'jpeg', 375, 500, 3,
                               False, sharding.order_key(content, uri)))
  return records


def run_plan(count: int, mode: str) -> Dict[str, Any]:
  """Plans ``count`` synthetic records in this process's pipeline; what the child reports."""
  import apache_beam as beam  # pylint: disable=import-outside-toplevel
  from apache_beam.metrics.metric import MetricsFilter  # pylint: disable=import-outside-toplevel
  from apache_beam.options.pipeline_options import PipelineOptions  # pylint: disable=import-outside-toplevel

  from beam_pipeline.pipeline import coders, graph, local_runner  # pylint: disable=import-outside-toplevel
  from beam_pipeline.core.planning import splitting  # pylint: disable=import-outside-toplevel
  from beam_pipeline.core.messages import CheckedImage  # pylint: disable=import-outside-toplevel
  from beam_pipeline.core.settings import InputSpec, LabelSource, Settings  # pylint: disable=import-outside-toplevel

  flags = ['--direct_running_mode=multi_processing', '--direct_num_workers=2'] if mode == 'multi_processing' else []
  options = PipelineOptions(flags)
  settings = Settings(InputSpec('glob', 'gs://photo-collection/**'), '/tmp/unused', LabelSource('manifest'),
                      'default', 150 * 2**20, 'none', 10**8, 100 * 2**20, splitting.parse_splits(SPLITS), False,
                      224, True, 32, 0.05)
  coders.register()
  p = beam.Pipeline(runner=local_runner.runner_for(options), options=options)
  chunks = [(start, min(CHUNK, count - start)) for start in range(0, count, CHUNK)]
  records = (p
             | 'Chunks' >> beam.Create(chunks)
             | 'Records' >> beam.MapTuple(synthetic_chunk).with_output_types(List[CheckedImage]))
  planned = graph.plan(records, p | 'Count' >> beam.Create([count]), settings)
  _ = (planned.plans
       | 'Sizes' >> beam.Map(lambda plan: len(plan.records))
       | 'Planned' >> beam.CombineGlobally(sum)
       | 'Check' >> beam.Map(_check_total, count))
  started = time.monotonic()
  result = p.run()
  result.wait_until_finish()
  seconds = time.monotonic() - started
  largest = {d.key.metric.name.replace('records_per_key_', ''): d.committed.max
             for d in result.metrics().query(MetricsFilter().with_namespace('beam_pipeline'))['distributions']}
  keys = {d.key.metric.name.replace('records_per_key_', ''): d.committed.count
          for d in result.metrics().query(MetricsFilter().with_namespace('beam_pipeline'))['distributions']}
  return {'records': count, 'mode': mode, 'seconds': round(seconds, 2),
          'us_per_record': round(seconds / count * 1e6, 2), 'largest_key': largest, 'keys': keys}


def _check_total(planned: int, count: int) -> None:
  if planned != count:
    raise AssertionError(f'{planned} records planned of {count}')


def record_bytes() -> Tuple[float, float]:
  """(bytes one record takes in memory as Python objects, bytes its coder writes), averaged
  over a chunk: what a key's records cost a worker, and what a shuffle moves."""
  from beam_pipeline.pipeline import coders  # pylint: disable=import-outside-toplevel
  tracemalloc.start()
  before = tracemalloc.get_traced_memory()[0]
  records = synthetic_chunk(0, 10_000)
  in_memory = (tracemalloc.get_traced_memory()[0] - before) / len(records)
  tracemalloc.stop()
  impl = coders.CheckedImageCoder().get_impl()
  encoded = sum(len(impl.encode(record)) for record in records) / len(records)
  return in_memory, encoded


def extrapolate(rows: List[Dict[str, Any]], in_memory: float, encoded: float, images: int = 10**8) -> Dict[str, Any]:
  """What planning ``images`` images on Dataflow takes, from the measurements:

  - keys: hash_order.prefix_digits gives each stage's buckets, so the largest key holds
    about images / 16**digits records, plus five standard deviations of that binomial
    count (the largest of thousands of buckets);
  - per-worker memory for the largest key: its records times ``in_memory`` bytes each;
  - shuffle bytes: three shuffles of every record (by content, by order, by shard) at
    ``encoded`` bytes each;
  - planning CPU: the largest N's in-process time per record (one core does all of it
    there) times ``images``.
  """
  from beam_pipeline.core.planning import hash_order, sharding, splitting  # pylint: disable=import-outside-toplevel
  largest = {}
  for stage, minimum in (('GroupByContent', splitting.CONTENT_BUCKET_DIGITS),
                         ('GroupByOrder', sharding.ORDER_BUCKET_DIGITS)):
    buckets = 16**hash_order.prefix_digits(images, minimum)
    mean = images / buckets
    largest[stage] = {'buckets': buckets, 'largest_key': int(mean + 5 * math.sqrt(mean)),
                      'largest_key_mb': round((mean + 5 * math.sqrt(mean)) * in_memory / 2**20, 1)}
  per_record = max((row for row in rows if row['mode'] == 'in_process'), key=lambda row: row['records'])
  return {'images': images, 'stages': largest, 'shuffle_gb': round(3 * images * encoded / 2**30, 1),
          'planning_cpu_hours': round(per_record['us_per_record'] * images / 1e6 / 3600, 1),
          'record_bytes_in_memory': round(in_memory), 'record_bytes_encoded': round(encoded)}


def measured_child(name: str, module_args: List[str]) -> Dict[str, Any]:
  """The row a ``python -m MODULE_ARGS... RESULT`` child writes to RESULTS/NAME.json, with the
  memory and CPU benchmarks.measure measured of it (RESULTS/NAME.memory.json)."""
  child, measured = RESULTS / f'{name}.json', RESULTS / f'{name}.memory.json'
  subprocess.run([sys.executable, '-m', 'benchmarks.measure', str(measured), sys.executable, '-m', *module_args,
                  str(child)], check=True, env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'})
  row = json.loads(child.read_text())
  memory = json.loads(measured.read_text())
  row.update(largest_process_mb=memory['max_process_rss_mb'], peak_pss_mb=memory['peak_pss_mb'],
             cpu_s=memory['cpu_s'])
  return row


def main() -> int:
  parser = argparse.ArgumentParser(prog='python -m benchmarks.planning', description=__doc__.splitlines()[0])
  parser.add_argument('--records', default=None, help='default 100000,1000000,5000000; 1000000 with --incremental')
  parser.add_argument('--modes', default=None,
                      help='default in_process,multi_processing; in_process with --incremental')
  parser.add_argument('--incremental', action='store_true', help="an --incremental update's planning instead "
                      '(benchmarks/incremental_planning.py)')
  parser.add_argument('--change-pct', default='1', help='with --incremental: the change, in %% of the records')
  parser.add_argument('--child', nargs=3, metavar=('N', 'MODE', 'RESULT'), help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.incremental:  # a process of its own: incremental_planning imports this module
    return subprocess.call([sys.executable, '-m', 'benchmarks.incremental_planning', '--records',
                            args.records or '1000000', '--modes', args.modes or 'in_process',
                            '--change-pct', args.change_pct])
  args.records = args.records or '100000,1000000,5000000'
  args.modes = args.modes or 'in_process,multi_processing'
  if args.child:
    logging.getLogger('apache_beam').setLevel(logging.ERROR)  # multi-process mode's SDK workers' notices
    count, mode, path = args.child
    Path(path).write_text(json.dumps(run_plan(int(count), mode)))
    return 0
  RESULTS.mkdir(parents=True, exist_ok=True)
  rows = []
  for count in map(int, args.records.split(',')):
    for mode in args.modes.split(','):
      row = measured_child(f'planning-{count}-{mode}', ['benchmarks.planning', '--child', str(count), mode])
      rows.append(row)
      largest = ', '.join(f'{stage} {row["largest_key"].get(stage, 0):,} of {row["keys"].get(stage, 0):,} keys'
                          for stage in STAGES)
      print(f'{count:>11,} {mode:<16} {row["seconds"]:>8.1f} s {row["us_per_record"]:>6.1f} us/record '
            f'largest process {row["largest_process_mb"]:>6.0f} MB; largest key: {largest}', flush=True)
  in_memory, encoded = record_bytes()
  projection = extrapolate(rows, in_memory, encoded)
  print(json.dumps(projection, indent=2))
  (RESULTS / 'planning.json').write_text(json.dumps({'rows': rows, 'extrapolation': projection}, indent=2))
  return 0


if __name__ == '__main__':
  sys.exit(main())
