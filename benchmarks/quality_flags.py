"""The statistics image_quality flags from, measured on plain photos and on images made to
have each flag: what its thresholds are set between.

Usage: python -m benchmarks.quality_flags [--photos 100]

Every image goes through preparation.prepare_images, as in a conversion. Printed per set:
each statistic's minimum, median and maximum, and the share of images raising each flag;
then the sharpness of a few photos stored at several sizes, as JPEG and as PNG, against
their 1024-pixel PNG's: how far it holds across sizes and decodes.
The images made to raise each flag are synthetic.quality_cases', which the tests check the
flags on too.
"""
import argparse
import random
from typing import Callable, Dict, List

import numpy as np
from PIL import Image, ImageEnhance

from beam_pipeline.synthetic import natural_photos, pet_photos, quality_cases, sample_set
from beam_pipeline.core.images import image_quality, preparation


def sets(photos: int) -> Dict[str, List[bytes]]:
  """Each set's files, by name."""
  cases, encode = quality_cases, quality_cases.encode
  plain = [natural_photos.photo(seed, *natural_photos.size(seed, (480, 1280))) for seed in range(photos)]
  rng = random.Random(1)
  made: Dict[str, Callable[[Image.Image], Image.Image]] = {
      'dark': cases.dark, 'light': cases.light, 'blurred 2%': lambda image: cases.blurred(image, 0.02),
      'blurred 4%': lambda image: cases.blurred(image, 0.04), 'blurred 8%': cases.blurred,
      'gray as RGB': cases.gray_as_rgb, 'a tenth of its colour': lambda image: ImageEnhance.Color(image).enhance(0.1),
      'sepia': cases.sepia}
  return {
      'photos (natural_photos)': [encode(image) for image in plain],
      'PetImages-like (pet_photos)': [encode(pet_photos.photo(np.random.default_rng(i), 500, 375, 2.0), quality=85)
                                      for i in range(photos)],
      'sample_set': [encode(sample_set.synthetic_photo(rng, rng.randrange(200, 400), rng.randrange(200, 400)))
                     for _ in range(photos)],
      **{name: [encode(make(image)) for image in plain] for name, make in made.items()},
      'gray as RGB, PNG': [encode(cases.gray_as_rgb(image), 'PNG') for image in plain[:photos // 4]],
      'blank': [encode(cases.blank(seed)) for seed in range(photos // 4)],
      'two-tone': [encode(cases.two_tone(seed)) for seed in range(photos // 4)],
      'text page': [encode(cases.text_page(seed)) for seed in range(photos // 4)],
  }


def sharpness_by_size(photos: int = 3, sizes=(2048, 1024, 512, 384, 256)) -> List[str]:
  """Lines of a table: each photo's sharpness at each size and format, as a share of its 1024-pixel PNG's."""
  lines = ['| photo | ' + ' | '.join(f'{fmt} {size}' for size in sizes for fmt in ('JPEG', 'PNG')) + ' |',
           '| --- ' * (2 * len(sizes) + 1) + '|']
  for seed in range(photos):
    photo = natural_photos.photo(seed, 2048, 1536)
    files = [quality_cases.encode(photo.resize((size, size * 3 // 4), Image.LANCZOS), fmt)
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
