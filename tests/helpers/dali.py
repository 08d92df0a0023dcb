"""NVIDIA DALI, in its own environment (.venv-dali, which `make dali` builds: its pins are not
TensorFlow's), reading an output as its users do: fn.readers.tfrecord with the index files
the conversion wrote, and the CPU decoder."""
import json
import os
import subprocess
from typing import Dict, List, Tuple

from helpers.commands import ROOT

PYTHON = os.path.join(ROOT, '.venv-dali', 'bin', 'python')
_READ = '''
import json, sys
from nvidia.dali import fn, pipeline_def, types
import nvidia.dali.tfrecord as tfrec
out = sys.argv[1]
with open(out + '/beam_pipeline.json') as f:
    shards = [shard for split in json.load(f)['splits'].values() for shard in split['shards']]

@pipeline_def(batch_size=1, num_threads=1, device_id=None, exec_dynamic=True)  # CPU only
def read():
    record = fn.readers.tfrecord(
        path=[out + '/' + s['file'] for s in shards], index_path=[out + '/' + s['index_file'] for s in shards],
        features={'image/encoded': tfrec.FixedLenFeature((), tfrec.string, ''),
                  'image/filename': tfrec.FixedLenFeature((), tfrec.string, ''),
                  'image/height': tfrec.FixedLenFeature([1], tfrec.int64, -1),
                  'image/width': tfrec.FixedLenFeature([1], tfrec.int64, -1)})
    image = fn.decoders.image(record['image/encoded'], device='cpu', output_type=types.RGB)
    return image, record['image/filename'], record['image/height'], record['image/width']

pipe = read()
pipe.build()
sizes = {}
for _ in range(sum(shard['num_examples'] for shard in shards)):
    image, name, height, width = (output.as_array()[0] for output in pipe.run())
    sizes[bytes(name).decode()] = [list(image.shape[:2]), [int(height[0]), int(width[0])]]
print(json.dumps(sizes))
'''


def installed() -> bool:
  return os.path.exists(PYTHON)


def decoded_sizes(out: str) -> Dict[str, Tuple[List[int], List[int]]]:
  """{image/filename: ([height, width] DALI decoded, [height, width] recorded)} of every record of
  the output ``out``, converted with --index_files; fails if DALI fails on any record."""
  result = subprocess.run([PYTHON, '-c', _READ, str(out)], capture_output=True, text=True, check=False, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.splitlines()[-1])
