"""A large manifest cut into byte ranges that workers read in parallel, each knowing the
number of its first row.

One process scanning a file for line breaks reads it at the speed of storage; parsing
the rows into items is what costs, and that is what the parts spread. A part ends
right after a line break that ends a row, so every byte, and every row, lies in
exactly one part. In JSON Lines every line break ends a row (JSON escapes them within
strings). In CSV a quoted field may hold line breaks: a break ends a row only where
the quotes before it, counted from the start of the file, are balanced. Hand-written
because Beam's splittable text source neither keeps line numbers nor knows CSV
quoting, and the numbers name a bad row in the errors file.
"""
from typing import BinaryIO, Iterator, NamedTuple, Optional

# About half a million rows of a typical manifest: a few seconds of parsing per part.
PART_BYTES = 64 * 2**20
_BLOCK_BYTES = 8 * 2**20


class Part(NamedTuple):
  start: int  # byte offsets in the file as stored
  end: Optional[int]  # None: to the end of the file
  first_row: int  # 1-based: the number of the part's first row (or line) in the file


def parts(stream: BinaryIO, csv_quoting: bool, part_bytes: int = PART_BYTES) -> Iterator[Part]:
  """The parts of the uncompressed file ``stream`` reads from its start: each at least
  ``part_bytes`` long but for the last, which runs to the end."""
  start, first_row, row_ends = 0, 1, 0
  position, inside_quotes = 0, False
  cut_before: Optional[Part] = None  # held back: if the file ends with it, it runs to the end
  while True:
    block = stream.read(_BLOCK_BYTES)
    if not block:
      break
    at = position  # the offset in the file of the segment below
    for index, segment in enumerate(block.split(b'"') if csv_quoting else (block,)):
      if index:
        inside_quotes, at = not inside_quotes, at + 1
      if not inside_quotes:
        counted = 0
        while True:  # the row ends in this segment that end a part
          due = start + part_bytes - 1 - at  # a part is at least part_bytes long
          cut = segment.find(b'\n', max(due, counted)) if due < len(segment) else -1
          if cut < 0:
            break
          row_ends += segment.count(b'\n', counted, cut + 1)
          counted = cut + 1
          if cut_before:
            yield cut_before
          cut_before = Part(start, at + counted, first_row)
          start, first_row = at + counted, row_ends + 1
        row_ends += segment.count(b'\n', counted)
      at += len(segment)
    position += len(block)
  if cut_before and start == position:
    yield cut_before._replace(end=None)
  else:
    if cut_before:
      yield cut_before
    yield Part(start, None, first_row)
