"""Annotated boxes moved onto the stored image: normalized, turned upright, clipped.

Boxes are stored normalized to [0, 1], so a downscale moves none of them; only the Exif turn
the stored pixels were given must be applied to them too, unless the annotations were already
made on the upright picture (as labelling tools that apply Exif do).
"""
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from beam_pipeline.core.images import masks
from beam_pipeline.core.inputs import annotations
from beam_pipeline.core.inputs.annotations import AnnotatedObject, Problem


class StoredObject(NamedTuple):
  label: str
  xmin: float  # normalized to the stored (upright, possibly downscaled) image, in [0, 1]
  ymin: float
  xmax: float
  ymax: float
  area: float  # pixels squared of the stored image
  is_crowd: int
  difficult: int
  truncated: int
  # With --include_masks: how to draw its mask (masks.MaskSource), the stored image's size aside.
  mask: Any = None


# The share of its aspect ratio by which an annotated size may differ from the file's and still
# be taken for a scaled copy of it (rounding a downscaled copy's sides to whole pixels).
_ASPECT_TOLERANCE = 0.01


# How far a given area may exceed its clipped box's (x + w - x is not always w in floating point)
# and still be taken as the annotation's own.
_AREA_TOLERANCE = 1e-9


# Where each Exif orientation takes a normalized point of the file's frame in the upright one, as
# Pillow's exif_transpose turns the pixels (core.exif_orientation.TRANSPOSES).
_TURNS: Dict[int, Callable[[float, float], Tuple[float, float]]] = {
    2: lambda x, y: (1 - x, y),  # FLIP_LEFT_RIGHT
    3: lambda x, y: (1 - x, 1 - y),  # ROTATE_180
    4: lambda x, y: (x, 1 - y),  # FLIP_TOP_BOTTOM
    5: lambda x, y: (y, x),  # TRANSPOSE
    6: lambda x, y: (1 - y, x),  # ROTATE_270
    7: lambda x, y: (1 - y, 1 - x),  # TRANSVERSE
    8: lambda x, y: (y, 1 - x),  # ROTATE_90
}


def _turned(x: float, y: float, orientation: int) -> Tuple[float, float]:
  """A normalized point of the file's frame in the upright frame."""
  return _TURNS[orientation](x, y) if orientation in _TURNS else (x, y)


def _clipped_area(obj: AnnotatedObject, width: float, height: float) -> float:
  """The area of ``obj``'s box within the ``width`` x ``height`` image it was annotated on: no
  area of the object can be larger."""
  return max(0.0, min(obj.xmax, width) - max(obj.xmin, 0.0)) * max(0.0, min(obj.ymax, height) - max(obj.ymin, 0.0))


def _same_shape(size: Tuple[int, int], other: Tuple[int, int]) -> bool:
  ratio, other_ratio = size[0] / size[1], other[0] / other[1]
  return abs(ratio - other_ratio) <= _ASPECT_TOLERANCE * other_ratio


def _frame_turn(annotated: Tuple[int, int], source: Tuple[int, int], orientation: int) -> Optional[int]:
  """The orientation to turn the annotations by (1: they are upright already), None if they
  fit neither the file's frame nor the upright one."""
  upright = (source[1], source[0]) if 5 <= orientation <= 8 else source
  if min(annotated) <= 0:
    return None
  fits_file, fits_upright = _same_shape(annotated, source), _same_shape(annotated, upright)
  if upright != source and annotated != source and (annotated == upright or (fits_upright and not fits_file)):
    return 1
  return orientation if fits_file else None


def stored_objects(objects: Sequence[AnnotatedObject], annotated_size: Optional[Tuple[int, int]],
                   source_size: Tuple[int, int], orientation: int, stored_size: Tuple[int, int],
                   with_masks: bool = False) -> Tuple[Tuple[StoredObject, ...], List[Problem]]:
  """The objects on the stored image, with a Problem for each left out; sizes are (width,
  height). An annotation made on a scaled copy of the file fits by normalizing.

  Args:
    objects: the image's annotated objects, as the annotation file gives them.
    annotated_size: the size the annotation file gives, if any (annotations.NORMALIZED: the boxes are
      normalized); without one, the boxes are taken to be on ``source_size``.
    source_size: the file's own frame, before any Exif turn.
    orientation: the Exif turn the stored pixels were given (1: none).
    stored_size: the stored image's size, upright and possibly downscaled: what each object's area is given in.
    with_masks: each object keeps what its mask is drawn from; an object without a usable segmentation is
      then left out.
  """
  if annotated_size == annotations.NORMALIZED:
    width, height, turn = 1, 1, orientation
  else:
    width, height = annotated_size or source_size
    turn = _frame_turn((width, height), source_size, orientation)
  if turn is None:
    return (), [Problem('image', f'annotations are for a {width}x{height} image; '
                                 f'the file is {source_size[0]}x{source_size[1]}')]
  stored_pixels = stored_size[0] * stored_size[1]
  stored, problems = [], []
  for obj in objects:
    corners = [_turned(x / width, y / height, turn) for x in (obj.xmin, obj.xmax) for y in (obj.ymin, obj.ymax)]
    xmin, xmax = (min(1.0, max(0.0, pick(x for x, _ in corners))) for pick in (min, max))
    ymin, ymax = (min(1.0, max(0.0, pick(y for _, y in corners))) for pick in (min, max))
    if xmax <= xmin or ymax <= ymin:
      box = ', '.join(f'{value:g}' for value in (obj.xmin, obj.ymin, obj.xmax, obj.ymax))
      problems.append(Problem(obj.where, f'box [{box}] lies outside the {width}x{height} image'))
      continue
    if 0 < obj.area <= _clipped_area(obj, width, height) * (1 + _AREA_TOLERANCE):
      area = obj.area * stored_pixels / (width * height)
    else:  # none given, or more than the box holds on the image (an unclipped box's w*h, say)
      area = (xmax - xmin) * (ymax - ymin) * stored_pixels
    mask = None
    if with_masks:
      mask = masks.source(obj.segmentation, (width, height), turn)
      if isinstance(mask, str):
        problems.append(Problem(obj.where, mask))
        continue
    stored.append(StoredObject(obj.label, float(xmin), float(ymin), float(xmax), float(ymax), float(area),
                               obj.is_crowd, obj.difficult, obj.truncated, mask))
  return tuple(stored), problems
