"""Cutting a manifest into parts: every byte in one part, cuts only where rows end, and
each part knowing the number of its first row."""
import csv
import io
import json
import random

import pytest

from beam_pipeline.core.inputs import manifest_parts


def _csv_manifest(rng: random.Random, rows: int) -> bytes:
  text = io.StringIO(newline='')
  writer = csv.writer(text)
  writer.writerow(['uri', 'label', 'note'])
  for i in range(rows):
    note = rng.choice(['', 'plain', 'two\nlines', 'say "hi"\r\nthen, more', '"', '\n\n'])
    writer.writerow([f'gs://b/{i}.jpg', rng.choice(['cat', 'dog, big']), note])
  return text.getvalue().encode()


def _rows(data: bytes):
  return list(csv.reader(io.StringIO(data.decode(), newline='')))


@pytest.mark.parametrize('block_bytes', [3, 64, 2**20])
@pytest.mark.parametrize('part_bytes', [1, 7, 100, 1000, 10**9])
def test_csv_parts_cover_the_file_and_cut_only_where_rows_end(part_bytes, block_bytes, monkeypatch):
  """Quotes and line breaks fall on every side of the blocks the file is read in."""
  monkeypatch.setattr(manifest_parts, '_BLOCK_BYTES', block_bytes)
  data = _csv_manifest(random.Random(part_bytes), 300)
  parts = list(manifest_parts.parts(io.BytesIO(data), csv_quoting=True, part_bytes=part_bytes))
  assert parts[0].start == 0 and parts[-1].end is None
  assert all(a.end == b.start for a, b in zip(parts, parts[1:]))
  assert all(part.end - part.start >= part_bytes for part in parts[:-1])
  rows = []
  for part in parts:
    part_rows = _rows(data[part.start:part.end])
    assert part.first_row == len(rows) + 1
    rows.extend(part_rows)
  assert rows == _rows(data) and len(rows) == 301
  assert (len(parts) > 30) == (part_bytes <= 100)


def test_jsonl_parts_count_lines_and_cut_after_any_line_break():
  lines = [json.dumps({'uri': f'{i}.jpg', 'note': 'a "quoted"\nvalue' * (i % 3)}) for i in range(500)]
  data = ('\n'.join(lines) + '\n').encode()
  parts = list(manifest_parts.parts(io.BytesIO(data), csv_quoting=False, part_bytes=2000))
  seen = []
  for part in parts:
    assert part.first_row == len(seen) + 1
    seen.extend(data[part.start:part.end].decode().splitlines())
  assert seen == lines and len(parts) > 10


def test_a_file_without_line_breaks_or_bytes_is_one_part():
  assert list(manifest_parts.parts(io.BytesIO(b'x' * 50), False, 10)) == [manifest_parts.Part(0, None, 1)]
  assert list(manifest_parts.parts(io.BytesIO(b''), False, 10)) == [manifest_parts.Part(0, None, 1)]
  assert list(manifest_parts.parts(io.BytesIO(b'a\nb\n'), False, 2)) == [manifest_parts.Part(0, 2, 1),
                                                                          manifest_parts.Part(2, None, 2)]
