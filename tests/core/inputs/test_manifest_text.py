"""A manifest's text: gzip cut short or damaged said for the user; an empty one told from its first rows."""
import gzip
import io
import zlib
from typing import Iterator

import pytest

from beam_pipeline.core.inputs import manifest_text
from beam_pipeline.core.rejections import InputFileError, RunFailure

ROWS = b''.join(b'imgs/%d.jpg,cat\n' % i for i in range(5000))


def _read_all(data: bytes) -> bytes:
  stream = manifest_text.Decompressed(io.BytesIO(data), 'gs://b/m.csv.gz')
  chunks = []
  while True:
    chunk = stream.read(8192)
    if not chunk:
      return b''.join(chunks)
    chunks.append(chunk)


def test_a_whole_gzip_stream_and_concatenated_members_read_through():
  assert _read_all(gzip.compress(ROWS)) == ROWS
  assert _read_all(gzip.compress(ROWS[:100]) + gzip.compress(ROWS[100:])) == ROWS


def _cut_at_flush_point() -> bytes:
  compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
  return compressor.compress(ROWS[:30000]) + compressor.flush(zlib.Z_FULL_FLUSH)


@pytest.mark.parametrize('data, says', [
    (_cut_at_flush_point(), 'is cut short: its gzip data ends before the stream does'),
    (gzip.compress(ROWS)[:-3], 'is cut short'),  # the trailer cut
    (gzip.compress(ROWS)[:-8] + b'\0' * 8, 'is damaged: its gzip data does not decompress (CRC check failed'),
    (gzip.compress(ROWS)[:20] + b'\xff' * 40 + gzip.compress(ROWS)[60:], 'is damaged'),
    (ROWS, "is not gzip data (Not a gzipped file (b'im'))"),
])
def test_a_stream_cut_short_or_damaged_raises_one_line_for_the_user(data, says):
  """What Beam's own decompression (and a reader that stops at the first empty read) would
  end as if complete, or raise as zlib.error."""
  with pytest.raises(InputFileError) as raised:
    _read_all(data)
  message = str(raised.value)
  assert message.startswith(f'--input=gs://b/m.csv.gz {says}') and message.endswith('then rerun'), message
  assert '\n' not in message and isinstance(raised.value, RunFailure)


@pytest.mark.parametrize('text, csv_rows, expected', [
    ('', True, 'is empty'),
    ('', False, 'is empty'),
    ('uri,label\n', True, 'holds only a header row'),
    ('\ufeffimage_path,label\r\n\r\n,,\n', True, 'holds only a header row'),
    ('\n \n,\n', True, 'holds only blank lines'),
    ('\n  \n\t\n', False, 'holds only blank lines'),
    ('uri,label\na.jpg,cat\n', True, None),
    ('\n\na.jpg\n', True, None),
    ('TRAIN,a.jpg,cat\n', True, None),  # no header: the first row names an image
    ('{"uri": "a.jpg"}\n', False, None),
    ('not json\n', False, None),  # a row the reader will reject is a row
    ('uri\n"unterminated\n', True, None),
])
def test_emptiness_says_why_a_manifest_names_no_image(text, csv_rows, expected):
  assert manifest_text.emptiness(io.StringIO(text.lstrip('\ufeff'), newline=''), csv_rows) == expected


def test_emptiness_reads_only_the_first_rows():
  """A manifest of a hundred million rows is not read at launch: the first row that names an
  image ends the look, and so does a long run of blank rows."""
  def lines(first: str) -> Iterator[str]:
    yield 'uri,label\n'
    yield first
    for number in range(10**8):
      if number > manifest_text.MAX_BLANK_ROWS + 2:
        raise AssertionError('read too far')
      yield '\n'

  assert manifest_text.emptiness(lines('a.jpg,cat\n'), True) is None
  assert manifest_text.emptiness(lines('\n'), True) is None
