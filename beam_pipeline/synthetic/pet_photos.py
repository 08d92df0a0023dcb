"""PetImages-like files: two class folders, 200-500 px per side, JPEG qualities 60-95, some
progressive and grayscale JPEGs, ~5% PNG and ~1% damaged files, as the Microsoft PetImages set
mixes them. Grain and blotches make the JPEGs about as large as real pet photos (~17 KB on
average); flat synthetic pictures would compress to a few KB and flatter every reader. Every
file depends only on (seed, index), so a set is the same on every machine and whichever worker
draws it.
"""
from typing import Tuple

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from beam_pipeline.synthetic.image_files import encode

CLASSES = ('Cat', 'Dog')
HTML_404 = b'<!DOCTYPE html><html><head><title>404 Not Found</title></head><body>Not Found</body></html>\n'


def photo(rng: np.random.Generator, width: int, height: int, grain: float) -> Image.Image:
  """Smooth colour field, soft-edged shapes, blotchy texture and sensor-like grain.

  Args:
    rng: the random numbers it is drawn from.
    width: its width in pixels.
    height: its height in pixels.
    grain: the sensor noise's standard deviation in levels; 0: none (as a PNG's drawing).
  """
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


def file_of(seed: int, index: int) -> Tuple[str, str, bytes]:
  """(relative path, kind, bytes) of file number `index`."""
  rng = np.random.default_rng([seed, index])
  width, height = (int(v) for v in rng.integers(200, 501, 2))
  quality, roll = int(rng.integers(60, 96)), rng.random()
  folder, stem = CLASSES[index % 2], index // 2
  if roll < 0.05:  # PNG: half full-colour, half palette (as web graphics often are)
    image = photo(rng, width, height, grain=0)
    kind, data = 'png', encode(image if rng.random() < 0.5 else image.quantize(64), 'PNG')
    return f'{folder}/{stem}.png', kind, data
  image = photo(rng, width, height, grain=rng.uniform(1.0, 3.5))
  if roll < 0.06:  # damaged: truncated download, empty file, or an error page saved as .jpg
    kind = ('truncated', 'empty', 'html')[int(rng.integers(3))]
    jpeg = encode(image, 'JPEG', quality=quality)
    data = {'truncated': jpeg[:int(len(jpeg) * rng.uniform(0.2, 0.8))], 'empty': b'', 'html': HTML_404}[kind]
  elif roll < 0.09:
    kind, data = 'grayscale', encode(image.convert('L'), 'JPEG', quality=quality)
  elif roll < 0.19:
    kind, data = 'progressive', encode(image, 'JPEG', quality=quality, progressive=True)
  else:
    kind, data = 'jpeg', encode(image, 'JPEG', quality=quality)
  return f'{folder}/{stem}.jpg', kind, data
