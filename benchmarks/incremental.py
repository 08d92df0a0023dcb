"""An --incremental update against a fresh conversion of the same input, side by side (issue 36).

Usage: python -m benchmarks.incremental [--images 20000] [--repeat 3] [--target-shard-mb 2]
                                        [--splits train=0.8,validation=0.1,test=0.1] [--keep]
       python -m benchmarks.incremental --stages [--images 20000]   (after a run: the update's stages)
       python -m benchmarks.incremental --commit [--shards 70000] [--gcs-shards 500]   (benchmarks/commit_scale.py)

On a copy of the cached photo set (benchmarks/photo_set.py, work/bench-data/<n>/):

1. converts the copy with --incremental into ``base`` (timed, for information);
2. changes the copy: adds ADDED of new photos (drawn by the same generator with another
   seed, so their contents are new), removes REMOVED of the files and replaces REPLACED
   (new content under the same name);
3. ``--repeat`` times: copies ``base`` to ``update`` and runs, in alternating order, the
   incremental update of ``update`` and a fresh conversion of the changed input (same
   options, --incremental included, into an empty folder), each a child process under
   benchmarks.measure (wall time; CPU of every process of the run, workers included);
4. checks the update: the (image/filename, image/key/sha256) pairs read back with
   TensorFlow from the shards its run record lists equal the fresh conversion's, and so do
   the (uri, reason) pairs of the errors files; no shard file lies there unlisted; each
   earlier shard is either untouched (same inode, mtime and bytes as before the update),
   rewritten, or gone, and the rewritten ones are exactly the shards whose catalog held a
   removed or replaced file (plus the small shards a merge takes);
5. runs the update once more, nothing having changed since, against the launcher's listing alone
   in a process of its own (issue 57: at most 2 s more than the listing, no file touched);
6. prints the wall and CPU of update and fresh conversion, their ratios (the issue's aim:
   update at most 0.3x the wall time), shards kept untouched and the run record's update
   section, against the counts the change made. Results: work/bench-results/incremental-<n>.json.

The smaller default shard size (2 MiB; 150 is the converter's) gives the 20,000 photos some
190 shards, so the share of shards an update keeps says something: with removals and
replacements spread at random, a shard of R records is kept with probability about
(1 - 0.001) ** R, which the report prints beside the measured share.
"""
import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

import numpy as np

from benchmarks import photo_set
from beam_pipeline.synthetic import pet_photos
from benchmarks.run import REPO, RESULTS, SCRATCH, machine, run_child

ADDED, REMOVED, REPLACED = 0.01, 0.0005, 0.0005
NEW_SEED, REPLACEMENT_SEED, PICK_SEED = 1, 2, 36
AIM = 0.3  # update wall / fresh conversion wall, at most


def converter(input_dir: Path, output: Path, args: argparse.Namespace) -> List[str]:
  return [sys.executable, '-m', 'beam_pipeline', f'--input={input_dir}', f'--output={output}', '--runner=DirectRunner',
          '--incremental', f'--target_shard_mb={args.target_shard_mb}', f'--splits={args.splits}']


def image_files(folder: Path) -> List[Path]:
  return sorted(path for path in folder.rglob('*') if path.is_file())


def change_input(folder: Path, n: int) -> Dict[str, Any]:
  """Adds, removes and replaces files of ``folder`` (the copy of an n-file set) as the module
  says; returns what it did, by uri."""
  files = image_files(folder)
  rng = np.random.default_rng(PICK_SEED)
  num_removed, num_replaced = max(1, round(n * REMOVED)), max(1, round(n * REPLACED))
  picked = rng.choice(len(files), num_removed + num_replaced, replace=False)
  removed = [files[i] for i in picked[:num_removed]]
  replaced = [files[i] for i in picked[num_removed:]]
  for path in removed:
    path.unlink()
  for number, path in enumerate(replaced):
    path.write_bytes(_replacement(number))
  added = []
  for index in range(max(1, round(n * ADDED))):
    name, _, data = pet_photos.file_of(NEW_SEED, index)
    folder_name, file_name = name.split('/')
    path = folder / folder_name / f'added-{index}{Path(file_name).suffix}'
    path.write_bytes(data)
    added.append(path)
  return {'added': [str(p) for p in added], 'removed': [str(p) for p in removed],
          'replaced': [str(p) for p in replaced]}


def _replacement(number: int) -> bytes:
  """A valid JPEG none of the set holds: a replaced file stays an image, with other content."""
  index = number
  while True:
    _, kind, data = pet_photos.file_of(REPLACEMENT_SEED, index)
    if kind == 'jpeg':
      return data
    index += 10**6


def shard_state(output: Path) -> Dict[str, Tuple[int, int, int, str]]:
  """(inode, mtime_ns, size, sha256) of each shard and catalog file of ``output``."""
  state = {}
  for path in [*output.glob('*.tfrecord*'), *output.glob('catalog/*.jsonl')]:
    stat = path.stat()
    state[str(path.relative_to(output))] = (stat.st_ino, stat.st_mtime_ns, stat.st_size,
                                            hashlib.sha256(path.read_bytes()).hexdigest())
  return state


def dirty_shards(output: Path, uris: Set[str]) -> Set[str]:
  """The shards of ``output`` whose catalog lists one of ``uris``."""
  found = set()
  for catalog in output.glob('catalog/*.jsonl'):
    for line in catalog.read_text(encoding='utf-8').splitlines():
      if line.strip() and json.loads(line)[0] in uris:
        found.add(catalog.stem + '.tfrecord')
  return found


def compare_shards(before: Dict[str, Tuple[int, int, int, str]], after: Dict[str, Tuple[int, int, int, str]]
                   ) -> Dict[str, Any]:
  """What became of the earlier shard files (not their catalogs) in an update."""
  shards = [name for name in before if not name.startswith('catalog/')]
  untouched = [name for name in shards if after.get(name) == before[name]]
  same_bytes = [name for name in shards if name in after and after[name][3] == before[name][3]]
  catalogs = [name for name in before if name.startswith('catalog/')]
  return {'earlier_shards': len(shards), 'untouched': len(untouched), 'byte_identical': len(same_bytes),
          'rewritten': sorted(name for name in shards if name in after and after[name] != before[name]),
          'gone': sorted(name for name in shards if name not in after),
          'new': sorted(name for name in after if name not in before and not name.startswith('catalog/')),
          'catalogs_untouched': sum(after.get(name) == before[name] for name in catalogs),
          'untouched_pct': round(100 * len(untouched) / max(len(shards), 1), 1)}


READ_BACK = r'''
import json, sys
import tensorflow as tf
output = sys.argv[1]
record = json.load(open(output + "/beam_pipeline.json"))
files = [output + "/" + shard["file"] for split in record["splits"].values() for shard in split["shards"]]
pairs = []
for raw in tf.data.TFRecordDataset(files):
  features = tf.train.Example.FromString(raw.numpy()).features.feature
  pairs.append([features["image/filename"].bytes_list.value[0].decode("utf-8", "surrogateescape"),
                features["image/key/sha256"].bytes_list.value[0].decode()])
json.dump({"files": [shard["file"] for split in record["splits"].values() for shard in split["shards"]],
           "pairs": pairs}, open(sys.argv[2], "w"))
'''


def read_back(output: Path, scratch: Path) -> Dict[str, Any]:
  """The shards the run record lists and the (image/filename, image/key/sha256) pairs they hold,
  read with TensorFlow in a child process (this one stays small for benchmarks.measure's)."""
  result = scratch / f'{output.name}.pairs.json'
  done = subprocess.run([sys.executable, '-c', READ_BACK, str(output), str(result)], capture_output=True, check=False,
                        env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'})
  if done.returncode:
    raise RuntimeError(f'reading {output} back failed: {done.stderr.decode(errors="replace")[-3000:]}')
  data = json.loads(result.read_text())
  result.unlink()
  return data


def errors(output: Path) -> Set[Tuple[str, str]]:
  found = set()
  for path in output.glob('errors-*.jsonl'):
    for line in path.read_text(encoding='utf-8').splitlines():
      if line.strip():
        value = json.loads(line)
        found.add((value['uri'], value['reason']))
  return found


def check(update: Path, full: Path, scratch: Path) -> Dict[str, Any]:
  """Whether the update holds what the fresh conversion of the same input holds."""
  got, want = read_back(update, scratch), read_back(full, scratch)
  pairs_got = {tuple(pair) for pair in got['pairs']}
  pairs_want = {tuple(pair) for pair in want['pairs']}
  on_disk = sorted(str(path.relative_to(update)) for path in update.glob('*.tfrecord*'))
  errors_got, errors_want = errors(update), errors(full)
  return {'pairs_equal': pairs_got == pairs_want, 'records': len(got['pairs']), 'records_fresh': len(want['pairs']),
          'repeated_records': len(got['pairs']) - len(pairs_got),
          'missing': sorted(pairs_want - pairs_got)[:10], 'extra': sorted(pairs_got - pairs_want)[:10],
          'unlisted_shards': sorted(set(on_disk) - set(got['files'])),
          'errors_equal': errors_got == errors_want,
          'errors_missing': sorted(errors_want - errors_got)[:10],
          'errors_extra': sorted(errors_got - errors_want)[:10]}


def timed(name: str, argv: List[str], scratch: Path, label: str) -> Dict[str, Any]:
  print(f'[{label}] {name} ...', end=' ', flush=True)
  result = run_child(argv, scratch / name)
  result.pop('last_line', None)
  if result['exit_code']:
    err = (scratch / name).with_suffix('.err').read_text(errors='replace').strip().splitlines()
    raise RuntimeError(f'{name} failed (exit {result["exit_code"]}):\n' + '\n'.join(err[-20:]))
  print(f'{result["wall_s"]:.1f} s wall, {result["cpu_s"]:.1f} s CPU', flush=True)
  return result


def bench(args: argparse.Namespace) -> Dict[str, Any]:
  images, data = photo_set.ensure(args.images)
  scratch = SCRATCH / f'incremental-{args.images}'
  shutil.rmtree(scratch, ignore_errors=True)
  scratch.mkdir(parents=True)
  input_dir, base = scratch / 'input', scratch / 'base'
  shutil.copytree(images, input_dir)
  print(f'set: {args.images} files copied to {input_dir} ({"cached" if data["cached"] else "generated"})', flush=True)
  first = timed('base', converter(input_dir, base, args), scratch, 'first conversion, --incremental')
  base_record = json.loads((base / 'beam_pipeline.json').read_text())
  change = change_input(input_dir, args.images)
  print(f'changed the input: {len(change["added"])} added, {len(change["removed"])} removed, '
        f'{len(change["replaced"])} replaced', flush=True)
  for path in image_files(input_dir):  # in the page cache for both runs alike
    path.read_bytes()
  dirty = dirty_shards(base, set(change['removed']) | set(change['replaced']))
  rejected_before = {uri for uri, _ in errors(base)}
  catalogued = {json.loads(line)[0] for path in base.glob('catalog/*.jsonl')
                for line in path.read_text(encoding='utf-8').splitlines() if line.strip()}
  known = catalogued | rejected_before  # an earlier rejection is carried while its file is unchanged
  rounds = []
  for round_ in range(args.repeat):
    label = f'{round_ + 1}/{args.repeat}'
    update, full = scratch / 'update', scratch / 'full'
    for folder in (update, full):
      shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(base, update)  # copy2: the files' times as they were
    before = shard_state(update)
    order = ('update', 'full') if round_ % 2 == 0 else ('full', 'update')
    measured = {}
    for which in order:
      measured[which] = timed(which, converter(input_dir, update if which == 'update' else full, args), scratch, label)
    shards = compare_shards(before, shard_state(update))
    record = json.loads((update / 'beam_pipeline.json').read_text())
    rounds.append({'order': order, 'update': measured['update'], 'full': measured['full'],
                   'wall_ratio': round(measured['update']['wall_s'] / measured['full']['wall_s'], 3),
                   'cpu_ratio': round(measured['update']['cpu_s'] / measured['full']['cpu_s'], 3),
                   'shards': shards, 'update_section': record.get('update'),
                   'num_examples': record['num_examples'],
                   'num_examples_fresh': json.loads((full / 'beam_pipeline.json').read_text())['num_examples'],
                   'check': check(update, full, scratch) if round_ == 0 or args.check_every else None})
    print(f'[{label}] update/full: wall {rounds[-1]["wall_ratio"]:.2f}x, CPU {rounds[-1]["cpu_ratio"]:.2f}x; '
          f'{shards["untouched"]} of {shards["earlier_shards"]} earlier shards untouched', flush=True)
  unchanged = no_change(input_dir, scratch / 'update', scratch, args)
  if not args.keep:
    for folder in (scratch / 'update', scratch / 'full'):
      shutil.rmtree(folder, ignore_errors=True)
  shard_records = [shard['num_examples'] for split in base_record['splits'].values() for shard in split['shards']]
  expected_kept = statistics.mean((1 - REMOVED - REPLACED) ** count for count in shard_records)
  return {'images': args.images, 'repeat': args.repeat, 'machine': machine(), 'data_set': data,
          'options': {'target_shard_mb': args.target_shard_mb, 'splits': args.splits},
          'first_conversion': first, 'earlier_shards': len(shard_records),
          'records_per_shard': round(statistics.mean(shard_records), 1),
          'expected_untouched_pct': round(100 * expected_kept, 1),
          'change': {name: len(uris) for name, uris in change.items()},
          'earlier_rejected': len(rejected_before), 'catalogued': len(catalogued), 'known': len(known),
          'known_change': {'removed': len(set(change['removed']) & known),
                           'replaced': len(set(change['replaced']) & known),
                           'replaced_unknown': len(set(change['replaced']) - known)},
          'dirty_shards': sorted(dirty), 'rounds': rounds, 'no_change': unchanged}


# The launcher's listing alone, as a no-change update makes it (cli/launch.py, _nothing_changed).
LISTING = ('import sys\n'
           'from beam_pipeline.pipeline.listing import parts\n'
           'from beam_pipeline.core.settings import DIRECTORY, InputSpec\n'
           'print(parts.digest_of_listing(InputSpec(DIRECTORY, sys.argv[1]), sys.argv[2]).count)\n')


def no_change(input_dir: Path, updated: Path, scratch: Path, args: argparse.Namespace) -> Dict[str, Any]:
  """The update run again on the output the last round updated, nothing having changed since,
  against the listing alone in a process of its own; and whether it left every file as it was."""
  before = {path: path.stat().st_mtime_ns for path in updated.rglob('*') if path.is_file()}
  again = timed('no-change', converter(input_dir, updated, args), scratch, 'nothing changed')
  listing = timed('listing', [sys.executable, '-c', LISTING, f'{input_dir}/**', str(updated)], scratch,
                  'the listing alone')
  after = {path: path.stat().st_mtime_ns for path in updated.rglob('*') if path.is_file()}
  said = (scratch / 'no-change').with_suffix('.out').read_text().strip().splitlines()
  return {'run': again, 'listing': listing, 'over_listing_s': round(again['wall_s'] - listing['wall_s'], 2),
          'untouched': before == after, 'said': said[-1] if said else ''}


def summarize(report: Dict[str, Any]) -> Dict[str, Any]:
  """Medians over the rounds, and what looks wrong."""
  rounds = report['rounds']

  def median(values: List[float]) -> float:
    return round(statistics.median(values), 3)
  summary = {name: median([r[which][field] for r in rounds])
             for name, which, field in (('update_wall_s', 'update', 'wall_s'), ('update_cpu_s', 'update', 'cpu_s'),
                                        ('full_wall_s', 'full', 'wall_s'), ('full_cpu_s', 'full', 'cpu_s'),
                                        ('update_pss_mb', 'update', 'peak_pss_mb'),
                                        ('full_pss_mb', 'full', 'peak_pss_mb'))}
  summary.update(wall_ratio=median([r['wall_ratio'] for r in rounds]),
                 cpu_ratio=median([r['cpu_ratio'] for r in rounds]),
                 untouched_pct=median([r['shards']['untouched_pct'] for r in rounds]))
  summary['meets_aim'] = summary['wall_ratio'] <= AIM
  problems = []
  change, first = report['change'], rounds[0]
  section = first['update_section'] or {}
  # What the run record should count, of the files the earlier run knew: those it catalogued (it
  # wrote them) and those its errors files carry (rejected again unread while unchanged).
  known = report['known_change']
  expected = {'added': change['added'] + known['replaced_unknown'], 'changed': known['replaced'],
              'removed': known['removed'], 'unchanged': report['known'] - known['removed'] - known['replaced']}
  for name, value in expected.items():
    if section.get(name) != value:
      problems.append(f'update.{name} is {section.get(name)}, {value} expected')
  rewritten = set(first['shards']['rewritten']) | set(first['shards']['gone'])
  dirty = set(report['dirty_shards'])
  if not dirty <= rewritten:
    problems.append(f'shards holding a removed or replaced file left as they were: {sorted(dirty - rewritten)}')
  merged = rewritten - dirty
  if merged:
    problems.append(f'(merges) shards rewritten without a removed or replaced record, merges: {sorted(merged)}')
  if section.get('shards_kept') is not None and section['shards_kept'] != first['shards']['untouched']:
    problems.append(f'update.shards_kept is {section["shards_kept"]}, {first["shards"]["untouched"]} shards untouched')
  for r in rounds:
    c = r['check']
    if c is None:
      continue
    if not c['pairs_equal']:
      problems.append(f'pairs differ from the fresh conversion: missing {c["missing"]}, extra {c["extra"]}')
    if c['repeated_records']:
      problems.append(f'{c["repeated_records"]} records held twice')
    if c['unlisted_shards']:
      problems.append(f'shard files the run record does not list: {c["unlisted_shards"]}')
    if not c['errors_equal']:
      problems.append(f'errors differ: missing {c["errors_missing"]}, extra {c["errors_extra"]}')
  if len({json.dumps(r['update_section'], sort_keys=True) for r in rounds}) > 1:
    problems.append('the update section differs between rounds')
  summary['problems'] = problems
  return summary


def print_report(report: Dict[str, Any], summary: Dict[str, Any]) -> None:
  n, change = report['images'], report['change']
  print(f'\n{n} photos, {report["earlier_shards"]} earlier shards of ~{report["records_per_shard"]} records '
        f'(--target_shard_mb={report["options"]["target_shard_mb"]}); change: +{change["added"]} added, '
        f'-{change["removed"]} removed, {change["replaced"]} replaced; median of {report["repeat"]} rounds, '
        'order alternating')
  print(f'   {"run":<34}{"wall s":>9}{"CPU s":>9}{"peak MB":>9}')
  print(f'   {"incremental update":<34}{summary["update_wall_s"]:>9.1f}{summary["update_cpu_s"]:>9.1f}'
        f'{summary["update_pss_mb"]:>9.0f}')
  print(f'   {"fresh conversion of the same input":<34}{summary["full_wall_s"]:>9.1f}{summary["full_cpu_s"]:>9.1f}'
        f'{summary["full_pss_mb"]:>9.0f}')
  aim = 'met' if summary['meets_aim'] else 'MISSED'
  print(f'update/full: wall {summary["wall_ratio"]:.2f}x (aim <= {AIM}: {aim}), '
        f'CPU {summary["cpu_ratio"]:.2f}x; per round: '
        + ', '.join(f'{r["wall_ratio"]:.2f}/{r["cpu_ratio"]:.2f} ({r["order"][0]} first)' for r in report['rounds']))
  shards = report['rounds'][0]['shards']
  print(f'earlier shards untouched: {shards["untouched"]} of {shards["earlier_shards"]} ({shards["untouched_pct"]}%; '
        f'about {report["expected_untouched_pct"]}% expected of random removals at this shard size), '
        f'{shards["byte_identical"]} byte-identical, {len(shards["rewritten"])} rewritten, {len(shards["gone"])} gone, '
        f'{len(shards["new"])} new; {len(report["dirty_shards"])} held a removed or replaced file; '
        f'catalog files untouched: {shards["catalogs_untouched"]}')
  section = dict(report['rounds'][0]['update_section'])
  section['written_files'] = len(section.get('written_files') or [])  # their names are in the results file
  print(f'update section: {json.dumps(section)}')
  c = report['rounds'][0]['check']
  print(f'read back: {c["records"]} records against {c["records_fresh"]} fresh, pairs equal: {c["pairs_equal"]}, '
        f'errors equal: {c["errors_equal"]}')
  unchanged = report['no_change']
  print(f'nothing changed: {unchanged["run"]["wall_s"]:.2f} s wall, {unchanged["run"]["cpu_s"]:.2f} s CPU; the listing '
        f'alone {unchanged["listing"]["wall_s"]:.2f} s; {unchanged["over_listing_s"]:.2f} s more than the listing '
        f'(aim <= 2); output untouched: {unchanged["untouched"]}; it said: {unchanged["said"]}')
  for problem in summary['problems']:
    print(f'!! {problem}')


# A fresh process: benchmarks.stages.timed_run starts the workers' server before Beam is imported.
STAGES = ('import os, sys\n'
          'from benchmarks import stages\n'
          'code = stages.timed_run(sys.argv[1:])\n'
          'sys.stdout.flush()\n'
          'os._exit(code)\n')


def stages(args: argparse.Namespace) -> int:
  """Where an update's time goes, stage by stage (as benchmarks.stages times a conversion): the
  update of a copy of the output and input a run of this benchmark left in its scratch folder."""
  scratch = SCRATCH / f'incremental-{args.images}'
  if not (scratch / 'base' / 'beam_pipeline.json').exists():
    raise SystemExit(f'run python -m benchmarks.incremental --images {args.images} first: {scratch}/base is missing')
  output = scratch / 'stages-update'
  shutil.rmtree(output, ignore_errors=True)
  shutil.copytree(scratch / 'base', output)
  argv = converter(scratch / 'input', output, args)[3:]
  code = subprocess.run([sys.executable, '-c', STAGES, *argv], cwd=REPO, check=False).returncode
  shutil.rmtree(output, ignore_errors=True)
  return code


def main(argv: Optional[List[str]] = None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  if '--commit' in argv:  # its options are commit_scale's (--repeat too)
    from benchmarks import commit_scale  # pylint: disable=import-outside-toplevel
    return commit_scale.main([arg for arg in argv if arg != '--commit'])
  parser = argparse.ArgumentParser(prog='python -m benchmarks.incremental', description=__doc__.split('\n\n')[0])
  parser.add_argument('--images', type=int, default=20000, help='size of the photo set (default 20000)')
  parser.add_argument('--repeat', type=int, default=3, help='rounds of update and fresh conversion (default 3)')
  parser.add_argument('--target-shard-mb', type=float, default=2, help='--target_shard_mb of every run (default 2)')
  parser.add_argument('--splits', default='train=0.8,validation=0.1,test=0.1')
  parser.add_argument('--check-every', action='store_true', help='read back every round, not only the first')
  parser.add_argument('--keep', action='store_true', help='keep the last round\'s outputs')
  parser.add_argument('--commit', action='store_true', help='measure the commit at scale instead '
                      '(benchmarks/commit_scale.py; its own options follow)')
  parser.add_argument('--stages', action='store_true', help="where an update's time goes, stage by stage, on "
                      'what an earlier run of this benchmark left (its base output and changed input)')
  args = parser.parse_args(argv)
  if args.stages:
    return stages(args)
  RESULTS.mkdir(parents=True, exist_ok=True)
  report = bench(args)
  summary = summarize(report)
  report['summary'] = summary
  print_report(report, summary)
  destination = RESULTS / f'incremental-{args.images}.json'
  destination.write_text(json.dumps(report, indent=2) + '\n')
  print(f'results: {destination.relative_to(REPO)}')
  return 1 if [p for p in summary['problems'] if not p.startswith('(')] else 0


if __name__ == '__main__':
  sys.exit(main())
