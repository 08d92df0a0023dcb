"""What a daily --incremental update copies at scale, simulated (issue 57): shards rewritten a day
and their bytes, by shard target and by the order the first conversion wrote its records in.

Usage: python -m benchmarks.shard_rewrites [--records 10000000] [--days 40] [--change-pct 0.3]

A shard that loses a record is written again (its kept records copied as bytes), so a day's cost
is the shards its deletions and replacements reach. The model, one int per record:

* Day 0 is a first conversion of --records photos whose files were made over the --history-days
  before it (their ages spread evenly). It writes them in content-hash order, as the converter
  does: a shard holds photos of every age. Or, the lever measured, by arrival (the files'
  modification times): a shard holds photos of one stretch of time.
* Each later day, --change-pct of the records are deleted or replaced, each chosen with a weight
  that halves with every --half-life-days of its age (fixes go to recent photos; an infinite
  half-life is the uniform case), and as many new ones arrive (the replacements and the growth).
  An update writes each day's arrivals into shards of their own, as it does.
* Shards hold --target-mb over --record-kb photos; a rewritten shard keeps its place.

Printed: for each shard target, order and half-life, the mean over the last half of the days of
the shards rewritten a day, their share, and the bytes copied a day; and the CPU of copying them
at --copy-mb-per-cpu-s (the 150 MiB shard copy measured in beam_pipeline/docs/incremental.md).
Results also go to work/bench-results/shard-rewrites.json.
"""
import argparse
import json
import math
import time
from pathlib import Path
from typing import Dict, List

import numpy as np

RESULTS = Path(__file__).resolve().parents[1] / 'work' / 'bench-results'
ORDERS = ('content hash', 'arrival')


def simulate(records: int, shard_records: int, order: str, half_life: float, args: argparse.Namespace) -> Dict:
  """One layout's days: the shards each day's deletions reach, as (mean, share of shards, bytes a day).

  Args:
    records: the photos of the first conversion.
    shard_records: how many photos a shard holds.
    order: ORDERS' first (a shard holds photos of every age) or second (of one stretch of time).
    half_life: the days after which a photo is half as likely to be deleted or replaced; math.inf: uniform.
    args: the command line (days, change, history, record size).
  """
  rng = np.random.default_rng(0)
  born = -rng.uniform(0, args.history_days, records).astype(np.float32)  # the day each photo's file was made
  if order == 'arrival':
    born.sort()
  shard = (np.arange(records) // shard_records).astype(np.int32)
  shards = int(shard[-1]) + 1
  alive = np.ones(records, bool)
  per_day = max(1, round(records * args.change_pct / 100))
  counted: List[int] = []
  for day in range(1, args.days + 1):
    chosen = _weighted_sample(rng, alive, born - day, half_life, per_day)
    alive[chosen] = False
    if day > args.days // 2:
      counted.append(len(np.unique(shard[chosen])))
    new_shards = -(-per_day // shard_records)
    born = np.concatenate([born, np.full(per_day, day, np.float32)])
    shard = np.concatenate([shard, shards + np.arange(per_day, dtype=np.int32) // shard_records])
    alive = np.concatenate([alive, np.ones(per_day, bool)])
    shards += new_shards
  rewritten = float(np.mean(counted))
  shard_bytes = shard_records * args.record_kb * 1024
  return {'shards_rewritten_a_day': round(rewritten), 'share_of_shards': rewritten / shards,
          'bytes_copied_a_day': rewritten * shard_bytes,
          'copy_cpu_hours_a_day': rewritten * shard_bytes / 2**20 / args.copy_mb_per_cpu_s / 3600}


def _weighted_sample(rng: np.random.Generator, alive: np.ndarray, age: np.ndarray, half_life: float, count: int
                     ) -> np.ndarray:
  """``count`` live records drawn without replacement, each with a weight halving every ``half_life``
  days of its (negative) ``age``: the largest of log(u) / weight (Efraimidis and Spirakis), one pass
  over the records where numpy's choice without replacement would draw them one at a time."""
  keys = np.log(rng.random(len(alive)))
  if not math.isinf(half_life):
    keys /= np.exp2(age / half_life)
  keys[~alive] = -np.inf
  return np.argpartition(keys, len(keys) - count)[len(keys) - count:]


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--records', type=int, default=10_000_000, help='the bytes and hours scale with it')
  parser.add_argument('--days', type=int, default=40)
  parser.add_argument('--change-pct', type=float, default=0.3, help='deleted or replaced a day, in %% of the records')
  parser.add_argument('--history-days', type=float, default=3 * 365, help='the span the first photos were made over')
  parser.add_argument('--half-lives', default='inf,365,90,30', help='days, comma-separated; inf: uniform')
  parser.add_argument('--targets-mb', default='150,15')
  parser.add_argument('--record-kb', type=float, default=107, help='a stored photo (150 MiB / 1,430)')
  parser.add_argument('--copy-mb-per-cpu-s', type=float, default=1000, help='bytes copied per CPU-second')
  args = parser.parse_args()
  started = time.perf_counter()
  rows = []
  for target in (float(value) for value in args.targets_mb.split(',')):
    shard_records = max(1, round(target * 1024 / args.record_kb))
    for half_life in (float(value) for value in args.half_lives.split(',')):
      for order in ORDERS:
        row = {'target_mb': target, 'shard_records': shard_records, 'order': order, 'half_life_days': half_life,
               **simulate(args.records, shard_records, order, half_life, args)}
        rows.append(row)
        print(f"{target:>5g} MiB ({shard_records:,} photos) | half-life {half_life:>5g} d | {order:12s} | "
              f"{row['shards_rewritten_a_day']:>9,} shards a day ({row['share_of_shards']:6.1%}) | "
              f"{row['bytes_copied_a_day'] / 2**40:7.2f} TiB | {row['copy_cpu_hours_a_day']:6.1f} CPU-h", flush=True)
  RESULTS.mkdir(parents=True, exist_ok=True)
  (RESULTS / 'shard-rewrites.json').write_text(json.dumps({**vars(args), 'rows': rows,
                                                           'seconds': round(time.perf_counter() - started)}, indent=1))


if __name__ == '__main__':
  main()
