"""The two baselines the converter is measured against.

decode_limit: every core does nothing but read and fully decode each file with Pillow,
as fast as that goes: 64 files per task (fewer round trips to the pool than 16 gave,
10-15% faster), and a pixel limit above every photo's, so Pillow never takes its
decompression-bomb warning path. No converter that validates by decoding can beat
it, so converter/limit is the overhead.

SEEDS_LOOP: the one-process TensorFlow loop users write by hand today (the "seeds"
script). It runs as its own `python -c` process, so its TensorFlow import counts.

floor: the least CPU an image costs a converter that checks it with TensorFlow and
writes it: every core reads each file, decodes it as validation does (a JPEG at 1/8
scale, entropy-decoding every coefficient; anything else whole) and frames it as a
one-feature Example with TensorFlow's TFRecordWriter. No hashing, no planning, no
Beam: what the converter's CPU per image is measured against.
"""
import glob
import json
import os
import sys
import time
import multiprocessing
from multiprocessing import Pool
from typing import Dict, List, Tuple

from PIL import Image


def list_files(root: str) -> List[str]:
  """Every file one folder below root (root/<class>/<file>), sorted, as both baselines read them."""
  return sorted(glob.glob(os.path.join(root, '*', '*')))


def _decodes(path: str) -> bool:
  try:
    with open(path, 'rb') as f, Image.open(f) as image:
      image.load()
    return True
  except Exception:  # damaged files are skipped, as the converter rejects them
    return False


# Files per task, and Pillow's pixel limit in the decoding processes (its default is 89.5 million).
CHUNK_SIZE, MAX_IMAGE_PIXELS = 64, 90_000_000


def _no_warning_path() -> None:
  Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS


def decode_limit(root: str, workers: int = 0, chunksize: int = CHUNK_SIZE) -> Dict[str, float]:
  """Decodes every file under root with `workers` processes (default: every core); counts and seconds."""
  paths = list_files(root)
  start = time.perf_counter()
  with Pool(workers or os.cpu_count(), initializer=_no_warning_path) as pool:
    decoded = sum(pool.imap_unordered(_decodes, paths, chunksize=chunksize))
  return {'decoded': decoded, 'failed': len(paths) - decoded, 'inner_seconds': round(time.perf_counter() - start, 3)}


FLOOR_CHUNK = 256  # files per task (the converter's listing batch), one TFRecord file each
_floor_shapes = None


def _start_floor_worker(cores) -> None:
  """TensorFlow imported, its decoding traced once, and a core of its own, as a converter worker has."""
  global _floor_shapes
  os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  try:
    os.sched_setaffinity(0, {cores.get()})
  except (AttributeError, OSError):
    pass

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
  def shapes(datas):
    def decoded(index, data):
      return index, tf.cond(tf.strings.substr(data, 0, 2) == b'\xff\xd8',
                            lambda: tf.shape(tf.io.decode_jpeg(data, channels=0, ratio=8)),
                            lambda: tf.shape(tf.io.decode_image(data, channels=0, expand_animations=False)))
    ok = tf.data.Dataset.from_tensor_slices((tf.range(tf.size(datas)), datas)).map(decoded).ignore_errors()
    marker = tf.data.Dataset.from_tensors((tf.constant(-1), tf.constant([-1, -1, -1])))
    return ok.concatenate(marker).batch(tf.size(datas, out_type=tf.int64) + 1).get_single_element()[0]
  _floor_shapes = shapes


def _floor_chunk(job: Tuple[int, List[str], str]) -> int:
  """Decodes a chunk of files in one call of a traced tf.data pipeline, as validation does
  (per-file eager calls would cost more in dispatch than a small JPEG's decode), and frames
  the files that decoded."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  index, paths, output = job
  contents = []
  for path in paths:
    with open(path, 'rb') as f:
      contents.append(f.read())
  decoded = [position for position in _floor_shapes(tf.constant(contents)).numpy().tolist() if position >= 0]
  with tf.io.TFRecordWriter(os.path.join(output, f'floor-{index:05d}.tfrecord')) as writer:
    for position in decoded:
      feature = tf.train.Feature(bytes_list=tf.train.BytesList(value=[contents[position]]))
      writer.write(tf.train.Example(features=tf.train.Features(feature={'image/encoded': feature}))
                   .SerializeToString())
  return len(decoded)


def floor(root: str, output: str, workers: int = 0) -> Dict[str, float]:
  """Decodes and frames every file under root in ``workers`` processes (default: every core)."""
  paths = list_files(root)
  os.makedirs(output, exist_ok=True)
  jobs = [(index, paths[start:start + FLOOR_CHUNK], output)
          for index, start in enumerate(range(0, len(paths), FLOOR_CHUNK))]
  start = time.perf_counter()
  context = multiprocessing.get_context('spawn')  # TensorFlow in each worker, none in this process
  cores, usable = context.SimpleQueue(), sorted(os.sched_getaffinity(0))
  count = workers or len(usable)
  for index in range(count):
    cores.put(usable[index % len(usable)])
  with context.Pool(count, initializer=_start_floor_worker, initargs=(cores,)) as pool:
    written = sum(pool.imap_unordered(_floor_chunk, jobs))
  return {'written': written, 'skipped': len(paths) - written, 'inner_seconds': round(time.perf_counter() - start, 3)}


# Run as: python -c SEEDS_LOOP <image root> <output .tfrecord>. Prints a JSON summary line.
SEEDS_LOOP = r'''
import glob, json, os, sys
import tensorflow as tf

root, output = sys.argv[1], sys.argv[2]
written = skipped = 0
with tf.io.TFRecordWriter(output) as writer:
  for label, name in enumerate(sorted(os.listdir(root))):
    for path in sorted(glob.glob(os.path.join(root, name, '*'))):
      raw = tf.io.read_file(path)
      try:
        tf.image.decode_image(raw)
      except Exception:
        skipped += 1
        continue
      example = tf.train.Example(features=tf.train.Features(feature={
          'image_raw': tf.train.Feature(bytes_list=tf.train.BytesList(value=[raw.numpy()])),
          'label': tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
          'id': tf.train.Feature(bytes_list=tf.train.BytesList(value=[path.encode()])),
      }))
      writer.write(example.SerializeToString())
      written += 1
print(json.dumps({'written': written, 'skipped': skipped}))
'''


if __name__ == '__main__':
  # python -m benchmarks.baselines <image root> [files per task]: the decode limit as its own process;
  # python -m benchmarks.baselines --floor <image root> <output directory>: the floor.
  if sys.argv[1] == '--floor':
    print(json.dumps(floor(sys.argv[2], sys.argv[3])))
  else:
    print(json.dumps(decode_limit(sys.argv[1], chunksize=int(sys.argv[2]) if len(sys.argv) > 2 else CHUNK_SIZE)))
