"""Near copies of a photo, of each kind a user makes: downscaled, re-compressed, stored as PNG,
brightened, cropped, mirrored (COPIES, which the converter's distance is chosen to find), and
cropped further (NOT_FOUND, measured to say what it misses); a gray copy (gray_copy). Each copy
is made from the original's bytes, as an editor would, and depends only on the original and its
seed. And pictures that are no copies of one another but look alike to a hash of gray levels:
two-colour gradients of random hues (hue_gradient).
"""
import colorsys
import io
from typing import Callable, Dict, List, Tuple

import numpy as np
from PIL import Image, ImageDraw, ImageEnhance

from beam_pipeline.synthetic import natural_photos
from beam_pipeline.synthetic.image_files import encode


def original(seed: int) -> bytes:
  """Photo ``seed`` as a camera stores it."""
  rng = np.random.default_rng([0x0C, seed])
  width, height = natural_photos.size(seed, (480, 1280))
  return encode(natural_photos.photo(seed, width, height), 'JPEG', quality=int(rng.integers(85, 96)))


def _cropped(image: Image.Image, rng: np.random.Generator, low: float, high: float) -> Image.Image:
  """``image`` with low-high of its width or height cut off each of some (one to four) of its sides.

  Args:
    image: the picture cropped.
    rng: the random numbers that choose the sides and the cuts.
    low: the smallest share of a side's dimension cut off.
    high: the largest.
  """
  sides = rng.permutation(4)[:rng.integers(1, 5)]
  cut = [rng.uniform(low, high) if side in sides else 0.0 for side in range(4)]  # left, top, right, bottom
  width, height = image.size
  return image.crop((round(cut[0] * width), round(cut[1] * height),
                     width - round(cut[2] * width), height - round(cut[3] * height)))


def _downscaled(image: Image.Image, rng: np.random.Generator) -> Image.Image:
  scale = rng.uniform(0.55, 0.85)
  return image.resize((round(image.width * scale), round(image.height * scale)), Image.LANCZOS)


def _jpeg(image: Image.Image, quality: int = 90) -> bytes:
  return encode(image, 'JPEG', quality=quality)


# Each kind of copy: from the original, decoded, and a generator of its own, the copy's bytes.
COPIES: Dict[str, Callable[[Image.Image, np.random.Generator], bytes]] = {
    'downscaled 55-85%': lambda image, rng: _jpeg(_downscaled(image, rng)),
    'JPEG quality 35-70': lambda image, rng: _jpeg(image, int(rng.integers(35, 71))),
    'PNG': lambda image, rng: encode(image, 'PNG', compress_level=1),
    'brightness +-8%': lambda image, rng: _jpeg(ImageEnhance.Brightness(image).enhance(rng.uniform(0.92, 1.08))),
    'cropped 1-3%': lambda image, rng: _jpeg(_cropped(image, rng, 0.01, 0.03)),
    'mirrored': lambda image, rng: _jpeg(image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)),
}
NOT_FOUND: Dict[str, Callable[[Image.Image, np.random.Generator], bytes]] = {
    'cropped 5-10%': lambda image, rng: _jpeg(_cropped(image, rng, 0.05, 0.10)),
    'cropped 10-20%': lambda image, rng: _jpeg(_cropped(image, rng, 0.10, 0.20)),
}


KINDS = {**COPIES, **NOT_FOUND}


def _watermarked(image: Image.Image) -> Image.Image:
  """``image`` with a stock photo's mark in its bottom right corner: a white box of a fifth of its
  width and a tenth of its height, and a line of text on it."""
  marked = image.copy()
  draw = ImageDraw.Draw(marked)
  width, height = marked.size
  draw.rectangle([round(width * 0.78), round(height * 0.88), round(width * 0.98), round(height * 0.97)], fill='white')
  draw.text((round(width * 0.8), round(height * 0.9)), '(c) stock', fill='black')
  return marked


# More kinds a user makes, which the peers' comparison (benchmarks/near_copy_peers.py) also counts.
MORE: Dict[str, Callable[[Image.Image, np.random.Generator], bytes]] = {
    'JPEG quality 20': lambda image, rng: _jpeg(image, 20),
    'WebP': lambda image, rng: encode(image, 'WEBP', quality=80),
    'downscaled to 30%': lambda image, rng: _jpeg(image.resize((max(1, image.width * 3 // 10),
                                                                max(1, image.height * 3 // 10)), Image.LANCZOS)),
    'corner watermark': lambda image, rng: _jpeg(_watermarked(image)),
    'straightened 3 degrees': lambda image, rng: _jpeg(image.rotate(float(rng.choice([-3, 3])), Image.BICUBIC)),
}


def copy(data: bytes, kind: str, seed: int) -> bytes:
  """A copy of the kind named (COPIES, NOT_FOUND or MORE) of the photo stored as ``data``."""
  every = {**KINDS, **MORE}
  with Image.open(io.BytesIO(data)) as image:
    return every[kind](image.convert('RGB'), np.random.default_rng([0xC0, seed, list(every).index(kind)]))


def gray_copy(data: bytes) -> bytes:
  """The photo stored as ``data`` turned gray and stored as an RGB JPEG, as an editor's
  "desaturate" leaves it."""
  with Image.open(io.BytesIO(data)) as image:
    return _jpeg(image.convert('L').convert('RGB'))


def hue_gradient(hues: Tuple[float, float], across: bool, width: int = 320, height: int = 240) -> bytes:
  """A JPEG of a gradient between two colours, left to right or top to bottom: gradients of one
  direction differ only in hue, and their gray levels, all a perceptual hash sees, rise or fall
  alike.

  Args:
    hues: the two colours' hues (0-1; saturation 0.8, value 0.9).
    across: left to right; else top to bottom.
    width: its width in pixels.
    height: its height in pixels.
  """
  ends = [np.array(colorsys.hsv_to_rgb(hue, 0.8, 0.9)) * 255 for hue in hues]
  steps = np.linspace(0, 1, width if across else height)
  ramp = steps[None, :, None] if across else steps[:, None, None]
  pixels = np.broadcast_to(ends[0] * (1 - ramp) + ends[1] * ramp, (height, width, 3))
  return _jpeg(Image.fromarray(pixels.astype(np.uint8)))


def hue_gradients(count: int) -> List[bytes]:
  """``count`` gradients (hue_gradient) whose first hues are spread evenly round the circle, each
  second hue a third of the way round from its first, half of each direction: no two of one
  picture, nor one the mirror image of another (as a second hue opposite the first would make
  the gradients from h to h + 1/2 and from h + 1/2 to h)."""
  return [hue_gradient((index / count, index / count + 1 / 3), across=index % 2 == 0) for index in range(count)]
