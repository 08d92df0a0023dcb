"""``inspect --quality_sheet``: a row per data-quality flag the run counts, of images that raise it.

beam_pipeline.json counts flagged images per split, flag and class, but names none, so the
examples are found again: records are read in shard order as the contact sheet reads them
(contact_sheet.records), and each chunk's stored bytes measured by preparation.prepare_images,
the call validation measured them with, until every counted flag has its examples or
MAX_RECORDS were read (a rare flag in a large output would otherwise read it all).
"""
from typing import Dict, List, Mapping, NamedTuple

from PIL import Image, ImageDraw, ImageFont

from beam_pipeline.core import schemas, uris
from beam_pipeline.core.console import quiet_import
from beam_pipeline.core.console.quantities import counted
from beam_pipeline.core.images import image_quality, preparation
from beam_pipeline.core.images.image_info import PreparedImage
from beam_pipeline.core.output.run_record import RunRecord
from beam_pipeline.core.settings import StoredImages
from beam_pipeline.inspection import near_copy_sheet, summary
from beam_pipeline.inspection.contact_sheet import (BACKGROUND, CELL, INK, MUTED, Sample, class_id, records, short,
                                                    thumbnail)

CHUNK = 64  # records measured per prepare_images call, about as validation's chunks hold
MAX_RECORDS = 20_000  # read at most, about a minute's measuring
ROW = near_copy_sheet.HEADER + CELL + near_copy_sheet.CAPTION + near_copy_sheet.GAP  # a flag's row, pixels
_MAX_PIXELS = 10**10  # for an output whose record does not say its --max_pixels; its images passed it anyway
# The stored bytes as they are, never re-encoded: they are upright unless --exif_orientation=ignore, and no flag
# changes with a turn.
_AS_STORED = StoredImages(exif_orientation='ignore')


class Example(NamedTuple):
  name: str  # the source file's name, without its folder
  label: str  # its class, '' without one
  split: str
  image: bytes  # as stored


def counts(info: RunRecord) -> Dict[str, int]:
  """Images per flag in all splits and classes, in image_quality.FLAGS' order, of the flags raised at all."""
  totals = summary.quality_totals(info)
  return {flag: totals[flag] for flag in sorted(totals, key=_order) if totals[flag]}


def examples(info: RunRecord, output: str, per_flag: int, limit: int = MAX_RECORDS) -> Dict[str, List[Example]]:
  """Up to ``per_flag`` examples of each flag counts() holds, the first in shard order, from at most ``limit``
  records.

  Args:
    info: the output's run record: its flags' counts, classes, shards and --max_pixels.
    output: the output directory the shards are read from.
    per_flag: the most examples of a flag: a row's length (inspect's --samples).
    limit: the most records read, so that a rare flag in a large output does not read it all.
  """
  tf = quiet_import.tensorflow()
  keys = schemas.keys(info.schema)
  multi_label = bool(info.options.get('multi_label'))
  spec = {keys[schemas.IMAGE]: tf.io.FixedLenFeature([], tf.string),
          keys[schemas.URI]: tf.io.FixedLenFeature([], tf.string, default_value=b''),
          keys[schemas.LABEL]: tf.io.VarLenFeature(tf.int64) if multi_label else tf.io.FixedLenFeature([], tf.int64)}
  wanted = {flag: min(count, per_flag) for flag, count in counts(info).items()}
  found: Dict[str, List[Example]] = {flag: [] for flag in wanted}
  chunk: List[Example] = []
  for read, (split, record) in enumerate(records(info, output, spec), 1):
    label = class_id(record[keys[schemas.LABEL]], multi_label)
    uri = record[keys[schemas.URI]].numpy().decode('utf-8', 'replace')
    chunk.append(Example(uris.split(uri)[1] or uri, info.labels[label] if 0 <= label < len(info.labels) else '',
                         split, record[keys[schemas.IMAGE]].numpy()))
    if len(chunk) == CHUNK or read == limit:
      _place(chunk, found, wanted, info)
      chunk = []
      if read == limit or all(len(found[flag]) == enough for flag, enough in wanted.items()):
        return found
  _place(chunk, found, wanted, info)
  return found


def bounded(info: RunRecord, found: Mapping[str, List[Example]], per_flag: int, limit: int = MAX_RECORDS) -> bool:
  """Whether reading stopped at ``limit`` records short of some flag's examples: the output holds more, unread.

  Args:
    info: the output's run record: its records and its flags' counts.
    found: the examples read, by flag (examples).
    per_flag: the examples a flag was to have, where it counts that many.
    limit: the most records examples read.
  """
  return info.num_examples > limit and any(len(found.get(flag, [])) < min(count, per_flag)
                                           for flag, count in counts(info).items())


def title(output: str, info: RunRecord, found: Mapping[str, List[Example]], per_flag: int,
          limit: int = MAX_RECORDS) -> str:
  """The sheet's title: the output, and where reading stopped short of some flag's examples, that it did.

  Args:
    output: the output directory, as the title names it.
    info: the output's run record.
    found: the examples read, by flag (examples).
    per_flag: the examples a flag was to have, as given to examples.
    limit: the most records examples read, as given to it.
  """
  stopped = f'; examples from the first {limit:,} records only' if bounded(info, found, per_flag, limit) else ''
  return f'{output}: examples of each data-quality flag (an image may raise several){stopped}'


def draw(heading: str, found: Mapping[str, List[Example]], counts_: Mapping[str, int]) -> Image.Image:
  """The sheet: ``heading``, then a row per flag, its name and count above its examples, each captioned
  with its file's name, then its class and split."""
  font, small, tiny = ImageFont.load_default(size=15), ImageFont.load_default(size=12), ImageFont.load_default(size=10)
  gap = near_copy_sheet.GAP
  columns = max([len(row) for row in found.values()] + [4])
  sheet = Image.new('RGB', (max(gap + columns * (CELL + gap), 16 + round(font.getlength(heading))),
                            40 + ROW * max(len(found), 1)), BACKGROUND)
  pen = ImageDraw.Draw(sheet)
  pen.text((8, 10), heading, fill=INK, font=font)
  for index, (flag, row) in enumerate(found.items()):
    top = 40 + index * ROW
    shown = '' if len(row) == counts_.get(flag, 0) else f', {len(row)} shown'
    pen.text((gap, top + 2), f'{flag}: {counted(counts_.get(flag, 0), "image")}{shown}', fill=INK, font=small)
    for column, example in enumerate(row):
      left, image_top = gap + column * (CELL + gap), top + near_copy_sheet.HEADER
      sheet.paste(thumbnail(Sample(example.image, example.split, []), tiny), (left, image_top))
      pen.text((left + 2, image_top + CELL + 2), short(example.name), fill=INK, font=small)
      pen.text((left + 2, image_top + CELL + 16), short(', '.join(filter(None, (example.label, example.split)))),
               fill=MUTED, font=small)
  return sheet


def _place(chunk: List[Example], found: Dict[str, List[Example]], wanted: Mapping[str, int], info: RunRecord) -> None:
  """Measures ``chunk`` as validation did and adds each image to the rows of its flags that have room.

  Args:
    chunk: the examples read since the last call, measured together as validation's chunks were.
    found: the examples so far, by flag; added to.
    wanted: the examples each flag is to have: a row with as many has no room.
    info: the output's run record, whose --max_pixels the images are measured with.
  """
  if not chunk:
    return
  max_pixels = int(info.options.get('max_pixels') or _MAX_PIXELS)
  for example, result in zip(chunk, preparation.prepare_images([e.image for e in chunk], max_pixels, _AS_STORED)):
    if not isinstance(result, PreparedImage):
      continue  # verify reports an image that no longer decodes; it has no flags to show
    raised = image_quality.flags(result.info.statistics, result.info.height, result.info.width, result.info.channels)
    for flag in raised:
      if flag in found and len(found[flag]) < wanted[flag]:
        found[flag].append(example)


def _order(flag: str) -> int:
  """A flag's place: image_quality.FLAGS' order, any other after them."""
  return image_quality.FLAGS.index(flag) if flag in image_quality.FLAGS else len(image_quality.FLAGS)
