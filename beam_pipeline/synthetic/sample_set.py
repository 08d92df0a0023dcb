"""A small built-in photo set for ``make run``: two classes, odd formats, damaged files.

Usage: python -m beam_pipeline.synthetic.sample_set <directory>
"""
import os
import random
import sys

from PIL import Image, ImageDraw

from beam_pipeline.synthetic.image_files import encode


def synthetic_photo(rng: random.Random, width: int, height: int, mode: str = 'RGB') -> Image.Image:
  """A busy picture (gradient plus shapes) so JPEG sizes resemble real photos'.

  Args:
    rng: the random numbers it is drawn from.
    width: its width in pixels.
    height: its height in pixels.
    mode: its Pillow mode.
  """
  image = Image.linear_gradient('L').resize((width, height)).convert('RGB')
  draw = ImageDraw.Draw(image)
  for _ in range(12):
    x, y = rng.randrange(width), rng.randrange(height)
    draw.ellipse((x, y, x + rng.randrange(8, width // 2 + 9), y + rng.randrange(8, height // 2 + 9)),
                 fill=tuple(rng.randrange(256) for _ in range(3)))
  noise = Image.effect_noise((width, height), rng.uniform(10, 60)).convert('RGB')
  return Image.blend(image, noise, 0.25).convert(mode)


def write_sample_set(directory: str, per_class: int = 40, seed: int = 0) -> int:
  """Writes the set and returns how many files it holds."""
  rng = random.Random(seed)
  files = {}
  for label in ('cat', 'dog'):
    for i in range(per_class):
      photo = synthetic_photo(rng, rng.randrange(200, 400), rng.randrange(200, 400))
      files[f'{label}/{label}.{i}.jpg'] = encode(photo, 'JPEG', quality=rng.choice([75, 85, 95]))
  odd = synthetic_photo(rng, 120, 90)
  files['cat/grayscale.png'] = encode(odd.convert('L'), 'PNG')
  files['dog/scan.tiff'] = encode(odd, 'TIFF')
  files['dog/animated.gif'] = encode(odd.convert('P'), 'GIF', save_all=True,
                                     append_images=[odd.rotate(180).convert('P')])
  files['cat/truncated.jpg'] = files['cat/cat.0.jpg'][:2000]
  files['dog/not-really.jpg'] = b'<!DOCTYPE html><html><body>404 Not Found</body></html>'
  files['dog/Thumbs.db'] = bytes(rng.randrange(256) for _ in range(512))
  for name, data in files.items():
    path = os.path.join(directory, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'wb') as f:
      f.write(data)
  return len(files)


if __name__ == '__main__':
  target = sys.argv[1] if len(sys.argv) > 1 else 'work/sample-images'
  count = write_sample_set(target)
  print(f'Sample set: {count} files in {target}')
