"""The commit of an output of many shards (output_dir.commit), for an --incremental run that wrote
~1% of them against a full run that wrote them all (issue 36).

Usage: python -m benchmarks.commit_scale [--shards 70000] [--written-pct 1] [--gcs-shards 500] [--repeat 2]
                                          [--gcs-repeat 1]
       (also: python -m benchmarks.incremental --commit ...)

An output is made of tiny (100-byte) shard files and their catalog files, with a run record
listing them as an --incremental run writes it (run_totals.build of one ShardReport per
shard). Then a run's staging folder is filled as the converter would leave it, and the commit
is timed in this process:

* ``incremental``: the run wrote ``--written-pct`` of the shards: half of them rewritten
  under their earlier names, half new after the last one, each with its catalog file;
* ``full``: the run wrote every shard again, under the same names.

Each case is made afresh for each of ``--repeat`` rounds, the two cases alternating. On a
local folder at ``--shards``; with ``--gcs-shards``, on the local Cloud Storage emulator too
(tests/helpers/gcs_emulator.py; objects uploaded in parallel beforehand), where a move is a
copy and a delete, to extrapolate to --shards by the ratio of counts. cProfile's top entries
of each case's last commit (timed with the profiler on) say where its time goes.
"""
import argparse
import concurrent.futures
import cProfile
import io
import json
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from benchmarks.run import REPO, RESULTS, SCRATCH, machine

SHARD_BYTES = 100
RUN = 'bench-commit'
SPLIT = 'train'


def _names(indexes: List[int]) -> List[str]:
  return [name for i in indexes for name in (f'{SPLIT}-{i:05d}.tfrecord', f'catalog/{SPLIT}-{i:05d}.jsonl')]


def record_json(indexes: List[int], output: str) -> str:
  """The run record of an --incremental output whose train split holds the shards ``indexes``."""
  from beam_pipeline.core.messages import ShardReport  # pylint: disable=import-outside-toplevel
  from beam_pipeline.core.output import run_totals  # pylint: disable=import-outside-toplevel
  reports = [ShardReport(split=SPLIT, file=f'{SPLIT}-{i:05d}.tfrecord', num_examples=1, num_bytes=SHARD_BYTES,
                         catalog_file=f'catalog/{SPLIT}-{i:05d}.jsonl',
                         **run_totals.image_statistics(['cat'], [300], [SHARD_BYTES])) for i in indexes]
  settings = {'input': '/photos/**', 'output': output, 'incremental': True, 'schema': 'default',
              'compression': 'none', 'splits': {SPLIT: 1.0}}
  return run_totals.build(written=run_totals.written_totals(reports), labels=['cat'], errors_by_reason={},
                          num_errors_files=0, duplicates={'num_groups': 0, 'num_extra_copies': 0, 'groups': []},
                          dedupe=False, num_removed=0, settings=settings, runner='DirectRunner').to_json()


class Store:
  """Where the output lives: writes many small files fast (a local folder, or the emulator
  through the storage client, in parallel)."""

  def __init__(self, root: str, put: Callable[[List[Tuple[str, bytes]]], None], clear: Callable[[], None]):
    self.root, self.put, self.clear = root, put, clear


def local_store(folder: Path) -> Store:
  def put(files: List[Tuple[str, bytes]]) -> None:
    for name, data in files:
      path = folder / name
      path.parent.mkdir(parents=True, exist_ok=True)
      path.write_bytes(data)
  return Store(str(folder), put, lambda: shutil.rmtree(folder, ignore_errors=True))


def gcs_store(bucket_name: str) -> Store:
  from google.auth.credentials import AnonymousCredentials  # pylint: disable=import-outside-toplevel
  from google.cloud import storage  # pylint: disable=import-outside-toplevel
  client = storage.Client(project='test', credentials=AnonymousCredentials())
  bucket = client.create_bucket(bucket_name)
  pool = concurrent.futures.ThreadPoolExecutor(8)  # the client's connection pool holds 10

  def put(files: List[Tuple[str, bytes]]) -> None:
    list(pool.map(lambda file: bucket.blob(f'out/{file[0]}').upload_from_string(file[1]), files))

  def clear() -> None:
    list(pool.map(lambda blob: blob.delete(), list(client.list_blobs(bucket_name, prefix='out/'))))
  return Store(f'gs://{bucket_name}/out', put, clear)


def prepare(store: Store, shards: int, case: str, written_pct: float) -> Tuple[List[str], str]:
  """An output of ``shards`` shards, and a run's staging folder as ``case`` leaves it: the
  names it wrote, and its run record."""
  from beam_pipeline.pipeline.output import output_lock  # pylint: disable=import-outside-toplevel
  from beam_pipeline.core.output import output_layout  # pylint: disable=import-outside-toplevel
  store.clear()
  earlier = list(range(shards))
  data = b'\0' * SHARD_BYTES
  store.put([(name, data) for name in _names(earlier)] +
            [(output_layout.RUN_RECORD, record_json(earlier, store.root).encode())])
  if case == 'full':
    written, listed = earlier, earlier
  else:
    count = max(2, round(shards * written_pct / 100))
    written = earlier[:count // 2] + list(range(shards, shards + count - count // 2))
    listed = earlier + written[count // 2:]
  names = _names(written)
  store.put([(f'{output_layout.TEMP_DIR}/{RUN}/{name}', data) for name in names])
  output_lock.acquire(store.root, RUN, 'benchmarks.commit_scale')
  return names, record_json(listed, store.root)


def timed_commit(store: Store, names: List[str], record: str, profile: bool) -> Tuple[float, Optional[str]]:
  from beam_pipeline.pipeline.output import output_dir  # pylint: disable=import-outside-toplevel
  profiler = cProfile.Profile() if profile else None
  start = time.perf_counter()
  if profiler:
    profiler.enable()
  output_dir.commit(store.root, RUN, names, [], record)
  if profiler:
    profiler.disable()
  seconds = time.perf_counter() - start
  top = None
  if profiler:
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats('cumulative').print_stats(18)
    top = text.getvalue()
  return seconds, top


def check(store: Store, shards: int, case: str, written_pct: float) -> None:
  """The committed output lists what it should, and the staging folder is gone."""
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=import-outside-toplevel
  from beam_pipeline.core.output.run_record import RunRecord  # pylint: disable=import-outside-toplevel
  record = RunRecord.read(store.root, FileSystems.exists, FileSystems.open)
  want = shards if case == 'full' else shards + max(2, round(shards * written_pct / 100)) - \
      max(2, round(shards * written_pct / 100)) // 2
  got = len(record.splits[SPLIT].shards)
  if got != want:
    raise AssertionError(f'{case}: the record lists {got} shards, {want} expected')


def measure(store: Store, shards: int, repeat: int, written_pct: float) -> Dict[str, Any]:
  rounds: Dict[str, List[float]] = {'incremental': [], 'full': []}
  profiles: Dict[str, Optional[str]] = {}
  for round_ in range(repeat):
    for case in (('incremental', 'full') if round_ % 2 == 0 else ('full', 'incremental')):
      names, record = prepare(store, shards, case, written_pct)
      seconds, top = timed_commit(store, names, record, profile=round_ == repeat - 1)
      check(store, shards, case, written_pct)
      profiles[case] = top or profiles.get(case)
      rounds[case].append(round(seconds, 3))
      print(f'  {store.root} {shards:,} shards, {case}: commit {seconds:.2f} s ({len(names):,} files moved in)',
            flush=True)
  best = {case: min(values) for case, values in rounds.items()}
  return {'shards': shards, 'rounds': rounds, 'best_s': best,
          'ratio': round(best['incremental'] / best['full'], 3), 'profiles': profiles}


def main(argv: Optional[List[str]] = None) -> int:
  parser = argparse.ArgumentParser(prog='python -m benchmarks.commit_scale', description=__doc__.split('\n\n')[0])
  parser.add_argument('--shards', type=int, default=70000)
  parser.add_argument('--written-pct', type=float, default=1.0, help="the incremental run's share of shards written")
  parser.add_argument('--gcs-shards', type=int, default=500, help='shards on the storage emulator; 0: skip it')
  parser.add_argument('--repeat', type=int, default=2)
  parser.add_argument('--gcs-repeat', type=int, default=1, help='rounds on the emulator (a full commit there is slow)')
  args = parser.parse_args(argv)
  report: Dict[str, Any] = {'machine': machine(), 'written_pct': args.written_pct}
  folder = SCRATCH / 'commit-scale'
  print(f'local folder, {args.shards:,} shards of {SHARD_BYTES} bytes (+ catalog files):', flush=True)
  report['local'] = measure(local_store(folder), args.shards, args.repeat, args.written_pct)
  shutil.rmtree(folder, ignore_errors=True)
  if args.gcs_shards:
    sys.path.insert(0, str(REPO / 'tests'))
    from helpers import gcs_emulator  # pylint: disable=import-outside-toplevel
    with tempfile.TemporaryDirectory() as directory, gcs_emulator.serving(directory):
      print(f'storage emulator, {args.gcs_shards:,} shards:', flush=True)
      report['gcs'] = measure(gcs_store('commit-scale'), args.gcs_shards, args.gcs_repeat, args.written_pct)
    gcs = report['gcs']['best_s']
    scale = args.shards / args.gcs_shards
    report['gcs_extrapolated_s'] = {case: round(seconds * scale, 1) for case, seconds in gcs.items()}
  RESULTS.mkdir(parents=True, exist_ok=True)
  destination = RESULTS / 'commit-scale.json'
  destination.write_text(json.dumps(report, indent=2) + '\n')
  print(f'\ncommit of an output of many shards; the incremental run wrote {args.written_pct}% of them '
        f'(best of {args.repeat}):')
  print(f'   {"where":<26}{"shards":>8}{"incremental s":>15}{"full s":>9}{"ratio":>8}')
  for where in ('local', 'gcs'):
    if where in report:
      r = report[where]
      print(f'   {where:<26}{r["shards"]:>8,}{r["best_s"]["incremental"]:>15.2f}{r["best_s"]["full"]:>9.2f}'
            f'{r["ratio"]:>8.3f}')
  if 'gcs_extrapolated_s' in report:
    e = report['gcs_extrapolated_s']
    print(f'   {"gcs, linear to " + format(args.shards, ","):<26}{args.shards:>8,}{e["incremental"]:>15.1f}'
          f'{e["full"]:>9.1f}')
  for where in ('local', 'gcs'):
    for case in ('incremental', 'full'):
      if where in report:
        print(f'\nwhere the last {case} commit spent its time ({where}; cProfile, which slows it):')
        print('\n'.join(report[where]['profiles'][case].splitlines()[:32]))
  print(f'results: {destination.relative_to(REPO)}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
