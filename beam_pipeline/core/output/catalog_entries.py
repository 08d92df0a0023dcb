"""The catalog's entries: for each shard, one per record, in the shard's order, saying what the
record was made from and what it counts for. Every run makes them as it writes a shard, and sums
up the shard's report from them (run_totals.shard_report); an --incremental output keeps them
beside each shard as its catalog, one JSON line each.

A later run compares it with today's listing (by uri and fingerprint) to find what was
added, changed and deleted; it places a new copy or near copy (by perceptual hash) of a
catalogued picture in that picture's split, keeps each class's split fractions from the
catalogued counts, and writes a shard
that lost records again from its own bytes, recounting its report from these lines
without reading an image. One file per shard, beside the data, so the catalog is read in
parallel like the shards and no element holds all of it; a kept shard keeps its catalog
file untouched as well.
"""
import hashlib
import json
from typing import Iterable, List, NamedTuple, Optional, Tuple

from beam_pipeline.core import rejections
from beam_pipeline.core.messages import CheckedImage, Rejection
from beam_pipeline.core.output import output_layout
from beam_pipeline.core.output.run_record import Shard
from beam_pipeline.core.rejections import DamagedOutput


class Entry(NamedTuple):
  """One record of a shard: its input, and what it counts for in the run record."""
  uri: str
  fingerprint: str  # the input's, as listed (fingerprints.py); '' if unknown: never taken as unchanged
  source_sha256: str
  split: str
  label: Optional[str]
  labels: Tuple[str, ...]  # --multi_label
  objects: Tuple[str, ...]  # --annotations: each object's class
  longer_side: int  # of the stored image
  stored_bytes: int
  reencoded: bool
  resized: bool
  rotated: bool
  damaged: bool
  # Its data-quality flags (image_quality.flags), its perceptual hash (perceptual_hash.phash) and
  # colour signature (colour_signature), which a later run compares new files with. Last, with
  # defaults: a catalog of a version before them lacks them (parse); its records are then compared
  # by content hash only, or without their colours.
  quality: Tuple[str, ...] = ()
  phash: str = ''
  colour: str = ''

  @property
  def stratum(self) -> str:
    """What its split was stratified by (messages.ContentGroup.stratum)."""
    return self.label or (self.objects[0] if self.objects else '')


def entry(record: CheckedImage, stored_bytes: int, resized: bool, rotated: bool) -> Entry:
  """The catalog entry of a record as written.

  Args:
    record: the record written: the input it came from, its split, labels, hashes and stored size.
    stored_bytes: the size of the image as stored (the source's bytes or their re-encoding).
    resized: whether the stored image is smaller than its source (--max_side).
    rotated: whether the stored image was turned upright by its Exif orientation.
  """
  return Entry(record.uri, record.fingerprint, record.source_sha256, record.split, record.label, tuple(record.labels),
               tuple(obj.label for obj in record.objects), max(record.height, record.width), stored_bytes,
               bool(record.reencoded), bool(resized), bool(rotated), bool(record.damaged), tuple(record.quality),
               record.phash or '', record.colour or '')


def line(value: Entry) -> str:
  """An entry as one line of its shard's catalog file."""
  return json.dumps(list(value), ensure_ascii=False, separators=(',', ':')) + '\n'


def parse(text: str) -> Entry:
  return entry_of(json.loads(text))


def entry_of(fields: List) -> Entry:
  """An entry of its fields as a catalog line's JSON array holds them."""
  fields[5], fields[6] = tuple(fields[5]), tuple(fields[6])
  if len(fields) > _QUALITY:
    fields[_QUALITY] = tuple(fields[_QUALITY])
  return Entry(*fields)


_QUALITY = Entry._fields.index('quality')


def text(entries: Iterable[Entry]) -> str:
  return ''.join(map(line, entries))


def checksum(text_of_file: str) -> str:
  """The SHA-256 of a catalog file of this text, as shard_writer.write_text writes it: the run
  record keeps it, and an update checks each catalog it reads against it."""
  return hashlib.sha256(output_layout.encoded(text_of_file)).hexdigest()


def checked(shard: Shard, catalog_bytes: bytes, shard_bytes: Optional[int]) -> List[Entry]:
  """The entries of ``shard``'s catalog file (``catalog_bytes``), checked against what the run
  record says of the shard: its shard file there (``shard_bytes``: its size, None if missing) and
  of its size, its catalog's checksum (a record from before checksums has none), and as many
  entries as the shard holds records. DamagedOutput naming the file otherwise: an update that
  builds on it would miscount the dataset or store records twice."""
  _check_files(shard, catalog_bytes, shard_bytes)
  try:
    found = entries(catalog_bytes.decode('utf-8', 'surrogateescape'))
  except (ValueError, TypeError, IndexError) as e:
    raise DamagedOutput(f'{shard.catalog_file}: {rejections.first_line(e)}') from e
  _check_count(shard, len(found))
  return found


def check(shard: Shard, catalog_bytes: bytes, shard_bytes: Optional[int]) -> None:
  """checked's checks, without parsing a catalog whose checksum the record holds (its lines
  counted instead): what an update that reads the catalog through its lookup checks of the
  shards it keeps."""
  if not shard.catalog_sha256:
    checked(shard, catalog_bytes, shard_bytes)
    return
  _check_files(shard, catalog_bytes, shard_bytes)
  _check_count(shard, catalog_bytes.count(b'\n'))


def _check_files(shard: Shard, catalog_bytes: bytes, shard_bytes: Optional[int]) -> None:
  """The shard there, of its recorded size, and its catalog of its recorded checksum (if any)."""
  if shard_bytes is None:
    raise DamagedOutput(f'{shard.file} is missing')
  if shard_bytes != shard.num_bytes:
    raise DamagedOutput(f'{shard.file} holds {shard_bytes:,} bytes where the run record says {shard.num_bytes:,}')
  if shard.catalog_sha256 and hashlib.sha256(catalog_bytes).hexdigest() != shard.catalog_sha256:
    raise DamagedOutput(f'{shard.catalog_file} is not the catalog the run wrote: its checksum differs')


def _check_count(shard: Shard, num_entries: int) -> None:
  if num_entries != shard.num_examples:
    raise DamagedOutput(f'{shard.catalog_file} lists {num_entries:,} records where {shard.file} holds '
                        f'{shard.num_examples:,}')


def entries(text_of_file: str) -> List[Entry]:
  """The entries of one catalog file, in the shard's order."""
  return [parse(value) for value in text_of_file.splitlines() if value.strip()]


# What today's listing says of an input the catalog holds, or of a new one. TOUCHED: its
# fingerprint changed but not its bytes (fingerprints.only_file_changed): its record is kept,
# its catalog line given the new fingerprint.
UNCHANGED, CHANGED, ADDED, REMOVED, TOUCHED = 'unchanged', 'changed', 'added', 'removed', 'touched'

# The rejections an unchanged file would get again, whatever else changed: what its bytes (and
# its row, its boxes, the options) are. They are carried from the earlier errors files instead
# of being read again; the others (a read that failed, a copy of another file, a manifest's
# repeated row, an unexpected error) are tried again.
CARRIED = frozenset({rejections.EMPTY, rejections.NOT_IMAGE, rejections.TRUNCATED, rejections.CORRUPT,
                     rejections.TOO_MANY_PIXELS, rejections.TOO_SMALL, rejections.FILE_TOO_LARGE,
                     rejections.UNSUPPORTED_PIXELS, rejections.NO_LABEL, rejections.DAMAGED_JPEG,
                     rejections.UNANNOTATED, rejections.OUTSIDE_INPUT_ROOT})


def carried(rejection: Rejection) -> bool:
  """Whether a later run may carry ``rejection`` (an earlier errors file's) for an unchanged file."""
  return bool(rejection.fingerprint) and rejection.reason in CARRIED


def change(fingerprints: List[str], earlier: List[str]) -> str:
  """What became of one uri since the earlier run: the fingerprints today's listing gives it (a
  manifest may name it twice) against the one the earlier run recorded, in its catalog or its
  errors files (at most one). An unknown fingerprint ('') is never unchanged: the file is read
  again rather than trusted."""
  if not fingerprints:
    return REMOVED
  if not earlier:
    return ADDED
  if len(fingerprints) == 1 and fingerprints[0] and fingerprints[0] == earlier[0]:
    return UNCHANGED
  return CHANGED
