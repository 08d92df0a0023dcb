"""An --incremental output's catalog looked up by uri: every record's catalog entry again, in
files chosen by a hash of its uri, so that an update meets today's listing with the catalog
file by file, and no catalogued record crosses a shuffle to find out that it did not change.

Each lookup file holds the entries of the uris that hash to it, one JSON line each, sorted by
uri: ``[shard id, *entry]`` (incremental_catalog.Entry's fields). A shard's id stays with it
when an update renames it to close a gap in the numbers or writes it again, so that a line
never needs to change for that; the run record maps ids to files. The number of lookup files
is a power of two, set when the lookup is built so that a file holds about ENTRIES_PER_FILE
entries: what one worker holds at once, whatever the dataset's size. A dataset that grows or
shrinks far past it gets its lookup built again (fits).

Why not the per-shard catalog: a shard holds the records of one content-hash range of one
split, so the uris of a listing folder are spread over every shard of the dataset, and meeting
them by uri took a shuffle of every catalogued record.
"""
import hashlib
import json
import zlib
from typing import Dict, Iterable, List, Set, Tuple

from beam_pipeline.core import rejections
from beam_pipeline.core.output import incremental_catalog, output_layout
from beam_pipeline.core.output.incremental_catalog import Entry
from beam_pipeline.core.output.run_record import LookupFile
from beam_pipeline.core.rejections import DamagedOutput

ENTRIES_PER_FILE = 20_000
# How far from ENTRIES_PER_FILE a file's average may drift before the lookup is built again.
_SLACK = 4


def count_for(num_records: int) -> int:
  """How many lookup files a dataset of ``num_records`` records gets: a power of two, so that
  each holds at most about ENTRIES_PER_FILE entries."""
  count = 1
  while count * ENTRIES_PER_FILE < num_records:
    count *= 2
  return count


def fits(count: int, num_records: int) -> bool:
  """Whether a lookup of ``count`` files still suits a dataset of ``num_records`` records: within
  _SLACK times the count it would be built with."""
  wanted = count_for(num_records)
  return wanted <= count * _SLACK and count <= wanted * _SLACK


def slot(uri: str, count: int) -> int:
  """The lookup file a uri's entry is in. CRC-32, as it is stable across processes and
  versions (Python's own hash of a string is salted per process)."""
  return zlib.crc32(uri.encode('utf-8', 'surrogateescape')) % count


def file_name(slot_number: int, count: int) -> str:
  return f'{output_layout.LOOKUP_DIR}/{slot_number:05d}-of-{count:05d}.jsonl'


def shard_id(catalog_sha256: str) -> str:
  """The id of a new shard, whose catalog's checksum is ``catalog_sha256``: kept when the shard
  is renamed or written again, and unique, since no two shards ever hold the same records;
  the same in two runs that write the same shard, so that their outputs are equal."""
  return catalog_sha256[:16]


def line(shard: str, entry: Entry) -> str:
  """One lookup line: the entry of a record of shard ``shard`` (its id)."""
  return json.dumps([shard, *entry], ensure_ascii=False, separators=(',', ':')) + '\n'


def parse(text: str) -> Tuple[str, Entry]:
  """(shard id, entry) of one lookup line."""
  shard, *fields = json.loads(text)
  return shard, incremental_catalog.entry_of(fields)


def uri_of(text: str) -> str:
  """The uri of one lookup line, read without parsing the rest: the second string of the array
  that line() writes (compact separators)."""
  _, end = json.decoder.scanstring(text, 2)
  return json.decoder.scanstring(text, end + 2)[0]


def updated(text: str, dropped: Set[str], added: Iterable[str]) -> str:
  """A lookup file's text (``text``, possibly empty) without the entries of the uris ``dropped``,
  with the lines ``added`` in place of those of their uris, sorted by uri. The lines kept are
  copied as they are: only their uris are read."""
  lines: Dict[str, str] = {}
  for value in text.splitlines(keepends=True):
    uri = uri_of(value)
    if uri not in dropped:
      lines[uri] = value
  for value in added:
    lines[uri_of(value)] = value
  return ''.join(lines[uri] for uri in sorted(lines))


def checksum(data: bytes) -> str:
  return hashlib.sha256(data).hexdigest()


def check(found: LookupFile, data: bytes) -> None:
  """DamagedOutput naming lookup file ``found`` unless its bytes (``data``) are what the run
  record says: its checksum, and as many lines as entries."""
  if checksum(data) != found.sha256:
    raise DamagedOutput(f'{found.file} is not the lookup file the run wrote: its checksum differs')
  lines = data.count(b'\n')
  if lines != found.num_entries:
    raise DamagedOutput(f'{found.file} lists {lines:,} entries where the run record says {found.num_entries:,}')


def checked(found: LookupFile, data: bytes) -> List[Tuple[str, Entry]]:
  """(shard id, entry) of each line of lookup file ``found`` (its bytes ``data``), checked against
  what the run record says of it (check)."""
  check(found, data)
  try:
    return [parse(value) for value in data.decode('utf-8', 'surrogateescape').splitlines()]
  except (ValueError, TypeError, IndexError) as e:
    raise DamagedOutput(f'{found.file}: {rejections.first_line(e)}') from e
