"""Instance masks (--include_masks): an object's COCO segmentation drawn on the stored image,
one PNG each, as the Object Detection API's image/object/mask holds them.

pycocotools draws polygons and decodes RLE as COCO's own tools and evaluation do. A mask
is drawn on the frame its annotation was made on, then turned and resized (nearest
neighbour) as the image was, so its pixels stay 0 or 1 and follow the image's.
"""
import io
import math
from typing import Any, NamedTuple, Tuple, Union

import numpy as np
from PIL import Image
from pycocotools import mask as coco_mask

from beam_pipeline.core.images import exif_orientation


class MaskSource(NamedTuple):
  """What an object's mask is drawn from: small enough to travel with its record."""
  segmentation: Any  # COCO's polygons, or RLE (counts as a list or as COCO's compressed text)
  width: int  # of the frame it was made on
  height: int
  turn: int  # the Exif orientation the image was then turned by (1: none)


def source(segmentation: Any, size: Tuple[float, float], turn: int) -> Union[MaskSource, str]:
  """What to draw an object's mask from, on a frame of ``size`` (width, height); or why it
  cannot be drawn, in a few words."""
  width, height = size
  if not segmentation:
    return 'has no segmentation to draw a mask from (--include_masks)'
  if width != int(width) or height != int(height) or min(width, height) < 1:
    return 'has a segmentation, but its image has no size in pixels to draw it on'
  if isinstance(segmentation, list):
    if not all(isinstance(polygon, list) and len(polygon) >= 6 and len(polygon) % 2 == 0 and
               all(isinstance(v, (int, float)) and math.isfinite(v) for v in polygon) for polygon in segmentation):
      return 'has a segmentation polygon that is not a list of at least 3 x, y points'
  elif isinstance(segmentation, dict):
    if list(segmentation.get('size') or []) != [int(height), int(width)]:
      return f'has an RLE mask of size {segmentation.get("size")}, not the image\'s [{int(height)}, {int(width)}]'
    counts = segmentation.get('counts')
    if not (isinstance(counts, str) or (isinstance(counts, list) and all(isinstance(c, int) for c in counts))):
      return 'has an RLE mask whose counts are neither a list of numbers nor COCO\'s compressed text'
  else:
    return 'has a segmentation that is neither polygons nor RLE'
  return MaskSource(segmentation, int(width), int(height), turn)


def pixels(mask: MaskSource) -> np.ndarray:
  """The mask on the frame it was made on: [height, width] uint8, 0 or 1."""
  segmentation, width, height = mask.segmentation, mask.width, mask.height
  if isinstance(segmentation, list):
    rle = coco_mask.merge(coco_mask.frPyObjects(segmentation, height, width))
  elif isinstance(segmentation['counts'], list):
    rle = coco_mask.frPyObjects(segmentation, height, width)
  else:
    rle = {'size': segmentation['size'], 'counts': segmentation['counts'].encode('ascii')}
  return coco_mask.decode(rle)


def encoded(mask: MaskSource, stored_size: Tuple[int, int]) -> bytes:
  """The mask on the stored image (``stored_size``: width, height), as a PNG of 0s and 1s."""
  image = Image.fromarray(pixels(mask))
  if mask.turn != 1:
    image = image.transpose(exif_orientation.TRANSPOSES[mask.turn])
  if image.size != stored_size:
    image = image.resize(stored_size, Image.Resampling.NEAREST)
  buffer = io.BytesIO()
  image.save(buffer, 'PNG')
  return buffer.getvalue()
