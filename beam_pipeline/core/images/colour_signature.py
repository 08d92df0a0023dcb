"""An image's colour signature: where the perceptual hash sees only gray levels, so that two
pictures that differ only in hue (a red-to-yellow and a blue-to-green gradient) hash alike,
this says which colours lie where, so that near-copy grouping can tell them apart
(near_copies.colours_apart).

From the same SIDE x SIDE grid of cell means the hash is made of, turned upright and mirrored
as the hash is (perceptual_hash.facing): the mean of two opponent channels, red - green and
(red + green) / 2 - blue, over each quarter of the picture (top left, top right, bottom left,
bottom right), each halved and rounded to a signed byte: 8 bytes, 16 hex digits
(near_copies.parse_colours reads them). A gray image's is all zeros; an image without colour
channels has none ('').
"""
from typing import List, Optional, Sequence

import numpy as np

from beam_pipeline.core.images import perceptual_hash

_QUARTERS = 2  # quarters per side
_STEP = 2.0  # levels per unit of a signature's byte: opponent means reach +-255


def signatures(grids: np.ndarray, channels: np.ndarray, orientations: Sequence[int],
               mirrored: Optional[Sequence[bool]] = None) -> List[str]:
  """16 hex digits for each image of at least three channels ('' for the others). The quarters'
  means of all at once; a turn or a mirror then moves a picture's four quarters as it moves its
  pixels.

  Args:
    grids: (n, SIDE, SIDE, depth) grids of levels 0-255 (perceptual_hash.thumbnails).
    channels: each image's channel count.
    orientations: the Exif orientation each is still to be turned upright by.
    mirrored: whether each is then mirrored (perceptual_hash.facing); None: none is.
  """
  if grids.shape[3] < 3:
    return [''] * len(grids)
  count, side = len(grids), grids.shape[1] // _QUARTERS
  # The opponents are sums of channels, so the quarters' channel means give their means. Summed
  # over each quarter's rows, then its columns: numpy reduces two axes at once far more slowly.
  rows = grids[..., :3].reshape(count * _QUARTERS, side, -1).sum(axis=1, dtype=np.float64)
  rgb = rows.reshape(count, _QUARTERS, _QUARTERS, side, 3).sum(axis=3) / (side * side)
  red, green, blue = rgb[..., 0], rgb[..., 1], rgb[..., 2]
  means = np.stack([red - green, (red + green) / 2 - blue], axis=-1)
  packed = np.clip(np.rint(means / _STEP), -127, 127).astype(np.int8)
  found = []
  mirrored = [False] * len(grids) if mirrored is None else mirrored
  for quarters, count, orientation, mirror in zip(packed, channels, orientations, mirrored):
    turned = perceptual_hash.upright(quarters, orientation)
    found.append((turned[:, ::-1] if mirror else turned).tobytes().hex() if count >= 3 else '')
  return found
