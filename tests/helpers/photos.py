"""Synthetic photos for the tests, made one way: synthetic.sample_set's busy pictures.

Pixels follow the seed, the noise layer included: Pillow's Image.effect_noise is
unseeded (its generator's state carries over from every image made before in the
process), so while a photo is made here (``seeded_noise``) it draws its noise from a
numpy Generator seeded with the photo's own parameters. A photo's bytes thus depend
only on its seed, size and position in its sequence, never on which tests ran before.
"""
import contextlib
import hashlib
import os
import random
import threading
from pathlib import Path
from typing import Dict, Iterator, List, Mapping, Sequence, Tuple, Union

import numpy as np
from PIL import Image

from beam_pipeline.synthetic import sample_set
from beam_pipeline.synthetic.image_files import encode

__all__ = ['encode', 'image', 'jpeg', 'jpegs', 'labelled', 'seeded_noise', 'write_files', 'write_sample_set']

_NOISE_LOCK = threading.Lock()


def _noise(size: Tuple[int, int], sigma: float) -> Image.Image:
  """What Image.effect_noise gives (Gaussian grey noise around 128), seeded with its arguments:
  the size and the standard deviation the photo drew from its own seeded random.Random."""
  seed = int.from_bytes(hashlib.sha256(repr((tuple(size), float(sigma))).encode()).digest()[:8], 'little')
  width, height = size
  values = np.random.default_rng(seed).normal(128.0, sigma, (height, width))
  return Image.fromarray(np.clip(np.rint(values), 0, 255).astype(np.uint8), 'L')


@contextlib.contextmanager
def seeded_noise() -> Iterator[None]:
  """Within the block, Image.effect_noise (which sample_set.synthetic_photo calls) is seeded."""
  with _NOISE_LOCK:
    original = Image.effect_noise
    Image.effect_noise = _noise
    try:
      yield
    finally:
      Image.effect_noise = original


def synthetic_photo(rng: random.Random, width: int, height: int, mode: str = 'RGB') -> Image.Image:
  with seeded_noise():
    return sample_set.synthetic_photo(rng, width, height, mode)


def write_sample_set(directory: str, **kwargs) -> int:
  """sample_set.write_sample_set (the set `make run` converts), its noise seeded."""
  with seeded_noise():
    return sample_set.write_sample_set(directory, **kwargs)


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
