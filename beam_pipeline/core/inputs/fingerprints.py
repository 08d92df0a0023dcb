"""Fingerprints: what an input was when it was listed, made from the metadata its listing gives
for free, so that a later run (--incremental) can tell a changed file from an unchanged one
without reading its bytes.

A fingerprint is a short ASCII string, compared for equality only; '' (UNKNOWN) means the
metadata could not be had, and a comparison must count such an input as changed. Each kind has
its own prefix, so fingerprints of two kinds are never equal:

- ``file:SIZE:MTIME_NS:INODE:CTIME_NS``: a local file, from os.stat, a symlink followed as the
  read follows it; the inode and the change time, which no tool can set back, see a file
  rewritten with its size and modification time put back (``touch -r``, some sync tools), and
  a file replaced by another (a move, a restore);
- ``gcs:GENERATION:CRC32C:SIZE``: a Cloud Storage object as its listing gives it; the generation
  changes with every write, even of the same bytes; CRC32C is the base64 the API gives;
- ``meta:SIZE:UPDATED``: another remote file, from Beam's FileSystems metadata: its size in bytes
  and last update in seconds (repr of the float); a file system that gives no time gives UNKNOWN,
  since a rewrite of the same size would go unseen;
- ``FILE|row:HASH``: a manifest row, FILE the fingerprint of the file it names (one of the above)
  and HASH the first 16 hex digits of the SHA-256 of what the row gives its record (label, labels,
  split, extras, boxes), so that a relabelled row counts as changed though its file did not. An
  image that several rows give boxes (AutoML detection) hashes every row's, in row order.
"""
import hashlib
import json
import os
from typing import Iterable, Optional

from beam_pipeline.core.messages import InputItem

UNKNOWN = ''
_HASH_DIGITS = 16
_ROW = '|row:'


def of_stat(stat: os.stat_result) -> str:
  return f'file:{stat.st_size}:{stat.st_mtime_ns}:{stat.st_ino}:{stat.st_ctime_ns}'


def of_local_file(path: str) -> str:
  """A local file's, from one os.stat; UNKNOWN if it cannot be stat'ed (dangling, unreadable
  folder): its read will say why."""
  try:
    stat = os.stat(path)
  except (OSError, ValueError):
    return UNKNOWN
  return of_stat(stat)


def of_object(generation: Optional[int], crc32c: Optional[str], size: Optional[int]) -> str:
  """A Cloud Storage object's, from the fields of its listing; UNKNOWN without a generation."""
  if generation is None or size is None:
    return UNKNOWN
  return f'gcs:{generation}:{crc32c or ""}:{size}'


def of_metadata(size: Optional[int], last_updated: Optional[float]) -> str:
  """A remote file's, from FileSystems' FileMetadata (size_in_bytes, last_updated_in_seconds)."""
  if size is None or not last_updated:
    return UNKNOWN
  return f'meta:{size}:{float(last_updated)!r}'


def of_row(file_fingerprint: str, item: InputItem) -> str:
  """A manifest row's: the fingerprint of the file it names, with a hash of what the row says
  about it; UNKNOWN if the file's is."""
  if not file_fingerprint:
    return UNKNOWN
  said = [item.label, list(item.labels), item.split, [list(pair) for pair in item.extras],
          [list(obj._replace(where='')) for obj in item.objects], item.annotated_size]
  return file_fingerprint + _ROW + _hash(json.dumps(said, sort_keys=True, default=repr))


def of_rows(fingerprints: Iterable[str]) -> str:
  """The fingerprint of one image from those of the rows that name it, in row order: any row's
  change changes it. A single row's stays as it is."""
  fingerprints = list(fingerprints)
  if UNKNOWN in fingerprints:
    return UNKNOWN
  if len(fingerprints) == 1:
    return fingerprints[0]
  return fingerprints[0].partition(_ROW)[0] + _ROW + _hash('\n'.join(fingerprints))


def of_record(item: InputItem) -> str:
  """The fingerprint of everything an item's record is made from: its file's, and what the
  listing gives besides the bytes (a manifest's label and split, its boxes), so that a relabelled
  file or a moved box counts as changed. An unknown file fingerprint stays unknown."""
  if not item.fingerprint:
    return UNKNOWN
  given = repr((item.label, item.labels, item.split, item.extras, item.objects, item.annotated_size))
  return f'{item.fingerprint}:{hashlib.sha256(given.encode("utf-8", "backslashreplace")).hexdigest()[:_HASH_DIGITS]}'


def only_file_changed(today: str, earlier: str) -> bool:
  """Whether two fingerprints of a record (of_record's) differ in the file's alone, what the
  listing gives besides the bytes (label, split, a manifest row's) being the same: then the
  file's bytes decide whether the record changed (a file touched, copied over with the same
  bytes, an object uploaded again)."""
  return bool(today and earlier) and today != earlier and _given(today) == _given(earlier)


def same_bytes(today: str, earlier: str) -> Optional[bool]:
  """Whether two record fingerprints' files hold the same bytes, if their metadata can tell: a
  Cloud Storage object's CRC32C and size can (an object uploaded again has a new generation);
  None for other kinds, whose bytes must be hashed to tell."""
  today_file, earlier_file = _file(today).split(':'), _file(earlier).split(':')
  if today_file[0] != 'gcs' or earlier_file[0] != 'gcs' or not today_file[2] or not earlier_file[2]:
    return None
  return today_file[2:] == earlier_file[2:]


def _file(record_fingerprint: str) -> str:
  """The file's fingerprint in of_record's."""
  return record_fingerprint.rpartition(':')[0].partition(_ROW)[0]


def _given(record_fingerprint: str) -> str:
  """What of_record's fingerprint holds besides the file's: a manifest row's hash (of_row's)
  and the hash of what the listing gives."""
  head, _, given = record_fingerprint.rpartition(':')
  return head.partition(_ROW)[2] + ':' + given


def _hash(text: str) -> str:
  return hashlib.sha256(text.encode('utf-8', 'surrogateescape')).hexdigest()[:_HASH_DIGITS]
