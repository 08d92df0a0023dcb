"""Cheap data-quality flags of an image, from statistics of the decode validation makes anyway:
too dark, too light, blurry, nearly blank, of an extreme shape, or gray stored as colour. A
flag says an image is worth a look, not that it is wrong; each is its own statistic's.

The statistics are taken on tensorflow_decoding's grid: perceptual_hash.SIDE cells a side,
each the mean of the decoded pixels under it, the image squashed to a square. The same photo
then gives nearly the same numbers whether it was decoded at 1/8 scale (a JPEG) or whole (a
PNG), large or small. A sharpness measured on the decoded pixels themselves would not: a
JPEG's 1/8-scale decode has averaged away the detail its PNG copy keeps, and a large photo
holds finer detail than a small one of the same scene. The grid's holds for PNGs of any
size and JPEGs of about 1,000 pixels a side or more; a smaller JPEG's decode, with only a
few pixels to a cell, reads less sharp. The price is that only blur at the grid's scale
shows, a few percent of the image's width or more. The statistics of a whole batch are taken at once
(numpy's calls per image would cost more than their work), each image's the same to the
last bit whatever batch it came in.

The thresholds start from cleanvision's defaults (cleanlab/cleanvision's
ImagePropertyIssueManager) and are set on our statistics; benchmarks/quality_flags.py
measures them on photos and on images made to have each flag (benchmarks/README.md,
Quality flags):

- DARK_HIGHLIGHTS: dark if even its 99th-percentile gray level is below this share of white
  (cleanvision's 0.37, for the 99th percentile of perceived brightness).
- LIGHT_SHADOWS: light if even its 5th-percentile gray level is above this share of white
  (cleanvision's 0.95, for the 5th percentile).
- BLURRY_SHARPNESS: blurry if the variance of its grid's 4-neighbour Laplacian, as a share of
  the variance of the grid itself, is below this. cleanvision thresholds the spread of an
  edge filter on the image shrunk to 64 pixels a side, in levels, where low contrast reads
  as blur (an over-exposed photo, a dim one, a page of text, a soft texture); a share of the
  image's own variance is the same at any contrast, so the value is ours: under every plain,
  dark or light photo and text page measured, over every photo blurred by a Gaussian of a
  twelfth of its width and half of those blurred by a twenty-fifth. Lighter blur does not
  show on the grid.
- LOW_INFORMATION_BITS: nearly blank if the entropy of its 256-level gray histogram is
  below this many bits. cleanvision's is 3 bits of Pillow's entropy over every pixel; a
  cell mean holds less noise than a pixel, so the same image measures fewer bits here. Set
  between blank or two-tone images and a page of text. A sharp texture finer than a grid cell
  (wood grain, thin tile outlines) reads as nearly blank too: its cells' means are as even as a
  blank page's (benchmarks/README.md, Quality flags: precision 67% on its labelled sets).
- EXTREME_ASPECT: if its shorter side is under this share of its longer one, about 1:2.9
  (cleanvision's odd aspect ratio).
- GRAYSCALE_SPREAD: gray stored as colour if its cells' channels differ by less than this
  share of the range on average: a colour JPEG or PNG of a gray picture decodes to equal
  channels. Set well under a photo with a tenth of its saturation left; cleanvision only
  asks whether the mode is L.
"""
import functools
from typing import NamedTuple, Optional, Sequence, Tuple

import numpy as np

DARK_HIGHLIGHTS = 0.37
LIGHT_SHADOWS = 0.95
BLURRY_SHARPNESS = 0.05
LOW_INFORMATION_BITS = 2.0
# An image is featureless (featureless) if its gray histogram holds under this many bits: at most
# about 4% of its grid's cells off one level (1 cell of 1,024 makes 0.011 bits, 40 make 0.23).
FEATURELESS_BITS = 0.25
EXTREME_ASPECT = 0.35
GRAYSCALE_SPREAD = 0.01

DARK, LIGHT, BLURRY, LOW_INFORMATION, EXTREME_ASPECT_FLAG, GRAYSCALE_AS_RGB = (
    'dark', 'light', 'blurry', 'low_information', 'extreme_aspect', 'grayscale_as_rgb')
# Every flag, in the order the option table lists them (option_table.QUALITY_FLAGS, held to this by a test).
FLAGS = (DARK, LIGHT, BLURRY, LOW_INFORMATION, EXTREME_ASPECT_FLAG, GRAYSCALE_AS_RGB)


_LEVELS = 256


class Statistics(NamedTuple):
  """What is measured of a decoded image (statistics), in this order; levels as shares of white."""
  brightness: float  # mean gray level
  shadows: float  # 5th-percentile gray level
  highlights: float  # 99th-percentile gray level
  sharpness: float  # variance of the Laplacian of the gray grid, as a share of the grid's variance
  entropy: float  # of the 256-level gray histogram, in bits
  colour_spread: float  # mean over the grid of its channels' max - min; 0 with fewer than 3 channels


def statistics(grids: np.ndarray, gray: np.ndarray, channels: np.ndarray) -> np.ndarray:
  """(n, 6) values in Statistics' order, of images given as their (n, side, side, depth) grids
  of levels 0-255 (depth the most channels of any; an image of fewer has zeros past its own),
  the gray levels of those grids (perceptual_hash.thumbnails) and their own channel counts."""
  count, side, _ = gray.shape
  cells = side * side
  levels = np.clip(gray, 0, _LEVELS - 1).astype(np.intp).reshape(count, cells)
  levels += _LEVELS * np.arange(count)[:, None]
  histograms = np.bincount(levels.ravel(), minlength=count * _LEVELS).reshape(count, _LEVELS)
  # Of counts c over n cells, sum((c/n) log2(n/c)) is log2(n) - sum(c log2 c)/n: a look-up a
  # level where the shares would take a division, a log and a product.
  entropy = np.log2(cells) - _count_log_counts(cells)[histograms].sum(axis=1) / cells
  below = np.cumsum(histograms, axis=1)
  shadows = np.argmax(below >= 0.05 * cells, axis=1) / (_LEVELS - 1)
  highlights = np.argmax(below >= 0.99 * cells, axis=1) / (_LEVELS - 1)
  laplacian = 4 * gray[:, 1:-1, 1:-1]
  for neighbour in (gray[:, :-2, 1:-1], gray[:, 2:, 1:-1], gray[:, 1:-1, :-2], gray[:, 1:-1, 2:]):
    laplacian -= neighbour
  colour_spread = np.zeros(count)
  if grids.shape[3] >= 3:
    red, green, blue = grids[:, :, :, 0], grids[:, :, :, 1], grids[:, :, :, 2]
    spread, least = np.maximum(red, green), np.minimum(red, green)
    np.maximum(spread, blue, out=spread)
    spread -= np.minimum(least, blue, out=least)
    colour_spread = np.where(np.asarray(channels) >= 3, spread.mean(axis=(1, 2)) / 255, 0.0)
  # Past a level squared: the few levels of noise of a nearly flat image are no detail to scale up.
  sharpness = laplacian.var(axis=(1, 2)) / np.maximum(gray.var(axis=(1, 2)), 1.0)
  return np.stack([gray.mean(axis=(1, 2)) / 255, shadows, highlights, sharpness, entropy, colour_spread], axis=1)


@functools.lru_cache(maxsize=None)
def _count_log_counts(cells: int) -> np.ndarray:
  """c log2 c for every count c a level may have of ``cells`` cells (0 for none)."""
  counts = np.arange(cells + 1, dtype=np.float64)
  return counts * np.log2(np.maximum(counts, 1))


def featureless(statistics: Sequence[float]) -> bool:
  """Whether an image of these statistics (Statistics' values) has no layout for a perceptual
  hash to see: nearly every cell of its grid at one gray level (FEATURELESS_BITS). A nearly
  blank image with a mark on it (low_information, a box on a plain background, a line of text
  on a page) still has one."""
  return Statistics(*statistics).entropy < FEATURELESS_BITS


def flags(statistics: Optional[Statistics], height: int, width: int, channels: int) -> Tuple[str, ...]:
  """The sorted names of the flags an image of this shape and these statistics raises.

  Args:
    statistics: of its stored pixels (ImageInfo.statistics); None where none were measured, which raises only
      extreme_aspect.
    height: the stored image's height in pixels.
    width: the stored image's width in pixels.
    channels: the stored image's channels as decoded: one of fewer than 3 is never grayscale_as_rgb.
  """
  raised = {EXTREME_ASPECT_FLAG: min(height, width) < EXTREME_ASPECT * max(height, width)}
  if statistics is not None:
    raised.update({DARK: statistics.highlights < DARK_HIGHLIGHTS,
                   LIGHT: statistics.shadows > LIGHT_SHADOWS,
                   BLURRY: statistics.sharpness < BLURRY_SHARPNESS,
                   LOW_INFORMATION: statistics.entropy < LOW_INFORMATION_BITS,
                   GRAYSCALE_AS_RGB: channels >= 3 and statistics.colour_spread < GRAYSCALE_SPREAD})
  return tuple(sorted(name for name, is_raised in raised.items() if is_raised))
