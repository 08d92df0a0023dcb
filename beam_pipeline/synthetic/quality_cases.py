"""Images made to raise each of image_quality's flags (dark, light, blurred, gray stored as RGB,
blank, two-tone, a text page): what the flags' thresholds are set between, and what the tests
check each flag on.
"""
import random

import numpy as np
from PIL import Image, ImageDraw, ImageEnhance, ImageFilter

from beam_pipeline.synthetic import image_files


def encode(image: Image.Image, fmt: str = 'JPEG', **params) -> bytes:
  """``image`` as a file, a JPEG of quality 90 unless told otherwise."""
  return image_files.encode(image, fmt, **({'quality': 90} if fmt == 'JPEG' and not params else params))


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


def sepia(image: Image.Image) -> Image.Image:
  gray = image.convert('L')
  return Image.merge('RGB', [gray.point(lambda level, f=f: min(255, int(level * f))) for f in (1.07, 0.74, 0.43)])
