"""Cloud Storage reads: sequential vs the converter's reader, against the local emulator.

Object reads are latency-bound (tens of ms each on real Cloud Storage). The
emulator answers in microseconds, so it runs behind the tests' fault proxy, which
delays every request by --latency_ms. Then the same objects are read one after
another, and through beam_pipeline.core.inputs.reading.read_files with --read_threads reads
in flight, as the validation and shard-writing steps do.

Usage: python -m benchmarks.storage [--objects 200] [--latency_ms 30] [--read_threads 32]
"""
import argparse
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'tests'))  # the emulator and proxy helpers live with the tests

from helpers import fault_proxy, gcs_emulator  # noqa: E402

BUCKET = 'bench'


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--objects', type=int, default=200)
  parser.add_argument('--latency_ms', type=float, default=30)
  parser.add_argument('--read_threads', type=int, default=32)
  args = parser.parse_args()

  with gcs_emulator.running_emulator() as emulator, fault_proxy.FaultProxy(emulator) as proxy, \
      tempfile.TemporaryDirectory() as scratch:
    os.environ.update(gcs_emulator.emulator_environment(proxy.url, scratch))
    # after the environment points at the proxy
    from beam_pipeline.pipeline.pooled_steps import open_image  # pylint: disable=import-outside-toplevel
    from beam_pipeline.core.inputs import reading  # pylint: disable=import-outside-toplevel

    payload = os.urandom(17_000)  # a pet-photo-sized object
    names = [f'imgs/{i:05d}.jpg' for i in range(args.objects)]
    gcs_emulator.create_bucket(BUCKET)
    gcs_emulator.upload(BUCKET, {name: payload for name in names})
    proxy.plan.slow(args.latency_ms / 1000)
    uris = [f'gs://{BUCKET}/{name}' for name in names]
    reading.read_file(uris[0], 2**20, open_image)  # warm up the client

    started = time.perf_counter()
    for uri in uris:
      reading.read_file(uri, 2**20, open_image)
    sequential = time.perf_counter() - started

    started = time.perf_counter()
    with ThreadPoolExecutor(args.read_threads) as pool:
      remote = reading.Remote(open_image, pool, args.read_threads)
      results = [data for _, data in reading.read_files(lambda u: reading.read_file(u, 2**20, remote.open), uris,
                                                         lambda u: u, remote)]
    concurrent = time.perf_counter() - started
    assert all(data == payload for data in results)

  print(f'{args.objects} objects of 17 KB, {args.latency_ms:g} ms added per request')
  print(f'sequential reads:        {sequential:6.2f} s  {args.objects / sequential:7.1f} objects/s')
  print(f'reader, {args.read_threads:2d} in flight:   {concurrent:6.2f} s  {args.objects / concurrent:7.1f} objects/s')
  print(f'speed-up: {sequential / concurrent:.1f}x')


if __name__ == '__main__':
  main()
