"""``inspect --near_duplicates``: the near-copy groups beam_pipeline.json lists, a row each, side by side,
ROWS to a page: those whose labels conflict first (as the record lists them), each file with its class.

A group is listed by its source files, not its records (a copy --near_copies=drop removed has
none), so each cell reads the original file as inspect reads any (files.open_binary: a plain
open, or TensorFlow's file systems for gs://), never Beam. A file gone since the run is drawn as
unreadable (one that no longer decodes, with the contact sheet's '?'), and the rest of the sheet still is.
"""
from typing import Any, Callable, List, Mapping, NamedTuple, Optional, Sequence

from PIL import Image, ImageDraw, ImageFont

from beam_pipeline.core import uris
from beam_pipeline.core.console.quantities import counted
from beam_pipeline.core.output.run_record import NearDuplicates
from beam_pipeline.inspection import files, overview
from beam_pipeline.inspection.contact_sheet import BACKGROUND, CELL, INK, MUTED, Sample, short, thumbnail

ROWS = 20  # groups a page draws; every group the record lists is on a page
PER_ROW = 8  # files drawn of a group; its header counts the rest
HEADER = 20  # a row's header above its thumbnails
CAPTION = 30  # two lines under a thumbnail: the file's name, then its class and its split, kept or removed
GAP = 6
CONFLICT = (214, 39, 40)  # the header of a group whose labels differ
UNREADABLE = 'unreadable'


class Cell(NamedTuple):
  name: str  # the file's name, without its folder
  status: str  # its split, or under --near_copies=drop 'kept' or 'removed'
  image: Optional[bytes]  # None where the file could not be read
  label: str = ''  # its class ('' in a record from before groups named them)


def read(uri: str) -> Optional[bytes]:
  """The file's bytes, or None where it cannot be read (gone, or no access)."""
  try:
    with files.open_binary(uri) as f:
      return f.read()
  except Exception:  # pylint: disable=broad-except  # OSError, or TensorFlow's errors for gs://: the cell says so
    return None


def cells(group: Mapping[str, Any], load: Callable[[str], Optional[bytes]] = read) -> List[Cell]:
  """The first PER_ROW files of a listed group (splitting.near_group_entry), each read with ``load``."""
  labels = group.get('labels') or [''] * len(group['images'])
  return [Cell(uris.split(uri)[1] or uri, overview.near_copy_status(uri, group), load(uri), label)
          for uri, label in list(zip(group['images'], labels))[:PER_ROW]]


def header(number: int, group: Mapping[str, Any]) -> str:
  """A row's header: the group's number, its size (and how many are not drawn), and whether its
  labels conflict, which training would see as one picture of different classes."""
  images = group['images']
  hidden = f', the first {PER_ROW} drawn' if len(images) > PER_ROW else ''
  conflict = ', labels conflict' if group.get('label_conflict') else ''
  return f'Group {number}: {counted(len(images), "image")}{hidden}{conflict}'


def title(output: str, near: NearDuplicates, page: int = 1) -> str:
  """A page's title: the output, the distance its copies are within, how many there are, and
  which of them the page draws."""
  listed = len(near.groups)
  first, last = (page - 1) * ROWS + 1, min(page * ROWS, listed)
  drawn = f', groups {first}-{last} of {listed} listed' if listed > ROWS or near.num_groups > listed else ''
  return (f'{output}: near copies within {near.distance} bits, {counted(near.num_groups, "group")} of '
          f'{counted(near.num_images, "image")}{drawn}')


def pages(near: NearDuplicates) -> int:
  """How many pages draw every group the record lists (one at least)."""
  return max(1, -(-len(near.groups) // ROWS))


def page_path(path: str, page: int) -> str:
  """Where page ``page`` goes: ``path`` for the first, then near-2.png, near-3.png ..."""
  if page == 1:
    return path
  stem, dot, extension = path.rpartition('.')
  return f'{stem}-{page}.{extension}' if dot and '/' not in extension else f'{path}-{page}'


def draw(heading: str, groups: Sequence[Mapping[str, Any]], load: Callable[[str], Optional[bytes]] = read,
         first: int = 1) -> Image.Image:
  """A page: ``heading``, then a row per group of ``groups`` (the first ROWS), its header above
  its thumbnails, each captioned with its file's name, then its class and its split, kept or removed.

  Args:
    heading: the page's title (title).
    groups: the groups from the page's first on, as beam_pipeline.json lists them.
    load: reads a file's bytes, None where it cannot: read, unless a caller (a test) reads otherwise.
    first: the number of the page's first group, counted over all pages, which its header gives.
  """
  font, small, tiny = ImageFont.load_default(size=15), ImageFont.load_default(size=12), ImageFont.load_default(size=10)
  shown = list(groups[:ROWS])
  row = HEADER + CELL + CAPTION + GAP
  columns = max([min(len(group['images']), PER_ROW) for group in shown] + [4])
  width = max(GAP + columns * (CELL + GAP), 16 + round(font.getlength(heading)))
  sheet = Image.new('RGB', (width, 40 + row * max(len(shown), 1)), BACKGROUND)
  pen = ImageDraw.Draw(sheet)
  pen.text((8, 10), heading, fill=INK, font=font)
  if not shown:
    pen.text((8, 40), 'No near copies were found.', fill=MUTED, font=small)
  for index, group in enumerate(shown):
    top = 40 + index * row
    pen.text((GAP, top + 2), header(first + index, group), fill=CONFLICT if group.get('label_conflict') else INK,
             font=small)
    for column, cell in enumerate(cells(group, load)):
      left, image_top = GAP + column * (CELL + GAP), top + HEADER
      sheet.paste(_unreadable(small) if cell.image is None else thumbnail(Sample(cell.image, cell.status, []), tiny),
                  (left, image_top))
      pen.text((left + 2, image_top + CELL + 2), short(cell.name), fill=INK, font=small)
      status = cell.status if cell.image is not None else ', '.join(filter(None, (cell.status, UNREADABLE)))
      status = f'{short(cell.label, max(4, 19 - len(status) - 3))} · {status}' if cell.label else status
      pen.text((left + 2, image_top + CELL + 16), status, fill=MUTED, font=small)
  return sheet


def _unreadable(font: ImageFont.ImageFont) -> Image.Image:
  cell = Image.new('RGB', (CELL, CELL), (235, 235, 235))
  ImageDraw.Draw(cell).text((CELL // 2, CELL // 2), UNREADABLE, fill=MUTED, font=font, anchor='mm')
  return cell
