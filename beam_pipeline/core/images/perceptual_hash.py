"""A perceptual hash of an image in two 64-bit halves, so that near copies can be found:
the same photo re-saved, downscaled, brightened, trimmed or straightened a little hashes near
it (near: its blocks half within the distance, its DCT half within 2 bits more), and
other photos rarely do.

Both halves are of the image's coarse layout: its SIDE x SIDE grayscale thumbnail
(thumbnails: the gray of tensorflow_decoding's grid of cell means, the image squashed to a
square).

* The DCT half: the thumbnail through a 2-D DCT-II, of its 8x8 lowest frequencies each but the
  constant term (DC) gives a bit: 1 if above their median. DC is left out of the median and
  its bit is always 0: it is the mean brightness, which a brightened copy changes and which
  every photo has far above the median, so its bit would say nothing. Each bit is then as
  often 0 as 1, which is what makes the distance between unrelated photos large.
* The blocks half: the thumbnail's mean over each of 8x8 blocks, 1 if above their median.
  Where a crop of 5-10%, a corner watermark or a turn of a few degrees moves the DCT's
  frequencies past the distance, the blocks, each an eighth of the picture, change in a few
  bits; but alone they would join photos of one layout (a sky over a field) that the
  frequencies tell apart. So the grouping searches the blocks within the distance and
  confirms with the DCT within a few bits more (near_copies.DCT_MARGIN; benchmarks/README.md,
  Near copies).

A thumbnail whose pixels were not turned upright by their Exif orientation is turned
here first, so that a photo stored as the camera wrote it and a copy turned upright
hash alike. It is then mirrored where its right side outweighs its left (facing: the
first horizontal frequency of the DCT of its centre, which mirroring negates, made positive),
so that a mirrored copy hashes as its original: their layouts face one way. Its outer eighth
on each side is not weighed (CENTRE): a watermark, a date stamp or the corners a turn of a few
degrees fills lie there, and weighed with the rest they tipped a picture whose sides weigh
nearly alike the other way. The price is such a picture's copy that a re-save tips anyway
(benchmarks/README.md, Near copies). A copy cropped by more than 10% is still rarely found:
its layout has moved.

A featureless image (image_quality.featureless: one colour, or nearly) has no layout: its
coefficients and blocks are noise, so an all-black and an all-white frame would hash alike or
apart by chance. Both its halves are its brightness instead (flat): one of FLAT_LEVELS + 1
code words, one per level of brightness, each 6 bits from its neighbours', at least 12 from
any other and at least 22 from any DCT half. A downscaled or re-saved copy of a flat image
hashes as it does or as the next level; flat images two levels apart or more are not near (at
distances up to 10), nor is any picture with a layout; colours then tell apart those of one
brightness (colour_signature).
"""
from typing import List, Optional, Sequence, Tuple

import numpy as np

from beam_pipeline.core.planning import near_copies

SIDE = 32  # the thumbnail's, and the side of the grid validation's decode is summarized on
_KEPT = 8  # lowest frequencies kept on each axis: 64 bits
# Hamming distance up to which two hashes are of near copies: measured by
# benchmarks/near_copies.py (benchmarks/README.md, Near copies).
NEAR_DISTANCE = 10
# What the hash is, as a run record names it (run_record.NearDuplicates.hash): an update compares
# its new images' hashes with the catalog's only if the catalog's were made alike. 'dct64' (a run
# record without a name) was the hash before facing and flat, 'dct64-facing-flat' before blocks,
# 'dct64-blocks64-facing-flat' while the facing weighed the whole grid.
NAME = 'dct64-blocks64-centre-facing-flat'
# A flat image's hash by its brightness (flat), levels 0 (black) to FLAT_LEVELS (white): each has
# its DC bit and 52 of the 63 others set, where a DCT hash has 31 and DC's clear, so at least 22
# bits lie between one and any DCT hash. From one level to the next three of its 11 clear bits are
# set and three bits never clear before are cleared: neighbouring levels lie 6 bits apart, near at
# the distances used (6-10), so that a copy whose brightness crosses into the next level is still
# found; levels two or more apart lie 12 or more bits apart (tests/core/images/test_perceptual_hash.py
# holds them to it). Drawn once by random.Random(59), then written out here.
FLAT_LEVELS = 16
_FLAT = ('bbdf7efebfbcdfff', 'fbcf7ebfbfbc7fff', 'fbcd7fbfffbe6fef', 'ffe57fbffbfe6fe7', 'efe5fffff1ff6fe7',
         'eef7ffffe1ffede7', 'eefbbfffe1fbfdf7', 'eefbbbe7edfbfdff', 'defbabe7efebffff', 'dfffabe7ff6bffbb',
         'dfffebf5ff6ff73b', 'ffffefddff4ff33b', 'ff7effd9ff5ff33f', 'ff7effd97edff3fe', 'fd7ef75b7efffbfe',
         'fdbed77b7ef7fffe', 'fdbfd77f5ff7fefc')

# The first _KEPT rows of the DCT-II matrix of SIDE points (unnormalized: the bits only
# compare coefficients of one image with each other).
_COSINES = np.cos(np.pi * np.outer(np.arange(_KEPT), 2 * np.arange(SIDE) + 1) / (2 * SIDE))
# The rows and columns facing weighs: the grid but its outer eighth on each side, where watermarks,
# date stamps and a turn's filled corners lie (benchmarks/README.md, Near copies: weighed, they
# tipped 83 of 1,000 watermarked photos the other way, not weighed 3). Symmetric, so mirroring a
# picture mirrors its centre.
CENTRE = slice(SIDE // 8, SIDE - SIDE // 8)
_CENTRE_SIDE = CENTRE.stop - CENTRE.start
# Each cell's part in a thumbnail's balance: the first horizontal DCT frequency of the centre's.
_BALANCE = np.zeros((SIDE, SIDE))
_BALANCE[CENTRE, CENTRE] = np.cos(np.pi * (2 * np.arange(_CENTRE_SIDE) + 1) / (2 * _CENTRE_SIDE))
_BALANCE = _BALANCE.reshape(SIDE * SIDE)
# Sums each block's rows (or, transposed, its columns): 8x8 blocks of 4x4 cells, 64 bits. Two
# products, as the DCT's: numpy's sum over two axes of a reshaped array is several times slower.
_BLOCKS = np.kron(np.eye(_KEPT), np.ones(SIDE // _KEPT))

# The luma of ITU-R BT.601 (what Pillow's convert('L') uses), by channel count: gray (and
# gray+alpha) is the first channel; RGB and RGBA are weighed, alpha ignored.
_GRAY_WEIGHTS = np.array([[0, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0], [0.299, 0.587, 0.114, 0], [0.299, 0.587, 0.114, 0]],
                         np.float32)

# What each Exif orientation (2-8) does to turn the pixels upright, on an array of rows (and any
# channels after them: exif_orientation.TRANSPOSES, which Pillow applies).
_UPRIGHT = {2: lambda a: a[:, ::-1], 3: lambda a: a[::-1, ::-1], 4: lambda a: a[::-1, :], 5: lambda a: a.swapaxes(0, 1),
            6: lambda a: np.rot90(a, -1), 7: lambda a: a[::-1, ::-1].swapaxes(0, 1), 8: lambda a: np.rot90(a, 1)}


def thumbnails(grids: np.ndarray, channels: np.ndarray) -> np.ndarray:
  """The (n, SIDE, SIDE) gray levels of images given as (n, SIDE, SIDE, depth) grids of levels
  0-255, depth the most channels of any (an image of fewer has zeros past its own), and
  their own channel counts (1-4). Channel by channel, in one order: an image's thumbnail is
  the same to the last bit whatever batch it came in."""
  weights = _GRAY_WEIGHTS[np.asarray(channels)]
  gray = np.zeros(grids.shape[:3], np.float32)
  for channel in range(grids.shape[3]):
    gray += weights[:, channel, None, None] * grids[:, :, :, channel]
  return gray


def facing(gray: np.ndarray, orientations: Sequence[int]) -> np.ndarray:
  """Whether each of (n, SIDE, SIDE) grayscale thumbnails, turned upright by its
  ``orientations``, is to be mirrored left to right so that its layout faces the one way
  every image's does: where its balance is negative. A picture and its mirror image then
  hash, and have their colours summed up (colour_signature), alike."""
  return balance(gray, orientations) < 0


def balance(gray: np.ndarray, orientations: Sequence[int]) -> np.ndarray:
  """How far each of (n, SIDE, SIDE) grayscale thumbnails, turned upright by its
  ``orientations``, weighs to its left: the first horizontal DCT frequency of its CENTRE cells,
  which mirroring negates."""
  cells = np.array(gray, np.float64).reshape(len(gray), SIDE * SIDE)
  for i, orientation in enumerate(orientations):
    if orientation in _UPRIGHT:
      cells[i] = upright(cells[i].reshape(SIDE, SIDE), orientation).reshape(SIDE * SIDE)
  return cells @ _BALANCE


def phashes(gray: np.ndarray, orientations: Sequence[int], mirrored: Optional[np.ndarray] = None) -> List[str]:
  """32 lowercase hex digits each, the DCT half then the blocks half: the hashes of (n, SIDE, SIDE)
  grayscale thumbnails, each turned upright first by its ``orientations`` (the Exif orientation
  still to apply to its pixels; 1: none), then mirrored where ``mirrored`` says (facing's, which it
  is unless given). At once, as per image numpy's calls would cost more than their work."""
  mirrored = facing(gray, orientations) if mirrored is None else np.asarray(mirrored, bool)
  turned = _turned(gray, orientations)
  turned[mirrored] = turned[mirrored, :, ::-1]
  coefficients = (_COSINES @ turned @ _COSINES.T).reshape(len(turned), _KEPT * _KEPT)
  dct = coefficients > _median(coefficients[:, 1:])
  dct[:, 0] = False
  blocks = (_BLOCKS @ turned @ _BLOCKS.T).reshape(len(turned), _KEPT * _KEPT)
  above = blocks > _median(blocks)
  return [row.tobytes().hex() for row in np.packbits(np.concatenate([dct, above], axis=1), axis=1)]


def _median(rows: np.ndarray) -> np.ndarray:
  """The median of each row, as a column: np.median's values to the last bit (the middle value,
  or the mean of the middle two), by a partition, without its checks and copies, which cost
  several times the partition on a batch's rows."""
  middle = rows.shape[1] // 2
  if rows.shape[1] % 2:
    return np.partition(rows, middle, axis=1)[:, middle:middle + 1]
  ordered = np.partition(rows, (middle - 1, middle), axis=1)
  return (ordered[:, middle - 1:middle] + ordered[:, middle:middle + 1]) / 2


def _turned(gray: np.ndarray, orientations: Sequence[int]) -> np.ndarray:
  """(n, SIDE, SIDE) thumbnails as float64, each turned upright by its orientation."""
  turned = np.array(gray, np.float64)
  for i, orientation in enumerate(orientations):
    if orientation in _UPRIGHT:
      turned[i] = upright(turned[i], orientation)
  return turned


def upright(pixels: np.ndarray, orientation: int) -> np.ndarray:
  """A square array of rows (and any channels after them), turned upright by its Exif ``orientation``."""
  return _UPRIGHT[orientation](pixels).copy() if orientation in _UPRIGHT else pixels


def phash(thumbnail: np.ndarray, orientation: int = 1) -> str:
  """The hash of one thumbnail (phashes)."""
  return phashes(np.asarray(thumbnail)[None], [orientation])[0]


def flat(brightness: float) -> str:
  """The hash of a featureless image of ``brightness`` (its mean gray level as a share of white):
  the code word of the nearest of FLAT_LEVELS + 1 levels, black, white and mid-gray at their
  centres, as both halves."""
  word = _FLAT[round(min(max(brightness, 0.0), 1.0) * FLAT_LEVELS)]
  return word + word


def distances(a: str, b: str) -> Tuple[int, int]:
  """How many bits two hashes' blocks halves differ in, and how many their DCT halves do
  (Hamming distances; near_copies.blocks_half)."""
  return _bits(near_copies.blocks_half(a), near_copies.blocks_half(b)), _bits(a[:16], b[:16])


def near(a: str, b: str, distance: int = NEAR_DISTANCE) -> bool:
  """Whether two hashes are near at ``distance``: their blocks halves within it, their DCT halves
  within near_copies.DCT_MARGIN more (near_copies.within; the grouping compares colours besides)."""
  return near_copies.within(*distances(a, b), distance)


def _bits(a: str, b: str) -> int:
  return (int(a, 16) ^ int(b, 16)).bit_count()
