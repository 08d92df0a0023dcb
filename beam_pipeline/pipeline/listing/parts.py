"""The parts an input is listed in, and the items each part lists.

A Cloud Storage pattern is listed one subfolder per part (object_listing), an
uncompressed manifest one byte range per part (manifest_parts), so that workers list a
large input in parallel; a local one is listed whole.
"""
import csv
import itertools
import os
import re
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple, Union

from apache_beam.io.filesystem import BeamIOError, CompressionTypes, FileSystem
from apache_beam.io.filesystems import FileSystems

from beam_pipeline.pipeline import tags
from beam_pipeline.pipeline.listing import inputs, local_files, manifest_files, object_listing
from beam_pipeline.core import isolation, rejections
from beam_pipeline.core.console import progress_counts
from beam_pipeline.core.inputs import fingerprints as input_fingerprints
from beam_pipeline.core.inputs import listing_digest, manifest_parts, manifest_rows, manifest_text
from beam_pipeline.core.messages import InputItem, Rejection
from beam_pipeline.core.rejections import Rejected
from beam_pipeline.core.settings import CSV, DIRECTORY, GLOB, InputSpec

LIST_BATCH_SIZE = 256


class InputPart(NamedTuple):
  """What one worker lists: the whole input, the objects of one Cloud Storage prefix, or one
  byte range of a manifest."""
  spec: InputSpec
  prefix: Optional[str] = None  # a gs:// prefix: its objects, all of them if below, else those beside it
  below: bool = True
  rows: Optional[manifest_parts.Part] = None
  header: Optional[Tuple[str, ...]] = None  # a CSV manifest's, lowercased


def input_parts(spec: InputSpec, part_bytes: int = manifest_parts.PART_BYTES) -> Iterator[InputPart]:
  """The parts ``spec`` is listed in; streamed, so a pattern with a million subfolders or a
  manifest of a thousand parts never sits in memory."""
  if spec.is_manifest:
    header = manifest_files.csv_header(spec.path) if spec.kind == CSV else None
    if manifest_text.is_compressed(spec.path):  # a compressed stream cannot be entered midway
      yield InputPart(spec, header=header)
      return
    with FileSystems.open(spec.path, compression_type=CompressionTypes.UNCOMPRESSED) as stream:
      for rows in manifest_parts.parts(stream, spec.kind == CSV, part_bytes):
        yield InputPart(spec, rows=rows, header=header)
  elif object_listing.lists_in_parts(spec.path):
    prefix = object_listing.fixed_prefix(spec.path)
    yield InputPart(spec, prefix, below=False)
    if object_listing.reaches_subfolders(spec.path):
      for folder in object_listing.subfolders(prefix):
        yield InputPart(spec, folder)
  else:
    yield InputPart(spec)


def list_input_batches(part: InputPart, output: Optional[str] = None, size: int = LIST_BATCH_SIZE, *,
                       fingerprints: bool = False, listed: Optional[List[Union[InputItem, Rejection]]] = None
                       ) -> Iterator[Union[List[InputItem], Rejection]]:
  """list_part with its items in lists; a manifest row that names no usable input comes out alone.

  Args:
    part: the part to list.
    output: the run's output, whose files are not listed if it lies inside the input.
    size: how many items a list holds: the unit of work validation workers take.
    fingerprints: each item has its fingerprint (--incremental; list_part).
    listed: what list_part gave for the part already, if it was listed (digest_of_listing's ``kept_for``).
  """
  batch = []
  for item in list_part(part, output, fingerprints=fingerprints) if listed is None else listed:
    if isinstance(item, Rejection):
      yield item
      continue
    batch.append(item)
    if len(batch) == size:
      yield batch
      batch = []
  if batch:
    yield batch


def list_part(part: InputPart, output: Optional[str] = None, *, skip_non_images: bool = True,
              fingerprints: bool = False) -> Iterator[Union[InputItem, Rejection]]:
  """All items of one part; manifest rows that cannot be used come out as rejections, and so do
  a folder's or a glob's files that are no images (skipped_files: reason skipped), unless
  ``skip_non_images`` is False. Each item is made behind the isolation boundary: one that fails
  is rejected alone.

  Args:
    part: the part to list.
    output: the run's own output, whose files are not listed if it lies inside the input.
    skip_non_images: files that are no images are rejected as skipped; False lists them (a folder of VOC
      annotations lists its .xml files).
    fingerprints: --incremental: each item has its fingerprint (core/inputs/fingerprints.py), from the listing's
      own metadata, or for a local file or a manifest's row one os.stat or metadata request more; without, it has
      none ('').
  """
  spec = part.spec
  skip = _inside(output, spec) if output and not spec.is_manifest else None

  def outside(path: str) -> bool:
    return not skip or not (os.path.abspath(path) if local_files.is_local(path) else path).startswith(skip + '/')

  if spec.kind == CSV:
    yield from _read_csv_manifest(spec.path, part, spec.multi_label, fingerprints)
    return
  if spec.is_manifest:
    yield from _read_jsonl_manifest(spec.path, part, spec.multi_label, fingerprints)
    return
  root = spec.path[:-len('/**')] if spec.kind == DIRECTORY else None
  for path, fingerprint in _listed_files(part, root, skip, fingerprints):
    if not outside(path):
      continue
    skipped = inputs.skip_reason(spec, path) if skip_non_images else None
    if skipped:
      yield Rejection(path, rejections.SKIPPED, skipped)
    else:
      yield _listed(path, path, _path_item, path, root + '/' if root else None, fingerprint)


def _listed_files(part: InputPart, root: Optional[str], skip: Optional[str],
                  fingerprints: bool) -> Iterator[Tuple[str, Optional[str]]]:
  """The files of a folder, glob or Cloud Storage part, each with its fingerprint if asked for
  (None: a local file's, which _path_item takes), else ''.

  Args:
    part: the part to list: a folder's or a glob's input, or one Cloud Storage prefix of it.
    root: a folder input's folder (its path without '/**'); None for other inputs.
    skip: the run's output where it lies inside the input (_inside): a local listing does not go into it.
    fingerprints: each file with its fingerprint (--incremental).
  """
  spec = part.spec
  if part.prefix:
    matches = re.compile(FileSystem.translate_pattern(spec.path)).match
    if not fingerprints:
      yield from ((uri, '') for uri in filter(matches, object_listing.objects(part.prefix, part.below)))
      return
    for listed in object_listing.object_versions(part.prefix, part.below):
      if matches(listed.uri):
        yield listed.uri, input_fingerprints.of_object(listed.generation, listed.crc32c, listed.size)
    return
  if spec.kind == DIRECTORY and local_files.is_local_dir(root):
    paths = local_files.walk_local_files(root, skip=skip)
  elif spec.kind == GLOB and local_files.is_local(spec.path):
    paths = local_files.match_local_glob(spec.path, skip)
  else:
    for metadata in FileSystems.match([spec.path])[0].metadata_list:
      yield metadata.path, (input_fingerprints.of_metadata(metadata.size_in_bytes, metadata.last_updated_in_seconds)
                            if fingerprints else '')
    return
  yield from ((path, None if fingerprints else '') for path in paths)


def _inside(output: str, spec: InputSpec) -> Optional[str]:
  """``output`` (absolute, if local) if it lies where listing ``spec`` looks, else None."""
  top = re.match(r'[^[*?]*', spec.path).group(0)
  if local_files.is_local(output) != local_files.is_local(top):
    return None
  if local_files.is_local(output):
    top = os.path.abspath(top or '.')
    real, real_top = os.path.realpath(output), os.path.realpath(top)
    if (real + '/').startswith(real_top.rstrip('/') + '/'):  # where the listing meets it, through links too
      output = os.path.join(top, os.path.relpath(real, real_top)) if real != real_top else top
    else:
      output = os.path.abspath(output)
  output = output.rstrip('/')
  return output if (output + '/').startswith(top.rstrip('/') + '/') else None


def _listed(where: str, text: str, make: Callable[..., InputItem], *args) -> Union[InputItem, Rejection]:
  """``make(*args)``, the item of one path or manifest row (``text``), or the rejection of
  ``where`` it gives."""
  item = isolation.run(isolation.LIST, [text], make, *args)
  return Rejection.of(where, item) if isinstance(item, Rejected) else item


def _path_item(path: str, root: Optional[str] = None, fingerprint: Optional[str] = '') -> InputItem:
  """The item of a listed file; a local file's fingerprint (None) is taken here, behind the
  isolation boundary."""
  isolation.fault_point(isolation.LIST)
  fingerprint = input_fingerprints.of_local_file(path) if fingerprint is None else fingerprint
  return InputItem(path, split=inputs.split_folder(root, path) if root else None, fingerprint=fingerprint)


def _read_csv_manifest(path: str, part: InputPart, multi_label: bool,
                       fingerprints: bool) -> Iterator[Union[InputItem, Rejection]]:
  """The items of a CSV manifest's rows in ``part``, numbered by row; a row that cannot be used comes out as its
  rejection.

  Args:
    path: the manifest's path.
    part: the part read: its byte range of rows (all of them if none) and the manifest's header, if it has one.
    multi_label: --multi_label: a row may name several labels.
    fingerprints: each item has its fingerprint, of the row and the file it names (_numbered).
  """
  first_row = part.rows.first_row if part.rows else 1
  with manifest_files.open_text(path, part.rows) as text:
    # skipinitialspace reads 'TRAIN, a.jpg, cat' as intended; a quoted uri keeps its spaces.
    rows = csv.reader(text, skipinitialspace=True)
    for row_number in itertools.count(first_row):
      where = manifest_rows.row_name(path, True, row_number)
      try:
        row = next(rows)
      except StopIteration:
        break
      except csv.Error as e:  # a field past csv's size limit, a NUL byte: that row alone
        yield Rejection(where, rejections.BAD_MANIFEST_ROW, f'row is not valid CSV: {rejections.first_line(e)}')
        continue
      if row_number == 1 and part.header:
        continue
      if not any(cell.strip() for cell in row):
        continue
      yield _numbered(_listed(where, ','.join(row), manifest_rows.csv_row_item, path, part.header, row, where,
                              multi_label), row_number, fingerprints)


def _read_jsonl_manifest(path: str, part: InputPart, multi_label: bool,
                         fingerprints: bool) -> Iterator[Union[InputItem, Rejection]]:
  """The items of a JSON Lines manifest's lines in ``part``, numbered by line; a line that cannot be used comes out
  as its rejection.

  Args:
    path: the manifest's path.
    part: the part read: its byte range of lines (all of them if none).
    multi_label: --multi_label: a line may name a list of labels.
    fingerprints: each item has its fingerprint, of the line and the file it names (_numbered).
  """
  with manifest_files.open_text(path, part.rows) as text:
    for line_number, line in enumerate(text, start=part.rows.first_row if part.rows else 1):
      if line.strip():
        yield _numbered(_listed(manifest_rows.row_name(path, False, line_number), line, manifest_rows.jsonl_line_item,
                                path, line, multi_label), line_number, fingerprints)


def _numbered(item: Union[InputItem, Rejection], row: int, fingerprints: bool) -> Union[InputItem, Rejection]:
  """An item with the number of the manifest row that lists it, and its fingerprint if asked for."""
  if not isinstance(item, InputItem):
    return item
  if fingerprints:
    return item._replace(row=row, fingerprint=input_fingerprints.of_row(_named_file_fingerprint(item.uri), item))
  return item._replace(row=row)


def _named_file_fingerprint(uri: str) -> str:
  """The fingerprint of the file a manifest row names: one os.stat if it is local, else one
  metadata request (FileSystems.match of the uri itself), never a read; UNKNOWN if it has none."""
  if local_files.is_local(uri):
    return input_fingerprints.of_local_file(uri)
  if re.search(r'[*?[]', uri):  # FileSystems.match would list it as a pattern: of how many objects?
    return input_fingerprints.UNKNOWN
  try:
    found = [m for m in FileSystems.match([uri])[0].metadata_list if m.path == uri]
  except BeamIOError:  # missing, unreachable: its read will say why
    return input_fingerprints.UNKNOWN
  return (input_fingerprints.of_metadata(found[0].size_in_bytes, found[0].last_updated_in_seconds) if found
          else input_fingerprints.UNKNOWN)


def parts_counted(spec: InputSpec) -> Iterator[InputPart]:
  """input_parts, counted for the progress line once all are known."""
  count = 0
  for part in input_parts(spec):
    count += 1
    yield part
  progress_counts.counts().parts_planned(count)


def batches_counted(part: InputPart, output: str, fingerprints: bool = False, run_id: Optional[str] = None
                    ) -> Iterator[Any]:
  """list_input_batches for the pipeline: counted for the progress line, a manifest row that
  names no usable input rejected (tagged).

  Args:
    part: the part to list.
    output: the run's output, whose files are not listed if it lies inside the input.
    fingerprints: each item has its fingerprint (Settings.incremental).
    run_id: the run's id: a part it listed in this process already (digest_of_listing's ``kept_for``) is not listed
      again.
  """
  counts = progress_counts.counts()
  for batch in list_input_batches(part, output, fingerprints=fingerprints, listed=_KEPT.pop((run_id, part), None)):
    if isinstance(batch, Rejection):
      if batch.reason != rejections.SKIPPED:  # a skipped file is no image: progress counts images
        counts.listed(1)
        counts.checked(1, rejected=1)
      yield tags.rejected(batch)
    else:
      counts.listed(len(batch))
      yield batch
  counts.part_listed()


# What digest_of_listing listed for a run, by (run id, part), until the run's pipeline lists that
# part in this process (batches_counted) or the run ends (forget_listing): an update whose input
# changed lists it once, not once to find out and again to convert.
_KEPT: Dict[Tuple[str, InputPart], List[Union[InputItem, Rejection]]] = {}


def digest_of_listing(spec: InputSpec, output: str, kept_for: Optional[str] = None) -> listing_digest.Digest:
  """The digest of the whole input as an --incremental run's pipeline lists it (graph.build's
  DigestListing), listed here in one process, a part at a time: each item with its record's
  fingerprint, and what the listing turns away. ``kept_for``: a run id whose pipeline lists in
  this process, which then takes what was listed here instead of listing it again."""
  digest = listing_digest.Digest()
  for part in input_parts(spec):
    listed = list_part(part, output, fingerprints=True)
    if kept_for is not None:  # else streamed, never held
      listed = _KEPT[(kept_for, part)] = list(listed)
    digest = digest.merge(listing_digest.of(
        value if isinstance(value, Rejection) else value._replace(fingerprint=input_fingerprints.of_record(value))
        for value in listed))
  return digest


def forget_listing(run_id: str) -> None:
  """Drops what digest_of_listing kept for the run ``run_id`` and its pipeline did not take."""
  for key in [key for key in _KEPT if key[0] == run_id]:
    del _KEPT[key]
