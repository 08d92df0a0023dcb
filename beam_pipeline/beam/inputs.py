"""What --input names (a glob, a directory or a manifest), the parts it is listed in, the
items each part lists, and how a remote image is opened.

Listing happens inside the pipeline, from a single pattern or manifest path, so a
million-file input never travels in the job graph; at launch we only check that
there is something to list. A Cloud Storage pattern is listed one subfolder per part
(object_listing), an uncompressed manifest one byte range per part (manifest_parts),
so that workers list a large input in parallel; a local one is listed whole.
"""
import csv
import io
import itertools
import os
import re
from typing import Any, BinaryIO, Callable, Iterator, List, NamedTuple, Optional, Tuple, Union

from apache_beam.io.filesystem import CompressionTypes, FileSystem
from apache_beam.io.filesystems import FileSystems

from beam_pipeline.beam import local_files, object_listing, tags
from beam_pipeline.core import isolation, manifest_parts, manifest_rows, manifest_text, progress_counts, rejections
from beam_pipeline.core.records import InputItem, Rejection
from beam_pipeline.core.rejections import InputFileError, Rejected
from beam_pipeline.core.settings import CSV, DIRECTORY, GLOB, JSONL, InputSpec
from beam_pipeline.core.user_errors import UsageError

_MANIFEST_SUFFIXES = {'.csv': CSV, '.csv.gz': CSV, '.jsonl': JSONL, '.jsonl.gz': JSONL,
                      '.ndjson': JSONL, '.json': JSONL}
# Top-level folders of a directory input that name a split: root/train/cat/1.jpg.
_SPLIT_FOLDERS = {'train': 'train', 'training': 'train', 'validation': 'validation', 'valid': 'validation',
                  'val': 'validation', 'dev': 'validation', 'test': 'test', 'testing': 'test'}


def resolve_input(value: str) -> InputSpec:
  """Classifies --input and fails fast, in one line, if it names nothing."""
  if not value:
    raise UsageError('--input is required: a glob, a directory or a .csv/.jsonl manifest')
  lower = value.lower()
  if local_files.is_local_dir(value):  # before glob characters: 'Photos [2023]' is a directory
    if next(local_files.walk_local_files(value), None) is None:
      raise UsageError(f'--input={value} is an empty directory; give a glob, a directory of images or a manifest')
    return InputSpec(DIRECTORY, value.rstrip('/') + '/**')
  for suffix, kind in _MANIFEST_SUFFIXES.items():
    if lower.endswith(suffix):
      if not FileSystems.exists(value):
        raise UsageError(f'--input={value}: manifest not found')
      _check_names_images(value, kind)
      return InputSpec(kind, value)
  if any(c in value for c in '*?['):
    if not _has_match(value):
      raise UsageError(f'--input={value}: the pattern matches no files')
    return InputSpec(GLOB, value)
  pattern = value.rstrip('/') + '/**'
  if _has_match(pattern):
    return InputSpec(DIRECTORY, pattern)
  if not value.endswith('/') and _has_match(value):
    return InputSpec(GLOB, value)  # a single file
  raise UsageError(f'--input={value} does not exist; give a glob, a directory of images or a manifest')


def _check_names_images(path: str, kind: str) -> None:
  """Fails fast, in one line, if the manifest names no image (or its gzip data is damaged
  from the start), reading only its first rows."""
  try:
    with _open_text(path) as text:
      empty = manifest_text.emptiness(text, kind == CSV)
  except InputFileError as e:
    raise UsageError(str(e)) from None
  if empty:
    raise UsageError(f'--input={path} {empty}: it names no image; give a manifest with a row per image')


def open_image(uri: str) -> BinaryIO:
  """A remote image's bytes as stored (the core's reading.Remote.open): a photo named
  x.jpg.gz must not be silently gunzipped."""
  return FileSystems.open(uri, compression_type=CompressionTypes.UNCOMPRESSED)


def _has_match(pattern: str) -> bool:
  try:
    if local_files.is_local(pattern):
      return next(local_files.match_local_glob(pattern), None) is not None
    return bool(FileSystems.match([pattern], limits=[1])[0].metadata_list)
  except Exception:  # Beam raises BeamIOError for a missing directory; a local one may be unreadable
    return False


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
    header = _csv_header(spec.path) if spec.kind == CSV else None
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


def list_input_batches(part: InputPart, output: Optional[str] = None,
                       size: int = LIST_BATCH_SIZE) -> Iterator[Union[List[InputItem], Rejection]]:
  """list_part with its items in lists of ``size`` (the unit of work validation workers
  take); a manifest row that names no usable input comes out alone."""
  batch = []
  for item in list_part(part, output):
    if isinstance(item, Rejection):
      yield item
      continue
    batch.append(item)
    if len(batch) == size:
      yield batch
      batch = []
  if batch:
    yield batch


def list_inputs(spec: InputSpec, output: Optional[str] = None,
                part_bytes: int = manifest_parts.PART_BYTES) -> Iterator[Union[InputItem, Rejection]]:
  """All items of an input, part after part."""
  for part in input_parts(spec, part_bytes):
    yield from list_part(part, output)


def list_part(part: InputPart, output: Optional[str] = None) -> Iterator[Union[InputItem, Rejection]]:
  """All items of one part, but for the files of ``output`` (the run's own, if it lies inside
  the input); manifest rows that cannot be used come out as rejections. Each item is made
  behind the isolation boundary: one that fails is rejected alone."""
  spec = part.spec
  skip = _inside(output, spec) if output and not spec.is_manifest else None

  def outside(path: str) -> bool:
    return not skip or not (os.path.abspath(path) if local_files.is_local(path) else path).startswith(skip + '/')

  root = spec.path[:-len('/**')] if spec.kind == DIRECTORY else None
  if part.prefix:
    matches = re.compile(FileSystem.translate_pattern(spec.path)).match
    paths = filter(matches, object_listing.objects(part.prefix, part.below))
  elif spec.kind == DIRECTORY:
    paths = (local_files.walk_local_files(root, skip=skip) if local_files.is_local_dir(root)
             else (m.path for m in FileSystems.match([spec.path])[0].metadata_list))
  elif spec.kind == GLOB:
    paths = (local_files.match_local_glob(spec.path, skip) if local_files.is_local(spec.path)
             else (m.path for m in FileSystems.match([spec.path])[0].metadata_list))
  elif spec.kind == CSV:
    yield from _read_csv_manifest(spec.path, part, spec.multi_label)
    return
  else:
    yield from _read_jsonl_manifest(spec.path, part, spec.multi_label)
    return
  for path in filter(outside, paths):
    yield (_listed(path, path, _path_item, path, root + '/') if root
           else _listed(path, path, _path_item, path))


def _inside(output: str, spec: InputSpec) -> Optional[str]:
  """``output`` (absolute, if local) if it lies where listing ``spec`` looks, else None."""
  top = re.match(r'[^[*?]*', spec.path).group(0)
  if local_files.is_local(output) != local_files.is_local(top):
    return None
  if local_files.is_local(output):
    output, top = os.path.abspath(output), os.path.abspath(top or '.')
  output = output.rstrip('/')
  return output if (output + '/').startswith(top.rstrip('/') + '/') else None


def _listed(where: str, text: str, make: Callable[..., InputItem], *args) -> Union[InputItem, Rejection]:
  """``make(*args)``, the item of one path or manifest row (``text``), or the rejection of
  ``where`` it gives."""
  item = isolation.run(isolation.LIST, [text], make, *args)
  return Rejection.of(where, item) if isinstance(item, Rejected) else item


def _path_item(path: str, root: Optional[str] = None) -> InputItem:
  isolation.fault_point(isolation.LIST)
  return InputItem(path, split=_split_folder(root, path) if root else None)


class _RawReader(io.RawIOBase):
  """Adapts a FileSystems stream (which may be Beam's CompressedFile, lacking the
  io interface) so TextIOWrapper can decode it incrementally, up to ``limit`` bytes."""

  def __init__(self, stream, limit: Optional[int] = None):
    super().__init__()
    self._stream = stream
    self._left = limit

  def readable(self) -> bool:
    return True

  def readinto(self, buffer) -> int:
    wanted = len(buffer) if self._left is None else min(len(buffer), self._left)
    data = self._stream.read(wanted) if wanted else b''
    buffer[:len(data)] = data
    if self._left is not None:
      self._left -= len(data)
    return len(data)

  def close(self) -> None:
    self._stream.close()
    super().close()


def split_folders(spec: InputSpec) -> List[str]:
  """The top-level folders of a directory input that name a split (train/, val/, ...): one
  directory read, or one delimiter listing on Cloud Storage."""
  if spec.kind != DIRECTORY:
    return []
  root = spec.path[:-len('/**')]
  if local_files.is_local(root):
    names = sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
  else:
    names = [folder.rstrip('/').rsplit('/', 1)[-1] for folder in object_listing.subfolders(root + '/')]
  return [name for name in names if name.lower() in _SPLIT_FOLDERS]


def _split_folder(root: str, path: str) -> Optional[str]:
  """The split a top-level folder names (root/train/cat/1.jpg), if any."""
  parts = path[len(root):].split('/') if path.startswith(root) else []
  return _SPLIT_FOLDERS.get(parts[0].lower()) if len(parts) > 2 else None


def _open_text(path: str, rows: Optional[manifest_parts.Part] = None) -> io.TextIOWrapper:
  """The text of a manifest, or of its byte range ``rows``; newline='' lets csv handle quoted
  line breaks. A .gz one (listed whole) is decompressed by manifest_text, whose errors end
  the run: Beam's own decompression would end a stream cut short as if it were complete."""
  stream = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
  if manifest_text.is_compressed(path):
    stream = manifest_text.Decompressed(stream, path)
  elif rows and rows.start:
    stream.seek(rows.start)
  limit = rows.end - rows.start if rows and rows.end is not None else None
  # surrogateescape: a row that is not UTF-8 is rejected alone (_check_text), not the whole job.
  return io.TextIOWrapper(io.BufferedReader(_RawReader(stream, limit)), encoding='utf-8-sig', newline='',
                          errors='surrogateescape')


def _csv_header(path: str) -> Optional[Tuple[str, ...]]:
  """The lowercased column names, if the manifest's first row names them."""
  with _open_text(path) as text:
    try:
      row = next(csv.reader(text, skipinitialspace=True), [])
    except (csv.Error, UnicodeError):  # the reader rejects that row
      return None
  return tuple(cell.strip().lower() for cell in row) if manifest_rows.is_header(row) else None


def is_detection_csv(spec: InputSpec) -> bool:
  """Whether a CSV manifest is in AutoML Vision's object-detection layout, as its first row is;
  under --multi_label its rows' extra cells are labels instead. Asked at launch, where a .gz
  manifest damaged from its start is said in one line (UsageError)."""
  if spec.kind != CSV or spec.multi_label:
    return False
  try:
    if _csv_header(spec.path):
      return False
    with _open_text(spec.path) as text:
      try:
        first = next((row for row in csv.reader(text, skipinitialspace=True) if any(cell.strip() for cell in row)),
                     [])
      except (csv.Error, UnicodeError):  # the reader rejects that row
        return False
  except InputFileError as e:
    raise UsageError(str(e)) from None
  return manifest_rows.is_detection_row(first)


def _read_csv_manifest(path: str, part: InputPart, multi_label: bool) -> Iterator[Union[InputItem, Rejection]]:
  first_row = part.rows.first_row if part.rows else 1
  with _open_text(path, part.rows) as text:
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
                              multi_label), row_number)


def _read_jsonl_manifest(path: str, part: InputPart, multi_label: bool) -> Iterator[Union[InputItem, Rejection]]:
  with _open_text(path, part.rows) as text:
    for line_number, line in enumerate(text, start=part.rows.first_row if part.rows else 1):
      if line.strip():
        yield _numbered(_listed(manifest_rows.row_name(path, False, line_number), line, manifest_rows.jsonl_line_item,
                                path, line, multi_label), line_number)


def _numbered(item: Union[InputItem, Rejection], row: int) -> Union[InputItem, Rejection]:
  """An item with the number of the manifest row that lists it."""
  return item._replace(row=row) if isinstance(item, InputItem) else item


def parts_counted(spec: InputSpec) -> Iterator[InputPart]:
  """input_parts, counted for the progress line once all are known."""
  count = 0
  for count, part in enumerate(input_parts(spec), start=1):
    yield part
  progress_counts.counts().parts_planned(count)


def batches_counted(part: InputPart, output: str) -> Iterator[Any]:
  """list_input_batches for the pipeline: counted for the progress line, a manifest row that
  names no usable input rejected (tagged)."""
  counts = progress_counts.counts()
  for batch in list_input_batches(part, output):
    if isinstance(batch, Rejection):
      counts.listed(1)
      counts.checked(1, rejected=1)
      yield tags.rejected(batch)
    else:
      counts.listed(len(batch))
      yield batch
  counts.part_listed()
