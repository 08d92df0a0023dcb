"""Times the converter against its baselines on one cached photo set, in one run.

  a  decode limit: every core only reads and decodes each file with Pillow
  b  the seeds' loop: one TensorFlow process, read + decode_image + TFRecordWriter
  c  the converter: python -m beam_pipeline ... --runner=DirectRunner, default options
  d  the converter storing training-sized JPEGs: --image_format=jpeg --max_side=512
  e  the converter with CNN embeddings: --embedding_model=EfficientNetB0 (benchmarks/embedding_model.py)
  f  the converter on the Dataflow-style path: Beam's own SDK worker processes
     (--direct_running_mode=multi_processing), the DoFns calling the core inline
  g  the floor: every core only decodes each file as validation does (TensorFlow, a
     JPEG at 1/8 scale) and frames it with TensorFlow's TFRecordWriter
  h  the converter with object-detection boxes: --annotations=a COCO file of 1-3 boxes
     per file (benchmarks/box_annotations.py)

Machines are noisy, so the verdicts are ratios of measurements taken side by side:
c/a (our overhead over pure decoding) and b/c (our speed-up over the hand-written loop).
Then c, f and g run at two sizes (--costs), which sets their CPU apart into a fixed
cost and a cost per image; f's per image must stay within 1.1x of c's, and both are
reported against the floor's (g), the least CPU an image can cost.
Each measurement is a whole child process: wall time includes start-up and imports. CPU
and memory cover every process of the run, the converter's workers included
(benchmarks.measure): memory is the peak of the processes' summed PSS (shared pages
split between them), with the largest single process and the plain RSS sum beside it.

Usage: python -m benchmarks.run [--images 2000] [--only a,b,c,d,e,f,g,h] [--repeat N] [--keep-output]
                                [--costs 2000,20000]
       python -m benchmarks.run --memory-scaling
"""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from benchmarks import baselines, box_annotations, embedding_model, photo_set

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / 'work' / 'bench-results'
SCRATCH = REPO / 'work' / 'bench-out'
NAMES = {'a': f'decode limit ({os.cpu_count()} procs)', 'b': "seeds' TF loop (1 proc)", 'c': 'converter (DirectRunner)',
         'd': 'converter, JPEG at 512 px', 'e': 'converter + EfficientNetB0', 'f': 'converter, Dataflow-style',
         'g': f'floor: TF decode + framing ({os.cpu_count()} procs)', 'h': 'converter + COCO boxes'}
CONVERTERS = {'c': [], 'd': ['--image_format=jpeg', '--max_side=512'], 'e': ['--embedding_model={model}'],
              'f': ['--direct_running_mode=multi_processing', f'--direct_num_workers={os.cpu_count()}'],
              'h': ['--annotations={annotations}']}
# ratio: (target, stretch, True if higher is better)
TARGETS = {'c/a': (1.3, 1.0, False), 'b/c': (2.0, 2.5, True)}
# The Dataflow-style path's CPU per image, at most this many times the local path's; and what
# both aim for against the floor's.
PER_IMAGE_LIMIT = 1.1
FLOOR_AIM = 1.15
MEMORY_SIZES, MEMORY_GROWTH_LIMIT, MEMORY_LIMIT_MB = (2000, 20000), 1.5, 1536


def run_child(argv: List[str], log: Path) -> Dict[str, Any]:
  """Runs argv to completion under benchmarks.measure: wall and CPU seconds, exit code, memory
  (of every process of the run, workers included) and its last stdout line."""
  measured = log.with_suffix('.json')
  with open(log.with_suffix('.out'), 'wb') as out, open(log.with_suffix('.err'), 'wb') as err:
    subprocess.run([sys.executable, '-m', 'benchmarks.measure', str(measured), *argv], stdout=out, stderr=err,
                   cwd=REPO, check=True)
  result = json.loads(measured.read_text())
  lines = log.with_suffix('.out').read_text(errors='replace').strip().splitlines()
  result['exit_code'] = result.pop('returncode')
  result['last_line'] = lines[-1] if lines else ''
  return result


def measure(which: str, images: Path, n: int, scratch: Path, keep_output: bool) -> Dict[str, Any]:
  """One run of a measurement (NAMES), with its own sanity figures."""
  converter = which in CONVERTERS
  output = scratch / (f'converter-{which}' if converter else 'floor' if which == 'g' else 'seeds.tfrecord')
  if converter:
    shutil.rmtree(output, ignore_errors=True)  # the converter wants a new or empty output
    model = embedding_model.ensure() if which == 'e' else None
    annotations = box_annotations.ensure(images) if which == 'h' else None
    argv = [sys.executable, '-m', 'beam_pipeline', f'--input={images}', f'--output={output}', '--runner=DirectRunner',
            *(arg.format(model=model, annotations=annotations) for arg in CONVERTERS[which])]
  else:
    shutil.rmtree(output, ignore_errors=True)
    argv = {'a': [sys.executable, '-m', 'benchmarks.baselines', str(images)],
            'b': [sys.executable, '-c', baselines.SEEDS_LOOP, str(images), str(output)],
            'g': [sys.executable, '-m', 'benchmarks.baselines', '--floor', str(images), str(output)]}[which]
  result = run_child(argv, scratch / which)
  result['images_per_s'] = round(n / result['wall_s'], 1)
  info_path = output / 'beam_pipeline.json'
  if result['exit_code'] == 0 and converter and not info_path.exists():
    result['error'] = f'exit code 0 but no {info_path}'
  elif result['exit_code'] != 0:
    err = (scratch / which).with_suffix('.err').read_text(errors='replace').strip().splitlines()
    result['error'] = '\n'.join(err[-15:])
  elif which in ('a', 'b', 'g'):
    result.update(json.loads(result['last_line']))
  else:
    info = json.loads(info_path.read_text())
    result.update(num_examples=info['num_examples'], num_errors=info['num_errors'],
                  errors_by_reason=info['errors_by_reason'],
                  output_mb=round(sum(split['num_bytes'] for split in info['splits'].values()) / 2**20, 1),
                  accounted_for_all=info['num_examples'] + info['num_errors'] == n)
    if not result['accounted_for_all']:
      print(f'\n!!!!! WARNING: converter accounted for {info["num_examples"]} examples + {info["num_errors"]} '
            f'errors = {info["num_examples"] + info["num_errors"]}, but the set holds {n} files !!!!!\n')
  if which == 'b':
    output.unlink(missing_ok=True)
  elif which == 'g' or (converter and not keep_output):
    shutil.rmtree(output, ignore_errors=True)
  del result['last_line']
  result['ok'] = 'error' not in result
  return result


def prepared(n: int) -> Tuple[Path, Dict[str, Any], Path]:
  """The photo set of ``n`` files, in the page cache so the first measurement is not
  penalised, its description, and the scratch directory of its runs."""
  images, data = photo_set.ensure(n)
  for path in baselines.list_files(str(images)):
    Path(path).read_bytes()
  scratch = SCRATCH / str(n)
  scratch.mkdir(parents=True, exist_ok=True)
  return images, data, scratch


def measured_round(which: str, images: Path, n: int, scratch: Path, keep_output: bool, label: str,
                   show_cpu: bool = False) -> Dict[str, Any]:
  """measure(), said on one line as it goes."""
  print(f'[{label}] {which}: {NAMES[which]} ...', end=' ', flush=True)
  result = measure(which, images, n, scratch, keep_output)
  if not result['ok']:
    print(f'FAILED (exit {result["exit_code"]})', flush=True)
  else:
    print(f'{result["wall_s"]:.2f} s' + (f', {result["cpu_s"]:.1f} s CPU' if show_cpu else ''), flush=True)
  return result


def bench(n: int, only: str, repeat: int, keep_output: bool) -> Dict[str, Any]:
  """Best of `repeat` for each measurement; rounds are interleaved so drift hits all alike."""
  images, data, scratch = prepared(n)
  print(f'set: {n} files in {images} ({"cached" if data["cached"] else "generated"}; '
        f'generation took {data["generation_seconds"]} s), mean JPEG {data["mean_jpeg_bytes"] / 1024:.1f} KB, '
        f'total {data["total_bytes"] / 2**20:.0f} MB, kinds {data["kinds"]}', flush=True)
  runs: Dict[str, List[Dict[str, Any]]] = {which: [] for which in only}
  for round_ in range(repeat):
    for which in only:
      runs[which].append(measured_round(which, images, n, scratch, keep_output and round_ == repeat - 1,
                                        f'{round_ + 1}/{repeat}'))
  best = {which: min(r, key=lambda x: (not x['ok'], x['wall_s'])) for which, r in runs.items()}
  ok = {which: r for which, r in best.items() if r['ok']}
  ratios = {}
  for name, (target, stretch, higher) in TARGETS.items():
    top, bottom = name.split('/')
    if top in ok and bottom in ok:
      value = ok[top]['wall_s'] / ok[bottom]['wall_s']
      meets = {limit: value >= limit if higher else value <= limit for limit in (target, stretch)}
      ratios[name] = {'value': round(value, 3), 'target': target, 'stretch': stretch,
                      'meets_target': meets[target], 'meets_stretch': meets[stretch]}
  return {'images': n, 'repeat': repeat, 'machine': machine(), 'data_set': data, 'best': best, 'runs': runs,
          'ratios': ratios, 'output': str(scratch / 'converter-c') if keep_output and 'c' in ok else None}


def machine() -> Dict[str, Any]:
  return {'cpu_count': os.cpu_count(), 'platform': platform.platform(), 'python': platform.python_version(),
          'time': time.strftime('%Y-%m-%dT%H:%M:%S%z')}


def print_report(report: Dict[str, Any]) -> None:
  print(f'\n{report["images"]} files, best of {report["repeat"]}')
  print(f'   {"measurement":<30}{"wall s":>9}{"CPU s":>8}{"images/s":>10}{"memory MB":>11}'
        f'{"largest process":>17}{"RSS sum":>9}')
  for which, r in report['best'].items():
    if r['ok']:
      print(f'{which}  {NAMES[which]:<30}{r["wall_s"]:>9.2f}{r["cpu_s"]:>8.1f}{r["images_per_s"]:>10.1f}'
            f'{r["peak_pss_mb"]:>11.0f}{r["max_process_rss_mb"]:>17.0f}{r["peak_rss_sum_mb"]:>9.0f}')
    else:
      print(f'{which}  {NAMES[which]:<30} FAILED (exit {r["exit_code"]}):\n{r["error"]}')
  for name, r in report['ratios'].items():
    sign = '>=' if TARGETS[name][2] else '<='
    verdict = 'stretch met' if r['meets_stretch'] else 'target met' if r['meets_target'] else 'TARGET MISSED'
    print(f'{name} = {r["value"]:.2f}   (target {sign} {r["target"]}, stretch {sign} {r["stretch"]}: {verdict})')
  ok = {which: r for which, r in report['best'].items() if r['ok']}
  if 'c' in ok:
    c = ok['c']
    print(f'converter: peak memory {c["peak_pss_mb"]:.0f} MB, {c["num_examples"]} examples, {c["num_errors"]} errors '
          f'{c["errors_by_reason"]}, {c["output_mb"]} MB written')
  if {'c', 'd'} <= ok.keys():
    d = ok['d']
    print(f'd/c: {d["images_per_s"] / c["images_per_s"]:.2f}x the images/s, {d["output_mb"] / c["output_mb"]:.2f}x '
          f'the bytes ({d["output_mb"]} MB against {c["output_mb"]} MB)')
  if {'c', 'e'} <= ok.keys():
    e = ok['e']
    print(f'e/c: {e["images_per_s"]:.1f} against {c["images_per_s"]:.1f} images/s with and without embeddings '
          f'({e["images_per_s"] / c["images_per_s"]:.2f}x); e: {e["cpu_s"] / e["num_examples"] * 1000:.1f} ms of CPU '
          f'per image, {e["output_mb"]} MB written')
  if {'c', 'h'} <= ok.keys():
    h = ok['h']
    print(f'h/c: {h["images_per_s"]:.1f} against {c["images_per_s"]:.1f} images/s with and without boxes '
          f'({h["images_per_s"] / c["images_per_s"]:.2f}x), {h["cpu_s"] / c["cpu_s"]:.2f}x the CPU, '
          f'{h["peak_pss_mb"] / c["peak_pss_mb"]:.2f}x the memory')
  if report.get('output'):
    print(f'converter output kept in {report["output"]}')


def memory_scaling(repeat: int) -> Dict[str, Any]:
  """The converter's peak memory at 2k and 20k files: it must stay flat as the input grows."""
  reports = {n: bench(n, 'c', repeat, keep_output=False) for n in MEMORY_SIZES}
  for report in reports.values():
    print_report(report)
  small, large = (reports[n]['best']['c'] for n in MEMORY_SIZES)
  summary: Dict[str, Any] = {'memory_mb': {n: reports[n]['best']['c']['peak_pss_mb'] for n in MEMORY_SIZES},
                             'reports': reports}
  if small['ok'] and large['ok']:
    growth = large['peak_pss_mb'] / small['peak_pss_mb']
    summary.update(growth=round(growth, 3), meets_growth=growth <= MEMORY_GROWTH_LIMIT,
                   meets_limit=large['peak_pss_mb'] <= MEMORY_LIMIT_MB)
    print(f'\nmemory {MEMORY_SIZES[1]} / {MEMORY_SIZES[0]} = '
          f'{large["peak_pss_mb"]:.0f} / {small["peak_pss_mb"]:.0f} MB '
          f'= {growth:.2f}  (limit {MEMORY_GROWTH_LIMIT}: {"ok" if summary["meets_growth"] else "EXCEEDED"}; '
          f'{MEMORY_LIMIT_MB} MB at {MEMORY_SIZES[1]}: {"ok" if summary["meets_limit"] else "EXCEEDED"})')
  return summary


def costs(sizes: List[int], repeat: int, measured: Dict[str, Any]) -> Dict[str, Any]:
  """CPU of c (local path), f (Dataflow-style path) and g (the floor) at two sizes, set apart
  into a fixed cost and a cost per image (a line through the two), with wall time and peak
  memory. ``measured``: a report of bench() whose runs of c, f and g at its size are reused."""
  runs: Dict[str, Dict[int, List[Dict[str, Any]]]] = {'c': {}, 'f': {}, 'g': {}}
  for which in 'cfg':
    if measured.get('images') in sizes and measured['runs'].get(which):
      runs[which][measured['images']] = list(measured['runs'][which])
  for n in sizes:
    images, _, scratch = prepared(n)
    for round_ in range(repeat):
      for which in 'cfg':
        if len(runs[which].setdefault(n, [])) > round_:
          continue
        runs[which][n].append(measured_round(which, images, n, scratch, False, f'costs {n}, {round_ + 1}/{repeat}',
                                             show_cpu=True))
  small, large = sizes
  model: Dict[str, Any] = {'sizes': sizes, 'paths': {}}
  for which in 'cfg':
    ok = {n: [r for r in runs[which][n] if r['ok']] for n in sizes}
    if not all(ok.values()):
      model['paths'][which] = {'ok': False}
      continue
    # Each size's least CPU: noise only ever adds to it.
    best = {n: min(ok[n], key=lambda r: r['cpu_s']) for n in sizes}
    per_image = (best[large]['cpu_s'] - best[small]['cpu_s']) / (large - small)
    model['paths'][which] = {
        'ok': True, 'per_image_ms': round(per_image * 1000, 3),
        'fixed_cpu_s': round(best[small]['cpu_s'] - small * per_image, 2),
        'by_size': {n: {'wall_s': min(r['wall_s'] for r in ok[n]), 'cpu_s': best[n]['cpu_s'],
                        'peak_pss_mb': max(r['peak_pss_mb'] for r in ok[n])} for n in sizes}}
  if model['paths']['c'].get('ok') and model['paths']['f'].get('ok'):
    ratio = model['paths']['f']['per_image_ms'] / model['paths']['c']['per_image_ms']
    model['f/c per image'] = {'value': round(ratio, 3), 'limit': PER_IMAGE_LIMIT, 'meets': ratio <= PER_IMAGE_LIMIT}
  if model['paths']['g'].get('ok'):
    for which in 'cf':
      if model['paths'][which].get('ok'):
        ratio = model['paths'][which]['per_image_ms'] / model['paths']['g']['per_image_ms']
        model[f'{which}/g per image'] = {'value': round(ratio, 3), 'aim': FLOOR_AIM, 'meets': ratio <= FLOOR_AIM}
  return model


def print_costs(model: Dict[str, Any]) -> None:
  small, large = model['sizes']
  print('\nCPU set apart (least CPU of each size; wall best of its runs; memory the peak summed PSS)')
  print(f'   {"path":<30}{"fixed CPU s":>12}{"ms/image":>10}{"wall " + str(small):>12}{"wall " + str(large):>12}'
        f'{"MB " + str(small):>10}{"MB " + str(large):>10}')
  for which, path in model['paths'].items():
    if not path['ok']:
      print(f'{which}  {NAMES[which]:<30} FAILED')
      continue
    sizes = path['by_size']
    print(f'{which}  {NAMES[which]:<30}{path["fixed_cpu_s"]:>12.2f}{path["per_image_ms"]:>10.3f}'
          f'{sizes[small]["wall_s"]:>12.2f}{sizes[large]["wall_s"]:>12.2f}'
          f'{sizes[small]["peak_pss_mb"]:>10.0f}{sizes[large]["peak_pss_mb"]:>10.0f}')
  if 'f/c per image' in model:
    ratio = model['f/c per image']
    print(f'f/c CPU per image = {ratio["value"]:.2f}   (limit <= {ratio["limit"]}: '
          f'{"ok" if ratio["meets"] else "EXCEEDED"})')
  for which in 'cf':
    if f'{which}/g per image' in model:
      ratio = model[f'{which}/g per image']
      print(f'{which}/g CPU per image = {ratio["value"]:.2f}   (against the floor; aim <= {ratio["aim"]}: '
            f'{"met" if ratio["meets"] else "not met"})')


def main(argv: Optional[List[str]] = None) -> int:
  parser = argparse.ArgumentParser(prog='python -m benchmarks.run', description=__doc__.split('\n\n')[0])
  parser.add_argument('--images', type=int, default=2000, help='size of the photo set (default 2000)')
  parser.add_argument('--only', default='a,b,c,d,e,h', help='comma-separated subset of a,b,c,d,e,f,g,h '
                      '(default a,b,c,d,e,h; f and g run with --costs)')
  parser.add_argument('--repeat', type=int, default=1, help='runs per measurement; the best counts (default 1)')
  parser.add_argument('--keep-output', action='store_true', help="keep the converter's output directory")
  parser.add_argument('--costs', default='2000,20000', help='two sizes to set c and f apart into fixed and '
                      "per-image CPU at (default 2000,20000); 'none' to skip")
  parser.add_argument('--memory-scaling', action='store_true',
                      help=f'run only the converter, at {MEMORY_SIZES[0]} and {MEMORY_SIZES[1]} files, '
                           'and compare peak memory')
  args = parser.parse_args(argv)
  only = [w.strip() for w in args.only.split(',') if w.strip()]
  if not only or set(only) - set(NAMES) or args.repeat < 1 or args.images < 1:
    parser.error('--only takes a comma-separated subset of a,b,c,d,e,f,g,h; --repeat and --images must be positive')
  cost_sizes = [] if args.costs == 'none' else [int(n) for n in args.costs.split(',')]
  if cost_sizes and (len(cost_sizes) != 2 or not 0 < cost_sizes[0] < cost_sizes[1]):
    parser.error("--costs takes two sizes, the smaller first (2000,20000), or 'none'")
  RESULTS.mkdir(parents=True, exist_ok=True)
  if args.memory_scaling:
    summary = memory_scaling(args.repeat)
    destination = RESULTS / 'memory-scaling.json'
    failed = 'growth' not in summary
  else:
    summary = bench(args.images, ''.join(only), args.repeat, args.keep_output)
    print_report(summary)
    failed = not all(r['ok'] for r in summary['best'].values())
    if cost_sizes:
      summary['costs'] = costs(cost_sizes, args.repeat, summary)
      print_costs(summary['costs'])
      failed = failed or not all(path['ok'] for path in summary['costs']['paths'].values())
    destination = RESULTS / f'{args.images}.json'
  destination.write_text(json.dumps(summary, indent=2) + '\n')
  print(f'results: {destination.relative_to(REPO)}')
  return 1 if failed else 0


if __name__ == '__main__':
  sys.exit(main())
