"""Synthetic photos for the tests, made one way: benchmarks.sample_set's busy pictures.

Pixels follow the seed; the noise layer does not (Pillow's effect_noise is unseeded),
so two calls give different bytes, as two photos would.
"""
import os
import random
from pathlib import Path
from typing import Dict, List, Mapping, Sequence, Tuple, Union

from PIL import Image

from benchmarks.sample_set import encode, synthetic_photo

__all__ = ['encode', 'image', 'jpeg', 'jpegs', 'labelled', 'write_files']


def image(seed: int = 1, width: int = 48, height: int = 40, mode: str = 'RGB') -> Image.Image:
  return synthetic_photo(random.Random(seed), width, height, mode)


def jpeg(seed: int = 1, width: int = 48, height: int = 40, quality: int = 85) -> bytes:
  return encode(image(seed, width, height), 'JPEG', quality=quality)


def jpegs(count: int, seed: int = 0, size: Tuple[int, int] = (48, 40),
          qualities: Sequence[int] = (70, 90)) -> List[bytes]:
  """``count`` JPEGs of one size, of varied quality, as a camera folder would hold."""
  rng = random.Random(seed)
  return [encode(synthetic_photo(rng, *size), 'JPEG', quality=rng.choice(qualities)) for _ in range(count)]


def labelled(classes: Sequence[str], per_class: int, seed: int = 0, size: Tuple[int, int] = (48, 40),
             name: str = '{label}/{label}.{i}.jpg') -> Dict[str, bytes]:
  """{relative path: JPEG bytes}, ``per_class`` photos per class, listed class by class."""
  photos = iter(jpegs(len(classes) * per_class, seed, size))
  return {name.format(label=label, i=i): next(photos) for label in classes for i in range(per_class)}


def write_files(root: Union[str, Path], files: Mapping[str, bytes]) -> None:
  """Writes {relative path: bytes} under ``root``, making directories as needed."""
  for name, data in files.items():
    path = os.path.join(root, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'wb') as f:
      f.write(data)
