"""Images made to raise each of image_quality's flags (dark, light, blurred, gray stored as RGB,
blank, two-tone, a text page), and sharp ones of low contrast that must not read as blurred:
what the flags' thresholds are set between, and what the tests check each flag on.
"""
import math
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


def texture(seed: int, width: int = 800, height: int = 600) -> Image.Image:
  """A sharp pattern of low contrast finer than the flags' grid (a 32nd of the image): an even
  seed's a wood grain (stripes of 20 levels, 3 pixels apart), an odd one's thin hexagon
  outlines 14 levels above a brown ground, as in photos of wood or tiles that cleanvision calls
  blurry."""
  rng = np.random.default_rng([0x7E, seed])
  if seed % 2 == 0:
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    grain = np.sin((x + 30 * np.sin(y / 57 + seed)) / 3.1) * 10 + rng.normal(0, 2, (height, width))
    return Image.fromarray(np.clip(np.stack([150 + grain, 105 + 0.8 * grain, 60 + 0.6 * grain], -1), 0, 255)
                           .astype(np.uint8))
  level, side = int(rng.integers(100, 170)), 14
  ground = (level, int(level * 0.85), int(level * 0.7))
  image = Image.new('RGB', (width, height), ground)
  draw = ImageDraw.Draw(image)
  rise = side * math.sqrt(3)
  for row in range(int(height / rise) + 2):
    for column in range(int(width / (1.5 * side)) + 2):
      x, y = column * 1.5 * side, row * rise + (rise / 2 if column % 2 else 0)
      draw.polygon([(x + side * math.cos(math.pi / 3 * k), y + side * math.sin(math.pi / 3 * k)) for k in range(6)],
                   outline=tuple(channel + 14 for channel in ground))
  return image
