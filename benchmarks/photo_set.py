"""A PetImages-like photo set, generated once per size and cached under work/bench-data/<n>/.

Throughput depends on what the files are like, so the set copies the Microsoft PetImages
mix: two class folders, 200-500 px per side, JPEG qualities 60-95, some progressive and
grayscale JPEGs, ~5% PNG and ~1% damaged files. Grain and blotches make the JPEGs about as
large as real pet photos (~17 KB on average); flat synthetic pictures would compress to a
few KB and flatter every reader. Every file depends only on (seed, index), so the set is
the same on every machine and whichever worker draws it.
"""
import io
import json
import multiprocessing
import os
import shutil
import time
from pathlib import Path
from typing import Any, Dict, Tuple

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

ROOT = Path(__file__).resolve().parents[1] / 'work' / 'bench-data'
FORMAT_VERSION = 1  # bump when the generator changes, so cached sets are rebuilt
CLASSES = ('Cat', 'Dog')
MARKER = 'complete.json'  # written last, next to (not inside) the image folder
HTML_404 = b'<!DOCTYPE html><html><head><title>404 Not Found</title></head><body>Not Found</body></html>\n'


def photo(rng: np.random.Generator, width: int, height: int, grain: float) -> Image.Image:
  """Smooth colour field, soft-edged shapes, blotchy texture and sensor-like grain."""
  image = Image.fromarray(rng.integers(0, 256, (3, 4, 3), dtype=np.uint8)).resize((width, height), Image.BICUBIC)
  draw = ImageDraw.Draw(image)
  for _ in range(rng.integers(5, 15)):
    x, y = rng.integers(0, width), rng.integers(0, height)
    box = (x, y, x + rng.integers(10, width // 2), y + rng.integers(10, height // 2))
    shape = draw.ellipse if rng.random() < 0.6 else draw.rectangle
    shape(box, fill=tuple(int(c) for c in rng.integers(0, 256, 3)))
  pixels = np.asarray(image.filter(ImageFilter.BoxBlur(1)), dtype=np.float32)
  blotches = rng.integers(0, 256, (height // 12 + 1, width // 12 + 1), dtype=np.uint8)
  blotches = np.asarray(Image.fromarray(blotches).resize((width, height), Image.BICUBIC), np.float32)
  pixels += (blotches[..., None] - 128) * 0.25
  if grain:  # mostly luminance, like sensor noise
    pixels += rng.standard_normal((height, width, 1), np.float32) * grain
    pixels += rng.standard_normal((height, width, 3), np.float32) * (grain / 3)
  return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def _file(seed: int, index: int) -> Tuple[str, str, bytes]:
  """(relative path, kind, bytes) of file number `index`."""
  rng = np.random.default_rng([seed, index])
  width, height = (int(v) for v in rng.integers(200, 501, 2))
  quality, roll = int(rng.integers(60, 96)), rng.random()
  folder, stem = CLASSES[index % 2], index // 2
  if roll < 0.05:  # PNG: half full-colour, half palette (as web graphics often are)
    image = photo(rng, width, height, grain=0)
    kind, data = 'png', _encode(image if rng.random() < 0.5 else image.quantize(64), 'PNG')
    return f'{folder}/{stem}.png', kind, data
  image = photo(rng, width, height, grain=rng.uniform(1.0, 3.5))
  if roll < 0.06:  # damaged: truncated download, empty file, or an error page saved as .jpg
    kind = ('truncated', 'empty', 'html')[int(rng.integers(3))]
    jpeg = _encode(image, 'JPEG', quality=quality)
    data = {'truncated': jpeg[:int(len(jpeg) * rng.uniform(0.2, 0.8))], 'empty': b'', 'html': HTML_404}[kind]
  elif roll < 0.09:
    kind, data = 'grayscale', _encode(image.convert('L'), 'JPEG', quality=quality)
  elif roll < 0.19:
    kind, data = 'progressive', _encode(image, 'JPEG', quality=quality, progressive=True)
  else:
    kind, data = 'jpeg', _encode(image, 'JPEG', quality=quality)
  return f'{folder}/{stem}.jpg', kind, data


def _encode(image: Image.Image, fmt: str, **params: Any) -> bytes:
  buffer = io.BytesIO()
  image.save(buffer, fmt, **params)
  return buffer.getvalue()


def _write(job: Tuple[str, int, int]) -> Tuple[str, int]:
  images, seed, index = job
  name, kind, data = _file(seed, index)
  with open(os.path.join(images, name), 'wb') as f:
    f.write(data)
  return kind, len(data)


def ensure(n: int, seed: int = 0, root: Path = ROOT) -> Tuple[Path, Dict[str, Any]]:
  """The image folder of an n-file set and its stats, generating it unless a complete copy is cached."""
  base, images = root / str(n), root / str(n) / 'PetImages'
  marker = base / MARKER
  if marker.exists():
    stats = json.loads(marker.read_text())
    if stats.get('format_version') == FORMAT_VERSION and stats.get('seed') == seed:
      return images, dict(stats, cached=True)
  shutil.rmtree(base, ignore_errors=True)
  for folder in CLASSES:
    (images / folder).mkdir(parents=True)
  start = time.perf_counter()
  kinds: Dict[str, int] = {}
  total = jpeg_bytes = jpegs = 0
  with multiprocessing.Pool(os.cpu_count()) as pool:
    for kind, size in pool.imap_unordered(_write, ((str(images), seed, i) for i in range(n)), chunksize=64):
      kinds[kind] = kinds.get(kind, 0) + 1
      total += size
      if kind in ('jpeg', 'progressive', 'grayscale'):
        jpegs, jpeg_bytes = jpegs + 1, jpeg_bytes + size
  stats = {'format_version': FORMAT_VERSION, 'seed': seed, 'num_files': n, 'kinds': dict(sorted(kinds.items())),
           'total_bytes': total, 'mean_jpeg_bytes': round(jpeg_bytes / max(jpegs, 1)),
           'generation_seconds': round(time.perf_counter() - start, 1)}
  marker.write_text(json.dumps(stats, indent=2) + '\n')
  return images, dict(stats, cached=False)


if __name__ == '__main__':
  import sys
  folder, info = ensure(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
  print(folder, json.dumps(info))
