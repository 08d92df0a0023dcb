"""An --incremental output's catalog looked up by uri and by content: every record's catalog
entry again, in files chosen by a hash of its uri, and in files chosen by its content hash, so
that an update meets today's listing with the catalog file by file, and its new records with
the catalogued copies of their pictures, and no catalogued record crosses a shuffle to find out
that it did not change.

A lookup file holds the entries of the keys that fall in it, one JSON line each, sorted: by uri
``[uri, fingerprint, shard id, *the entry's other fields]``, by content ``[content hash, uri,
fingerprint, shard id, ...]`` (catalog_entries.Entry's fields). A shard's id stays with it
when an update renames it to close a gap in the numbers or writes it again, so that a line
never needs to change for that; the run record maps ids to files. Both lookups have the same
number of files, a power of two, set when they are built so that a file holds about
ENTRIES_PER_FILE entries: what one worker holds at once, whatever the dataset's size. A dataset
that grows or shrinks far past it gets its lookups built again (fits). Files by content cover
ranges of content hashes, so a file holds whole groups of copies.

An update's changes to a file (lines added or replaced, identities dropped) go to a delta beside
it, while they are fewer than one entry in DELTA_FRACTION of the file's; past that the file is
written again whole, with them, and has none. So an update writes what it changed, not every
file a change reaches, and a file is written whole about once every DELTA_FRACTION-th of its
entries changed; a reader makes the delta's changes on the file as it reads it (with_changes).

Why not the per-shard catalog: a shard holds the records of one content-hash range of one
split, so the uris of a listing folder are spread over every shard of the dataset, and meeting
them by uri took a shuffle of every catalogued record, and by content another.
"""
import bisect
import hashlib
import json
import zlib
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Set, Tuple, Union

from beam_pipeline.core import rejections
from beam_pipeline.core.output import catalog_entries, output_layout
from beam_pipeline.core.output.catalog_entries import Entry
from beam_pipeline.core.output.run_record import LookupFile
from beam_pipeline.core.rejections import DamagedOutput

ENTRIES_PER_FILE = 20_000
# A lookup file's delta holds at most one entry for this many of the file's: past it, the file
# is written again whole with its changes, and has no delta.
DELTA_FRACTION = 8
# How far from ENTRIES_PER_FILE a file's average may drift before the lookups are built again.
_SLACK = 4


def count_for(num_records: int) -> int:
  """How many files each lookup of a dataset of ``num_records`` records gets: a power of two,
  so that each holds at most about ENTRIES_PER_FILE entries."""
  count = 1
  while count * ENTRIES_PER_FILE < num_records:
    count *= 2
  return count


def fits(count: int, num_records: int) -> bool:
  """Whether lookups of ``count`` files still suit a dataset of ``num_records`` records: within
  _SLACK times the count they would be built with."""
  wanted = count_for(num_records)
  return wanted <= count * _SLACK and count <= wanted * _SLACK


def shard_id(catalog_sha256: str) -> str:
  """The id of a new shard, whose catalog's checksum is ``catalog_sha256``: kept when the shard
  is renamed or written again, and unique, since no two shards ever hold the same records;
  the same in two runs that write the same shard, so that their outputs are equal."""
  return catalog_sha256[:16]


def _hash_of(line: bytes) -> bytes:
  """The content hash a line of the lookup by content starts with, as its bytes."""
  return line[2:66]


def _galloped(lines: List[bytes], target: Any, start: int, key: Callable[[bytes], Any]) -> int:
  """bisect_left's place of ``target`` among the sorted ``lines`` from ``start``, found by steps
  that double from ``start`` and then a bisection between the last two: about twice the log of
  the distance from ``start`` in keys read, where a bisection of the rest reads the log of its
  length.

  Args:
    lines: a lookup file's lines, sorted by ``key``.
    target: the key whose place is wanted.
    start: where the search starts: no line before it has a key at or past ``target``.
    key: what a line is sorted by (its identity, or its content hash).
  """
  low, high, step = start, start, 1
  while high < len(lines) and key(lines[high]) < target:
    low, high, step = high + 1, high + step, step * 2
  return bisect.bisect_left(lines, target, low, min(high, len(lines)), key=key)


# How a delta's line that drops the file's line of an identity starts: no line of a lookup file does.
_DROPPED = '[0,'


def _dumps(fields: list) -> str:
  return json.dumps(fields, ensure_ascii=False, separators=(',', ':')) + '\n'


class Lookup:
  """One of the catalog's two lookups: by uri (BY_URI) or by content hash (BY_CONTENT). A line's
  identity is what it is sorted by and replaced by: its uri, or its (content hash, uri)."""

  def __init__(self, folder: str, by_content: bool):
    self.folder = folder
    self.by_content = by_content  # a Lookup is pickled into the steps that take it: told apart by this, not by identity

  def slot(self, key: str, count: int) -> int:
    """The file a key's entries are in. By uri CRC-32, as it is stable across processes and
    versions (Python's own hash of a string is salted per process); by content the hash's
    first 32 bits, so that each file holds a range of content hashes."""
    if self.by_content:
      return int(key[:8], 16) * count >> 32
    return zlib.crc32(key.encode('utf-8', 'surrogateescape')) % count

  def slot_of(self, entry: Entry, count: int) -> int:
    return self.slot(entry.source_sha256 if self.by_content else entry.uri, count)

  def file_name(self, slot_number: int, count: int) -> str:
    return f'{self.folder}/{slot_number:05d}-of-{count:05d}.jsonl'

  def line(self, shard: str, entry: Entry) -> str:
    """The line of the entry of a record of shard ``shard`` (its id)."""
    fields = [entry.uri, entry.fingerprint, shard, *entry[2:]]
    return _dumps([entry.source_sha256, *fields] if self.by_content else fields)

  def parse(self, text: str) -> Tuple[str, Entry]:
    """(shard id, entry) of one line."""
    fields = json.loads(text)
    uri, fingerprint, shard, *rest = fields[1:] if self.by_content else fields
    return shard, catalog_entries.entry_of([uri, fingerprint, *rest])

  def identity(self, text: str) -> Union[str, Tuple[str, str]]:
    """A line's identity, read without parsing the rest of it: the line starts with its uri, or
    with a content hash (64 characters) and its uri, as line() writes them (compact separators)."""
    if self.by_content:
      return text[2:66], json.decoder.scanstring(text, 69)[0]
    return json.decoder.scanstring(text, 2)[0]

  def head(self, text: str) -> Optional[Tuple[str, str, str, str, str]]:
    """(uri, fingerprint, shard id, split, class) of a line of the lookup by uri, read without
    parsing the rest of it: all an update needs of a record that did not change. None where the
    class is not its label (a record without one, of --annotations): parse it instead."""
    fields = text[2:].split('","', 5) if '\\' not in text else ()
    if len(fields) == 6:  # no string holds an escape, so none holds a quote: each ends where '","' starts
      uri, fingerprint, shard, _, split, rest = fields
      label = rest[:rest.index('"')]
      return (uri, fingerprint, shard, split, label) if label and '"' not in split else None
    scan = json.decoder.scanstring
    uri, end = scan(text, 2)  # each string past the '","' between it and the one before
    fingerprint, end = scan(text, end + 2)
    shard, end = scan(text, end + 2)
    end = text.index('"', end + 2) + 1  # past the content hash, which holds no escapes
    split, end = scan(text, end + 2)
    if text[end + 1] != '"':
      return None
    label, _ = scan(text, end + 2)
    return (uri, fingerprint, shard, split, label) if label else None

  def near_fields(self, text: str) -> Optional[Tuple[str, str, str, bool, int, int]]:
    """(content hash, perceptual hash, colour signature, damaged, longer side, stored bytes) of a
    line of the lookup by content, read from its end without parsing the rest: what the near-copy
    grouping needs of every kept record, where a JSON parse of each line cost more than the rest
    of its work. None for a line that does not end as line() writes them now (a catalog's from
    before the colour signature): parse it instead."""
    quality = text.rfind('[')  # the flags' list: no other field after the labels holds a bracket
    hashes = text[text.find(']', quality) + 1:].rstrip('\n').split('","')
    numbers = text[:quality - 1].rsplit(',', 6)[1:]
    if len(hashes) != 2 or hashes[0][:2] != ',"' or hashes[1][-2:] != '"]' or not numbers[0].isdigit():
      return None
    longer_side, stored_bytes, *_, damaged = numbers
    return text[2:66], hashes[0][2:], hashes[1][:-2], damaged == 'true', int(longer_side), int(stored_bytes)

  def identity_of(self, entry: Entry) -> Union[str, Tuple[str, str]]:
    return (entry.source_sha256, entry.uri) if self.by_content else entry.uri

  def updated(self, text: str, dropped: Set[Any], added: Iterable[str]) -> str:
    """A lookup file's text (``text``, possibly empty) without the lines of the identities
    ``dropped``, with the lines ``added`` in place of those of theirs, sorted. The lines kept
    are copied as they are: only their identities are read."""
    lines: Dict[Any, str] = {}
    for value in text.splitlines(keepends=True):
      identity = self.identity(value)
      if identity not in dropped:
        lines[identity] = value
    for value in added:
      lines[self.identity(value)] = value
    return ''.join(lines[identity] for identity in sorted(lines))

  def updated_sorted(self, data: bytes, dropped: Set[Any], added: Iterable[str]) -> bytes:
    """What updated() gives of a lookup file, as the file's bytes: from ``data``, the bytes of one
    that updated() wrote (sorted by identity; encoded, as every file of the output is, with a
    name's lone surrogates as JSON escapes). It reads only the identities of the lines a dropped
    or added identity reaches, by binary search, where updated() reads every line's, and copies
    the other lines as bytes, never decoded: an update that changes 1% of a file's records
    copies the rest."""
    lines = data.splitlines(keepends=True)
    changes: Dict[Any, Optional[str]] = dict.fromkeys(dropped)
    changes.update((self.identity(value), value) for value in added)
    pieces, start = [], 0
    for identity in sorted(changes):
      at = self._place(lines, identity, start)
      pieces.extend(lines[start:at])
      start = at + 1 if at < len(lines) and self._identity_of_bytes(lines[at]) == identity else at
      if changes[identity] is not None:
        pieces.append(output_layout.encoded(changes[identity]))
    pieces.extend(lines[start:])
    return b''.join(pieces)

  def _place(self, lines: List[bytes], identity: Any, start: int) -> int:
    """Where the line of ``identity`` is or would go among the sorted ``lines``, from ``start``: by
    content, among the lines of its hash, found first by their first bytes, undecoded. Searched
    from ``start`` outwards (_galloped), as the changes come in order and a file written again
    with its delta's takes one change in eight of its lines or more: a search of the whole rest
    read twice as many keys."""
    if not self.by_content:
      return _galloped(lines, identity, start, self._identity_of_bytes)
    sha = identity[0].encode('ascii')
    start = _galloped(lines, sha, start, _hash_of)
    end = start
    while end < len(lines) and _hash_of(lines[end]) == sha:  # a picture's copies: few
      end += 1
    return bisect.bisect_left(lines, identity, start, end, key=self._identity_of_bytes)

  def _identity_of_bytes(self, line: bytes) -> Union[str, Tuple[str, str]]:
    start = 69 if self.by_content else 2  # where the uri starts, as line() writes it
    end = line.find(b'","', start)
    if end > 0 and b'\\' not in line[start:end]:  # no escape, so the uri ends there: only it decoded
      uri = line[start:end].decode('utf-8')
      return (line[2:66].decode('ascii'), uri) if self.by_content else uri
    return self.identity(line.decode('utf-8', 'surrogateescape'))

  def delta_changes(self, text: str) -> Dict[Any, Optional[str]]:
    """The changes a delta's text holds, by identity: a line added or replacing the file's, or
    None where the file's line is dropped (the delta's line ``[0, <identity>]``)."""
    changes: Dict[Any, Optional[str]] = {}
    for value in text.splitlines(keepends=True):
      if value.startswith(_DROPPED):
        fields = json.loads(value)[1:]
        changes[tuple(fields) if self.by_content else fields[0]] = None
      else:
        changes[self.identity(value)] = value
    return changes

  def delta(self, changes: Mapping[Any, Optional[str]]) -> bytes:
    """The bytes of a delta holding ``changes`` (delta_changes'), sorted by identity."""
    return output_layout.encoded(''.join(
        changes[identity] if changes[identity] is not None
        else _dumps([0, *identity] if self.by_content else [0, identity]) for identity in sorted(changes)))

  def with_changes(self, data: bytes, changes: Mapping[Any, Optional[str]]) -> bytes:
    """A lookup file's bytes (``data``) with its delta's changes (delta_changes') made: what the
    file would hold written again whole (updated_sorted)."""
    return self.updated_sorted(data, set(changes), [value for value in changes.values() if value is not None])


BY_URI = Lookup(output_layout.LOOKUP_DIR, by_content=False)
BY_CONTENT = Lookup(output_layout.CONTENT_LOOKUP_DIR, by_content=True)


def checksum(data: bytes) -> str:
  return hashlib.sha256(data).hexdigest()


def check(found: LookupFile, data: bytes) -> None:
  """DamagedOutput naming lookup file ``found`` unless its bytes (``data``) are what the run
  record says: its checksum, and as many lines as entries of its own (not its delta's)."""
  _check_bytes(found.file, data, found.sha256, found.own_entries)


def check_delta(found: LookupFile, delta: bytes) -> None:
  """DamagedOutput naming the delta of lookup file ``found`` unless its bytes (``delta``) are
  what the run record says."""
  _check_bytes(output_layout.lookup_delta_file(found.file), delta, found.delta_sha256, found.delta_entries)


def _check_bytes(name: str, data: bytes, sha256: Optional[str], entries: Optional[int]) -> None:
  """DamagedOutput naming file ``name`` unless its bytes have the checksum and the lines the run record says.

  Args:
    name: the file, as the message names it.
    data: its bytes.
    sha256: the checksum the run record gives it.
    entries: the lines the run record gives it.
  """
  if checksum(data) != sha256:
    raise DamagedOutput(f'{name} is not the lookup file the run wrote: its checksum differs')
  lines = data.count(b'\n')
  if lines != entries:
    raise DamagedOutput(f'{name} lists {lines:,} entries where the run record says {entries:,}')


def checked(found: LookupFile, data: bytes, lookup: Lookup = BY_URI) -> List[Tuple[str, Entry]]:
  """(shard id, entry) of each line of ``lookup``'s file ``found`` (its bytes ``data``), checked
  against what the run record says of it (check)."""
  check(found, data)
  try:
    return [lookup.parse(value) for value in data.decode('utf-8', 'surrogateescape').splitlines()]
  except (ValueError, TypeError, IndexError) as e:
    raise DamagedOutput(f'{found.file}: {rejections.first_line(e)}') from e
