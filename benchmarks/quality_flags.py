"""The statistics image_quality flags from, measured on plain photos and on images made to
have each flag: what its thresholds are set between.

Usage: python -m benchmarks.quality_flags [--photos 100]

Every image goes through preparation.prepare_images, as in a conversion. Printed per set:
each statistic's minimum, median and maximum, and the share of images raising each flag;
then the sharpness of a few photos stored at several sizes, as JPEG and as PNG, against
their 1024-pixel PNG's: how far it holds across sizes and decodes.
The makers here (dark, light, blurred, blank, two_tone, text_page, gray_as_rgb) are the
tests' too.
"""
import argparse
import io
import random
from typing import Callable, Dict, List

import numpy as np
from PIL import Image, ImageDraw, ImageEnhance, ImageFilter

from benchmarks import natural_photos, photo_set, sample_set
from beam_pipeline.core.images import image_quality, preparation


def encode(image: Image.Image, fmt: str = 'JPEG', **params) -> bytes:
  buffer = io.BytesIO()
  image.save(buffer, fmt, **({'quality': 90} if fmt == 'JPEG' and not params else params))
  return buffer.getvalue()


def dark(image: Image.Image) -> Image.Image:
  """Under-exposed: at 30% of its brightness."""
  return ImageEnhance.Brightness(image).enhance(0.3)


def light(image: Image.Image) -> Image.Image:
  """Over-exposed: its levels squeezed into the top twenty-fifth."""
  return Image.eval(image, lambda level: 245 + level * 10 // 255)


def blurred(image: Image.Image, share: float = 0.08) -> Image.Image:
  """Out of focus: a Gaussian blur of ``share`` of its width."""
  return image.filter(ImageFilter.GaussianBlur(image.width * share))


def gray_as_rgb(image: Image.Image) -> Image.Image:
  return image.convert('L').convert('RGB')


def blank(seed: int, width: int = 800, height: int = 600) -> Image.Image:
  """One colour, with a little sensor noise."""
  rng = np.random.default_rng([0xB1, seed])
  pixels = np.full((height, width, 3), rng.integers(0, 256, 3), np.float32) + rng.normal(0, 3, (height, width, 1))
  return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def two_tone(seed: int, width: int = 800, height: int = 600) -> Image.Image:
  """A flat disc on a flat ground."""
  rng = np.random.default_rng([0x22, seed])
  image = Image.new('RGB', (width, height), tuple(int(c) for c in rng.integers(0, 256, 3)))
  ImageDraw.Draw(image).ellipse((width // 4, height // 6, 3 * width // 4, 5 * height // 6),
                                fill=tuple(int(c) for c in rng.integers(0, 256, 3)))
  return image


def text_page(seed: int) -> Image.Image:
  """A white page of small black text."""
  rng = random.Random(seed)
  image = Image.new('RGB', (800, 1000), 'white')
  draw = ImageDraw.Draw(image)
  for line in range(30):
    draw.text((50, 40 + line * 30), ''.join(rng.choice('abcdefghij ') for _ in range(60)), fill='black')
  return image


def _sepia(image: Image.Image) -> Image.Image:
  gray = image.convert('L')
  return Image.merge('RGB', [gray.point(lambda level, f=f: min(255, int(level * f))) for f in (1.07, 0.74, 0.43)])


def sets(photos: int) -> Dict[str, List[bytes]]:
  """Each set's files, by name."""
  plain = [natural_photos.photo(seed, *natural_photos.size(seed, (480, 1280))) for seed in range(photos)]
  rng = random.Random(1)
  made: Dict[str, Callable[[Image.Image], Image.Image]] = {
      'dark': dark, 'light': light, 'blurred 2%': lambda image: blurred(image, 0.02), 'blurred 4%':
      lambda image: blurred(image, 0.04), 'blurred 8%': blurred, 'gray as RGB': gray_as_rgb,
      'a tenth of its colour': lambda image: ImageEnhance.Color(image).enhance(0.1), 'sepia': _sepia}
  return {
      'photos (natural_photos)': [encode(image) for image in plain],
      'PetImages-like (photo_set)': [encode(photo_set.photo(np.random.default_rng(i), 500, 375, 2.0), quality=85)
                                     for i in range(photos)],
      'sample_set': [encode(sample_set.synthetic_photo(rng, rng.randrange(200, 400), rng.randrange(200, 400)))
                     for _ in range(photos)],
      **{name: [encode(make(image)) for image in plain] for name, make in made.items()},
      'gray as RGB, PNG': [encode(gray_as_rgb(image), 'PNG') for image in plain[:photos // 4]],
      'blank': [encode(blank(seed)) for seed in range(photos // 4)],
      'two-tone': [encode(two_tone(seed)) for seed in range(photos // 4)],
      'text page': [encode(text_page(seed)) for seed in range(photos // 4)],
  }


def sharpness_by_size(photos: int = 3, sizes=(2048, 1024, 512, 384, 256)) -> List[str]:
  """Lines of a table: each photo's sharpness at each size and format, as a share of its 1024-pixel PNG's."""
  lines = ['| photo | ' + ' | '.join(f'{fmt} {size}' for size in sizes for fmt in ('JPEG', 'PNG')) + ' |',
           '| --- ' * (2 * len(sizes) + 1) + '|']
  for seed in range(photos):
    photo = natural_photos.photo(seed, 2048, 1536)
    files = [encode(photo.resize((size, size * 3 // 4), Image.LANCZOS), fmt)
             for size in sizes for fmt in ('JPEG', 'PNG')]
    sharpness = [result.info.statistics.sharpness for result in preparation.prepare_images(files, 10**8)]
    reference = sharpness[2 * sizes.index(1024) + 1]
    lines.append(f'| {seed} | ' + ' | '.join(f'{value / reference:.2f}' for value in sharpness) + ' |')
  return lines


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--photos', type=int, default=100)
  args = parser.parse_args()
  names = image_quality.Statistics._fields
  flags = (image_quality.DARK, image_quality.LIGHT, image_quality.BLURRY, image_quality.LOW_INFORMATION,
           image_quality.GRAYSCALE_AS_RGB)
  print('| set | n | ' + ' | '.join(f'{name} (min / median / max)' for name in names) + ' | flagged |')
  print('| --- ' * (len(names) + 3) + '|')
  for name, datas in sets(args.photos).items():
    infos = [result.info for result in preparation.prepare_images(datas, 10**8)]
    values = np.array([info.statistics for info in infos])
    raised = [image_quality.flags(info.statistics, info.height, info.width, info.channels) for info in infos]
    shares = ', '.join(f'{flag} {sum(flag in r for r in raised) / len(raised):.0%}' for flag in flags
                       if any(flag in r for r in raised))
    print(f'| {name} | {len(infos)} | ' + ' | '.join(
        f'{column.min():.3g} / {np.median(column):.3g} / {column.max():.3g}' for column in values.T) +
          f' | {shares or "none"} |')
  print()
  print('\n'.join(sharpness_by_size()))


if __name__ == '__main__':
  main()
