"""``inspect --contact_sheet``: a grid of sample images, a row per class, each captioned with
its class and split.

Samples are the first records of each class in each split, in shard order (a shard's order is
a salted hash, so they are a fair pick), taken from the splits in turn so that a row shows
every split that holds the class, not training images alone; read with TensorFlow's TFRecord
reader and drawn with Pillow. With --annotations each sample shows its objects' boxes (and with
--include_masks their masks, tinted in the box's colour), and an image
without a class of its own (a detection set's usual case) fills the row of one of its
objects' classes; negatives are shown only when no image has an object.
"""
import collections
import io
from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Optional, Tuple

from PIL import Image, ImageDraw, ImageFont, ImageOps

from beam_pipeline.core import schemas, uris
from beam_pipeline.core.console import quiet_import
from beam_pipeline.core.console.quantities import counted
from beam_pipeline.core.output.run_record import RunRecord
from beam_pipeline.core.settings import COMPRESSIONS
from beam_pipeline.inspection import files

CELL = 128  # thumbnail side, pixels
CAPTION = 18  # caption height under a thumbnail
CAPTION_CHARACTERS = 19  # of the caption's font that fit a thumbnail's width
LABEL_WIDTH = 170  # the column of class names
MAX_CLASSES = 40
UNLABELED = '(unlabeled)'
BACKGROUND, INK, MUTED = (255, 255, 255), (20, 20, 20), (110, 110, 110)
# Box outlines by class id: saturated colours that stand out from photos and from each other (no grey).
PALETTE = ((31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75),
           (227, 119, 194), (188, 189, 34), (23, 190, 207))
OUTLINE = 2  # pixels
MASK_OPACITY = 110  # of 255: a mask's tint, which leaves the picture beneath it visible
_BOX_FIELDS = (schemas.OBJECT_XMIN, schemas.OBJECT_YMIN, schemas.OBJECT_XMAX, schemas.OBJECT_YMAX)


class Box(NamedTuple):
  label: int  # the class id, 1-based as label_map.pbtxt's
  text: str
  corners: Tuple[float, float, float, float]  # xmin, ymin, xmax, ymax: fractions of the image
  mask: Optional[bytes] = None  # its PNG of 0s and 1s, with --include_masks


class Sample(NamedTuple):
  image: bytes
  split: str
  boxes: List[Box]  # empty without --annotations
  label: str = ''  # the record's class, its first under --multi_label; '' for none


def colour(label: int) -> Tuple[int, int, int]:
  """The outline colour of class id ``label`` (1-based)."""
  return PALETTE[(label - 1) % len(PALETTE)]


def class_id(label: Any, multi_label: bool) -> int:
  """The record's class id; of a --multi_label record, its first, or -1 when it has none."""
  if not multi_label:
    return int(label)
  ids = label.values.numpy().tolist()
  return ids[0] if ids else -1


def records(info: RunRecord, output: str, spec: Mapping[str, Any], splits: Optional[List[str]] = None
            ) -> Iterator[Tuple[str, Dict[str, Any]]]:
  """Each record of the output's shards, split by split in shard order, as (its split, its parsed features).

  Args:
    info: the output's run record: its splits, their shards and their compression.
    output: the output directory, local or remote (a remote shard is read from a temporary local copy).
    spec: the features to parse, by key: a sheet reads only the features it draws.
    splits: the splits to read (in the record's order, whatever theirs); None reads all.
  """
  tf = quiet_import.tensorflow()
  compression = COMPRESSIONS[info.compression]
  for split, entry in info.splits.items():
    if splits is not None and split not in splits:
      continue
    for shard in entry.shards:
      with files.local_copy(uris.join(output, shard.file)) as path:
        for serialized in tf.data.TFRecordDataset(path, compression_type=compression):
          yield split, tf.io.parse_single_example(serialized, spec)


def samples(info: RunRecord, output: str, per_class: int) -> Dict[str, List[Sample]]:
  """Up to ``per_class`` samples for each of the first MAX_CLASSES classes."""
  tf = quiet_import.tensorflow()  # here, not at the top: the near-copy sheet draws with this module without it
  keys = schemas.keys(info.schema)
  annotated = bool(info.options.get('annotations'))
  wanted: Dict[str, List[Sample]] = {label: [] for label in info.labels[:MAX_CLASSES] or [UNLABELED]}
  negatives: List[Sample] = []
  # A --multi_label record holds a list of ids: it is shown in the row of its first (lowest).
  multi_label = bool(info.options.get('multi_label'))
  spec = {keys[schemas.IMAGE]: tf.io.FixedLenFeature([], tf.string),
          keys[schemas.LABEL]: tf.io.VarLenFeature(tf.int64) if multi_label else tf.io.FixedLenFeature([], tf.int64)}
  if annotated:
    spec.update({keys[field]: tf.io.VarLenFeature(tf.float32) for field in _BOX_FIELDS})
    spec.update({keys[schemas.OBJECT_LABEL]: tf.io.VarLenFeature(tf.int64),
                 keys[schemas.OBJECT_TEXT]: tf.io.VarLenFeature(tf.string)})
  if info.options.get('include_masks'):
    spec[keys[schemas.OBJECT_MASK]] = tf.io.VarLenFeature(tf.string)
  by_split = {}
  for split in info.splits:  # each split's own, up to per_class a class: then a row takes them in turn
    found: Dict[str, List[Sample]] = {label: [] for label in wanted}
    for _, record in records(info, output, spec, [split]):
      label_id = class_id(record[keys[schemas.LABEL]], multi_label)
      sample = Sample(record[keys[schemas.IMAGE]].numpy(), split, _boxes(record, keys) if annotated else [],
                      info.labels[label_id] if 0 <= label_id < len(info.labels) else '')
      row = _row(info.labels, label_id, sample.boxes, found, per_class)
      if row:
        found[row].append(sample)
      elif not sample.boxes and len(negatives) < per_class:
        negatives.append(sample)
      if all(len(samples_) == per_class for samples_ in found.values()):
        break
    by_split[split] = found
  for label in wanted:
    wanted[label] = _in_turn([by_split[split][label] for split in by_split], per_class)
  if annotated and negatives and not any(wanted.values()):
    return {UNLABELED: negatives}
  return wanted


def _in_turn(lists: List[List[Sample]], count: int) -> List[Sample]:
  """Up to ``count`` samples, one of each list in turn: every split that holds some shows."""
  taken: List[Sample] = []
  for position in range(count):
    taken.extend(samples_[position] for samples_ in lists if position < len(samples_))
  return taken[:count]


def captions(info: RunRecord) -> Dict[str, str]:
  """What each row counts: examples of its class, or, for a detection set whose images have
  no class of their own, objects of it."""
  examples: Dict[str, int] = collections.Counter()
  objects: Dict[str, int] = collections.Counter()
  for split in info.splits.values():
    examples.update(split.classes)
    objects.update(split.objects or {})
  unlabeled = info.num_examples - sum(examples.values())
  by_objects = bool(info.options.get('annotations')) and not any(examples.values())
  rows = {label: counted(objects[label], 'object') if by_objects else counted(examples[label], 'example')
          for label in info.labels}
  return {**rows, UNLABELED: counted(unlabeled, 'example')}


def draw(samples_: Mapping[str, List[Sample]], title: str, per_class: int, captions_: Mapping[str, str]) -> Image.Image:
  """The sheet: a title, then a row per class (its name and what it counts in all splits) of
  thumbnails, their boxes drawn, with their class and split beneath.

  Args:
    samples_: each row's samples (samples), by its class, in the order the rows are drawn.
    title: the line at the top: the output, its examples and classes.
    per_class: the most samples a row holds, which sets the sheet's width.
    captions_: what each row counts (captions), written under its class's name.
  """
  font, small, tiny = ImageFont.load_default(size=15), ImageFont.load_default(size=12), ImageFont.load_default(size=10)
  row = CELL + CAPTION + 8
  sheet = Image.new('RGB', (LABEL_WIDTH + per_class * (CELL + 6) + 6, 40 + row * len(samples_)), BACKGROUND)
  pen = ImageDraw.Draw(sheet)
  pen.text((8, 10), title, fill=INK, font=font)
  for index, (label, found) in enumerate(samples_.items()):
    top = 40 + index * row
    pen.text((8, top + CELL // 2 - 16), short(label), fill=INK, font=font)
    pen.text((8, top + CELL // 2 + 4), captions_.get(label, ''), fill=MUTED, font=small)
    for column, sample in enumerate(found):
      left = LABEL_WIDTH + column * (CELL + 6)
      sheet.paste(thumbnail(sample, tiny), (left, top))
      pen.text((left + 2, top + CELL + 2), tile_caption(sample), fill=MUTED, font=small)
  return sheet


def tile_caption(sample: Sample) -> str:
  """What a tile says beneath it: its class (or its first object's) and its split, the class cut
  so that both fit a tile's width (CAPTION_CHARACTERS)."""
  label = sample.label or (sample.boxes[0].text if sample.boxes else '')
  if not label:
    return sample.split
  return f'{short(label, max(4, CAPTION_CHARACTERS - len(sample.split) - 3))} · {sample.split}'


def _boxes(record: Mapping[str, Any], keys: Mapping[str, str]) -> List[Box]:
  sides = [record[keys[field]].values.numpy().tolist() for field in _BOX_FIELDS]
  labels = record[keys[schemas.OBJECT_LABEL]].values.numpy().tolist()
  texts = [text.decode('utf-8', 'replace') for text in record[keys[schemas.OBJECT_TEXT]].values.numpy().tolist()]
  masks = (record[keys[schemas.OBJECT_MASK]].values.numpy().tolist() if keys[schemas.OBJECT_MASK] in record
           else [None] * len(labels))
  return [Box(*fields) for fields in zip(labels, texts, zip(*sides), masks)]


def _row(labels: List[str], label_id: int, boxes: List[Box], wanted: Mapping[str, List[Sample]],
         per_class: int) -> Optional[str]:
  """The row a record fills, if one has room: its class's; for an image without a class, the
  first of its objects' classes whose row has room, so that rarer classes get samples too.

  Args:
    labels: the output's classes, in id order (labels.txt).
    label_id: the record's class id; outside ``labels`` (-1) for an image without a class.
    boxes: the record's objects, whose classes an image without one may fill rows of.
    wanted: the samples each row has so far, by class; a class not among them gets no row.
    per_class: the most samples a row takes.
  """
  if 0 <= label_id < len(labels):
    candidates = [labels[label_id]]
  else:
    candidates = [labels[box.label - 1] for box in boxes if 1 <= box.label <= len(labels)] or [UNLABELED]
  return next((label for label in candidates if label in wanted and len(wanted[label]) < per_class), None)


def thumbnail(sample: Sample, font: ImageFont.ImageFont) -> Image.Image:
  """A CELL-sided square of ``sample``'s image, its boxes drawn; a '?' where it does not decode."""
  cell = Image.new('RGB', (CELL, CELL), (235, 235, 235))
  try:
    with Image.open(io.BytesIO(sample.image)) as image:
      image.seek(0)
      picture = ImageOps.contain(image.convert('RGB'), (CELL, CELL))
  except Exception:  # pylint: disable=broad-except  # verify says why; the sheet only shows it is unreadable
    ImageDraw.Draw(cell).text((CELL // 2 - 4, CELL // 2 - 8), '?', fill=INK)
    return cell
  offset = ((CELL - picture.width) // 2, (CELL - picture.height) // 2)
  cell.paste(picture, offset)
  for box in sample.boxes:
    if box.mask is not None:
      _tint(cell, box, offset, picture.size)
  _draw_boxes(ImageDraw.Draw(cell), sample.boxes, offset, picture.size, font)
  return cell


def _tint(cell: Image.Image, box: Box, offset: Tuple[int, int], size: Tuple[int, int]) -> None:
  """The box's mask, scaled to the thumbnail by nearest neighbour, tinted in its colour.

  Args:
    cell: the thumbnail painted on.
    box: the object whose mask (a PNG covering the whole image) is tinted in its class's colour.
    offset: where the picture's top left corner is in the cell.
    size: the picture's size in the cell, which the mask is scaled to.
  """
  try:
    with Image.open(io.BytesIO(box.mask)) as mask:
      shape = mask.convert('L').resize(size, Image.Resampling.NEAREST).point(lambda v: MASK_OPACITY if v else 0)
  except Exception:  # pylint: disable=broad-except  # verify says why; the sheet draws the box alone
    return
  cell.paste(Image.new('RGB', size, colour(box.label)), offset, shape)


def _draw_boxes(pen: ImageDraw.ImageDraw, boxes: List[Box], offset: Tuple[int, int], size: Tuple[int, int],
                font: ImageFont.ImageFont) -> None:
  """Each box's outline, then its class's name on a tag of its colour above it (inside it when
  the box touches the top), so that no outline hides a name.

  Args:
    pen: draws on the thumbnail.
    boxes: the objects, their corners fractions of the image.
    offset: where the picture's top left corner is in the thumbnail.
    size: the picture's size in the thumbnail, which the fractions are of.
    font: the tags' font.
  """
  placed = []
  for box in boxes:
    xmin, ymin, xmax, ymax = box.corners
    left, top = offset[0] + round(xmin * size[0]), offset[1] + round(ymin * size[1])
    right = max(offset[0] + round(xmax * size[0]) - 1, left)
    bottom = max(offset[1] + round(ymax * size[1]) - 1, top)
    pen.rectangle([left, top, right, bottom], outline=colour(box.label), width=OUTLINE)
    placed.append((box, left, top))
  for box, left, top in placed:
    x0, y0, x1, y1 = pen.textbbox((0, 0), short(box.text, 12), font=font)
    height = y1 - y0 + 2
    y = top - height if top - height >= 0 else top + OUTLINE
    pen.rectangle([left, y, left + x1 - x0 + 3, y + height - 1], fill=colour(box.label))
    pen.text((left + 2 - x0, y + 1 - y0), short(box.text, 12), fill=BACKGROUND, font=font)


def short(text: str, limit: int = 20) -> str:
  """``text`` cut to ``limit`` characters, an ellipsis marking the cut, so that it fits its cell."""
  return text if len(text) <= limit else text[:limit - 1] + '…'
