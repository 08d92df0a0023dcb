"""``inspect --contact_sheet``: a grid of sample images, a row per class, each with its split.

Samples are the first records of each class in shard order (a shard's order is a
salted hash, so they are a fair pick), read with TensorFlow's TFRecord reader and
drawn with Pillow.
"""
import io
from typing import Dict, List, Mapping, Tuple

import tensorflow as tf
from PIL import Image, ImageDraw, ImageFont, ImageOps

from beam_pipeline.core import schemas, uris
from beam_pipeline.core.run_record import RunRecord
from beam_pipeline.core.settings import COMPRESSIONS

CELL = 128  # thumbnail side, pixels
CAPTION = 18  # caption height under a thumbnail
LABEL_WIDTH = 170  # the column of class names
MAX_CLASSES = 40
BACKGROUND, INK, MUTED = (255, 255, 255), (20, 20, 20), (110, 110, 110)


def samples(info: RunRecord, output: str, per_class: int) -> Dict[str, List[Tuple[bytes, str]]]:
  """Up to ``per_class`` (image bytes, split) for each of the first MAX_CLASSES classes."""
  keys = schemas.keys(info.schema)
  labels = info.labels[:MAX_CLASSES] or ['(unlabeled)']
  wanted = {label: [] for label in labels}
  spec = {keys[schemas.IMAGE]: tf.io.FixedLenFeature([], tf.string),
          keys[schemas.LABEL]: tf.io.FixedLenFeature([], tf.int64)}
  compression = COMPRESSIONS[info.compression]
  for split, entry in info.splits.items():
    for shard in entry.shards:
      for serialized in tf.data.TFRecordDataset(uris.join(output, shard.file), compression_type=compression):
        record = tf.io.parse_single_example(serialized, spec)
        class_id = int(record[keys[schemas.LABEL]])
        label = info.labels[class_id] if 0 <= class_id < len(info.labels) else '(unlabeled)'
        if label in wanted and len(wanted[label]) < per_class:
          wanted[label].append((record[keys[schemas.IMAGE]].numpy(), split))
        if all(len(found) == per_class for found in wanted.values()):
          return wanted
  return wanted


def draw(samples_: Mapping[str, List[Tuple[bytes, str]]], title: str, per_class: int,
         counts: Mapping[str, int]) -> Image.Image:
  """The sheet: a title, then a row per class (its name and examples in all splits) of
  thumbnails with their split beneath."""
  font, small = ImageFont.load_default(size=15), ImageFont.load_default(size=12)
  row = CELL + CAPTION + 8
  sheet = Image.new('RGB', (LABEL_WIDTH + per_class * (CELL + 6) + 6, 40 + row * len(samples_)), BACKGROUND)
  pen = ImageDraw.Draw(sheet)
  pen.text((8, 10), title, fill=INK, font=font)
  for index, (label, found) in enumerate(samples_.items()):
    top = 40 + index * row
    pen.text((8, top + CELL // 2 - 16), _short(label), fill=INK, font=font)
    pen.text((8, top + CELL // 2 + 4), f'{counts.get(label, 0):,} examples', fill=MUTED, font=small)
    for column, (data, split) in enumerate(found):
      left = LABEL_WIDTH + column * (CELL + 6)
      sheet.paste(_thumbnail(data), (left, top))
      pen.text((left + 2, top + CELL + 2), split, fill=MUTED, font=small)
  return sheet


def _thumbnail(data: bytes) -> Image.Image:
  cell = Image.new('RGB', (CELL, CELL), (235, 235, 235))
  try:
    with Image.open(io.BytesIO(data)) as image:
      image.seek(0)
      picture = ImageOps.contain(image.convert('RGB'), (CELL, CELL))
  except Exception:  # pylint: disable=broad-except  # verify says why; the sheet only shows it is unreadable
    ImageDraw.Draw(cell).text((CELL // 2 - 4, CELL // 2 - 8), '?', fill=INK)
    return cell
  cell.paste(picture, ((CELL - picture.width) // 2, (CELL - picture.height) // 2))
  return cell


def _short(text: str, limit: int = 20) -> str:
  return text if len(text) <= limit else text[:limit - 1] + '…'
