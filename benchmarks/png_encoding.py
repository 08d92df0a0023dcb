"""What storing a picture as PNG costs (issue 58): WebP, TIFF and other sources the stored-format
rule re-encodes losslessly as PNG, at each of Pillow's compression levels, with TensorFlow's
encoder and with the converter's own (core/images/formats/png_encoding.py: rows Up-filtered, ISA-L), on
photo-like pictures of 12 MP and 8K.

Usage: python -m benchmarks.png_encoding [--repeat 3]

The pictures are natural_photos' (pink-noise scenes with sensor grain, whose PNGs are as large
as photos'); each encoder runs ``--repeat`` times in this process, one core, and the best time
is kept. Prints the seconds, the megapixels a second and the size of each, beside level 6
(Pillow's default, which the converter used before it chose): results in
work/bench-results/png-encoding.json.
"""
import argparse
import functools
import io
import json
import sys
import time
from typing import Any, Dict, List

import numpy as np

from beam_pipeline.core.images.formats import png_encoding
from beam_pipeline.synthetic import natural_photos
from benchmarks.run import RESULTS

SIZES = {'12 MP (4000x3000)': (4000, 3000), '8K (7680x4320)': (7680, 4320)}


def _pillow(image, level: int) -> bytes:
  buffer = io.BytesIO()
  image.save(buffer, 'PNG', compress_level=level)
  return buffer.getvalue()


def _tensorflow_png(tf, pixels: np.ndarray, level: int) -> bytes:
  return tf.io.encode_png(pixels, level).numpy()


def measure(repeat: int) -> List[Dict[str, Any]]:
  from beam_pipeline.core.console import quiet_import  # pylint: disable=import-outside-toplevel
  tf = quiet_import.tensorflow()
  rows = []
  for name, (width, height) in SIZES.items():
    image = natural_photos.photo(7, width, height).convert('RGB')
    pixels = np.asarray(image)
    encoders = {f'Pillow level {level}': functools.partial(_pillow, image, level) for level in range(0, 10)}
    encoders.update({f'TensorFlow encode_png {level}': functools.partial(_tensorflow_png, tf, pixels, level)
                     for level in (1, 6)})
    encoders[f'png_encoding (Up, ISA-L) {png_encoding.LEVEL}'] = functools.partial(png_encoding.encoded, image)
    for encoder, encode in encoders.items():
      best, size = float('inf'), 0
      for _ in range(repeat):
        started = time.perf_counter()
        size = len(encode())
        best = min(best, time.perf_counter() - started)
      rows.append({'picture': name, 'encoder': encoder, 'seconds': round(best, 3),
                   'megapixels_per_s': round(width * height / 1e6 / best, 1), 'mib': round(size / 2**20, 1)})
      print(f'{name:<20} {encoder:<26} {best:7.3f} s {width * height / 1e6 / best:7.1f} MP/s '
            f'{size / 2**20:7.1f} MiB', flush=True)
  return rows


def main() -> int:
  parser = argparse.ArgumentParser(prog='python -m benchmarks.png_encoding', description=__doc__.splitlines()[0])
  parser.add_argument('--repeat', type=int, default=3)
  args = parser.parse_args()
  rows = measure(args.repeat)
  RESULTS.mkdir(parents=True, exist_ok=True)
  (RESULTS / 'png-encoding.json').write_text(json.dumps({'rows': rows}, indent=2) + '\n')
  return 0


if __name__ == '__main__':
  sys.exit(main())
