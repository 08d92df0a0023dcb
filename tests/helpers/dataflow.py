"""The command on DataflowRunner, offline (dataflow_offline.py), and what its runs must show."""
import gzip
import json
import struct
import subprocess
import sys
from typing import Dict, Iterable, Iterator, Sequence

from tensorflow.core.example import example_pb2

from helpers.commands import ROOT, TIMEOUT

OPTIONS = ('--runner=DataflowRunner', '--project=test-project', '--region=us-central1', '--temp_location=gs://stage/tmp')
OFFLINE = str(ROOT / 'tests' / 'helpers' / 'dataflow_offline.py')
JOB_ID = '2026-11-24_00_00_00-1234567890123456789'


def run_offline(*args: object, entry: Sequence[str] = ('-m', 'beam_pipeline')) -> subprocess.CompletedProcess:
  """``python -m beam_pipeline ARGS`` (or an entry file's), as DataflowRunner has Dataflow run it."""
  return subprocess.run([sys.executable, OFFLINE, *entry, *map(str, args)], cwd=ROOT, capture_output=True,
                        text=True, timeout=TIMEOUT, check=False)


def assert_submitted_as_airflow_expects(result: subprocess.CompletedProcess) -> None:
  """The job id, in Beam's own log lines (Airflow's Beam operator reads it there) and in the
  console link the command prints; none of the Dataflow client's other chatter."""
  assert f'Created job with id: [{JOB_ID}]' in result.stderr
  assert f'Submitted job: {JOB_ID}' in result.stderr
  assert (f'Dataflow job {JOB_ID}: https://console.cloud.google.com/dataflow/jobs/us-central1/{JOB_ID}'
          f'?project=test-project') in result.stdout
  assert 'Create job: <' not in result.stderr and 'Staging' not in result.stderr


def _records(data: bytes) -> Iterator[bytes]:
  """The records of TFRecord bytes (length, its CRC, data, its CRC; the CRCs not checked here)."""
  at = 0
  while at < len(data):
    length, = struct.unpack('<Q', data[at:at + 8])
    yield data[at + 12:at + 12 + length]
    at += 16 + length
  assert at == len(data), 'a TFRecord file cut short'


def assert_every_input_accounted_for(files: Dict[str, bytes], inputs: Iterable[str]) -> None:
  """Every input listed is written once, rejected once or skipped once as no image, nothing else:
  the records' image/filename and the errors file's uris together are ``inputs`` exactly, and
  beam_pipeline.json counts them."""
  info = json.loads(files['beam_pipeline.json'])
  written = []
  for split in info['splits'].values():
    for shard in split['shards']:
      data = files[shard['file']]
      data = gzip.decompress(data) if info['compression'] == 'gzip' else data
      uris = [example_pb2.Example.FromString(record).features.feature['image/filename'].bytes_list.value[0].decode()
              for record in _records(data)]
      assert len(uris) == shard['num_examples'], shard
      written += uris
  rejected = [json.loads(line)['uri'] for name, data in files.items() if name.startswith('errors-')
              for line in data.decode().splitlines()]
  inputs = sorted(inputs)
  assert sorted(written + rejected) == inputs, 'inputs lost, invented or accounted twice'
  skipped = info.get('num_skipped') or 0
  assert (info['num_examples'], info['num_errors'] + skipped) == (len(written), len(rejected))
  assert info['num_examples'] + info['num_errors'] + skipped == len(inputs)
