"""The statistics image_quality flags from, measured on plain photos and on images made to
have each flag: what its thresholds are set between.

Usage: python -m benchmarks.quality_flags [--photos 100]

Every image goes through preparation.prepare_images, as in a conversion. Printed per set:
each statistic's minimum, median and maximum, and the share of images raising each flag;
then each flag's recall and precision over the sets (LABELS: the flags a set is made to
raise, and those it must not; a flag a set is labelled with neither way is not counted
there); then the sharpness of a few photos stored at several sizes, as JPEG and as PNG,
against their 1024-pixel PNG's: how far it holds across sizes and decodes.
The images made to raise each flag are synthetic.quality_cases', which the tests check the
flags on too.
"""
import argparse
import random
from typing import Callable, Dict, FrozenSet, List, Sequence, Tuple

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
      'single channel': [encode(image.convert('L')) for image in plain[:photos // 4]],
      'low-contrast textures': [encode(cases.texture(seed)) for seed in range(photos // 4)],
  }


# The flags measured here, in the order the first table lists them (extreme_aspect is a shape's, not made here).
_MEASURED = _DARK, _LIGHT, _BLURRY, _LOW, _GRAY = (image_quality.DARK, image_quality.LIGHT, image_quality.BLURRY,
                                                   image_quality.LOW_INFORMATION, image_quality.GRAYSCALE_AS_RGB)
_ALL = frozenset(_MEASURED)
# Per set: the flags its images are made to raise, and those they must not. A blank image of a
# dark colour is dark, a squeezed light photo nearly gray: such flags are counted neither way.
LABELS: Dict[str, Tuple[FrozenSet[str], FrozenSet[str]]] = {
    'photos (natural_photos)': (frozenset(), _ALL),
    'PetImages-like (pet_photos)': (frozenset(), _ALL),
    'sample_set': (frozenset(), _ALL),
    'dark': (frozenset({_DARK}), frozenset({_LIGHT, _BLURRY, _LOW, _GRAY})),
    'light': (frozenset({_LIGHT}), frozenset({_DARK, _BLURRY})),
    'blurred 2%': (frozenset({_BLURRY}), frozenset({_DARK, _LIGHT, _LOW, _GRAY})),
    'blurred 4%': (frozenset({_BLURRY}), frozenset({_DARK, _LIGHT, _LOW, _GRAY})),
    'blurred 8%': (frozenset({_BLURRY}), frozenset({_LIGHT, _LOW, _GRAY})),
    'gray as RGB': (frozenset({_GRAY}), frozenset({_DARK, _LIGHT, _BLURRY, _LOW})),
    'a tenth of its colour': (frozenset(), _ALL),
    'sepia': (frozenset(), _ALL),
    'gray as RGB, PNG': (frozenset({_GRAY}), frozenset({_DARK, _LIGHT, _BLURRY, _LOW})),
    'blank': (frozenset({_LOW}), frozenset({_BLURRY})),
    'two-tone': (frozenset({_LOW}), frozenset({_BLURRY})),
    'text page': (frozenset({_GRAY}), frozenset({_DARK, _BLURRY, _LOW})),
    'single channel': (frozenset(), _ALL),
    'low-contrast textures': (frozenset(), frozenset({_LIGHT, _BLURRY, _LOW, _GRAY})),
}


def precision_and_recall(raised: Dict[str, Sequence[Tuple[str, ...]]]) -> List[str]:
  """Lines of a table: each flag's images labelled to raise it that do (recall) and its raised
  flags that are labelled so (precision), from each set's images' flags."""
  lines = ['| flag | labelled to raise it | recall | labelled not to | raised there | precision |',
           '| --- | --- | --- | --- | --- | --- |']
  for flag in sorted(_ALL):
    found = missed = wrong = negatives = 0
    for name, flags in raised.items():
      made, must_not = LABELS[name]
      hits = sum(flag in image for image in flags)
      if flag in made:
        found, missed = found + hits, missed + len(flags) - hits
      elif flag in must_not:
        wrong, negatives = wrong + hits, negatives + len(flags)
    precision = f'{found / (found + wrong):.1%}' if found + wrong else '-'
    lines.append(f'| {flag} | {found + missed} | {found / max(1, found + missed):.1%} | {negatives} | {wrong} | '
                 f'{precision} |')
  return lines


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
  flags = _MEASURED
  print('| set | n | ' + ' | '.join(f'{name} (min / median / max)' for name in names) + ' | flagged |')
  print('| --- ' * (len(names) + 3) + '|')
  by_set = {}
  for name, datas in sets(args.photos).items():
    infos = [result.info for result in preparation.prepare_images(datas, 10**8)]
    values = np.array([info.statistics for info in infos])
    raised = by_set[name] = [image_quality.flags(info.statistics, info.height, info.width, info.channels)
                             for info in infos]
    shares = ', '.join(f'{flag} {sum(flag in r for r in raised) / len(raised):.0%}' for flag in flags
                       if any(flag in r for r in raised))
    print(f'| {name} | {len(infos)} | ' + ' | '.join(
        f'{column.min():.3g} / {np.median(column):.3g} / {column.max():.3g}' for column in values.T) +
          f' | {shares or "none"} |')
  print()
  print('\n'.join(precision_and_recall(by_set)))
  print()
  print('\n'.join(sharpness_by_size()))


if __name__ == '__main__':
  main()
