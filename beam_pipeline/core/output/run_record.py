"""beam_pipeline.json, the run record: what a completed run wrote, for readers, inspection
and audits, as typed values.

It is the commit marker too: written last, so an output without it is not to be read.
Outputs of versions before 0.2 hold it as dataset_info.json, the name TensorFlow
Datasets reads its own metadata from (tfds_metadata.py now writes that);
RunRecord.read still reads them. A field that later versions added has the value
an older record implies; fields the record's JSON holds but these classes do not
know are left out.
"""
import dataclasses
import json
import os
from typing import IO, Any, Callable, Dict, List, Mapping, Optional, Type, TypeVar

from beam_pipeline.core import uris
from beam_pipeline.core.output import output_layout
from beam_pipeline.core.settings import InputSpec

TOOL = 'beam_pipeline'

_Part = TypeVar('_Part')
# A field written only when it has a value: the JSON of outputs without it stays as it was.
_OPTIONAL = {'optional': True}


class _Json:
  """A part of the record as JSON's values: its fields in order, nested parts as objects."""

  def as_dict(self) -> Dict[str, Any]:
    return _plain(self)


def _typed(cls: Type[_Part], data: Mapping[str, Any], **parts: Any) -> _Part:
  """The part ``cls`` of ``data`` (parsed JSON), its nested ``parts`` already typed."""
  names = {field.name for field in dataclasses.fields(cls)} - set(parts)
  return cls(**{key: value for key, value in data.items() if key in names}, **parts)


def _plain(value: Any) -> Any:
  if isinstance(value, _Json):
    return {field.name: _plain(getattr(value, field.name)) for field in dataclasses.fields(value)
            if not (field.metadata.get('optional') and getattr(value, field.name) is None)}
  if isinstance(value, list):
    return [_plain(item) for item in value]
  if isinstance(value, dict):
    return {key: _plain(item) for key, item in value.items()}
  return value


@dataclasses.dataclass(frozen=True, kw_only=True)
class Shard(_Json):
  """One shard file as written."""
  file: str
  num_examples: int
  num_bytes: int
  index_file: Optional[str] = dataclasses.field(default=None, metadata=_OPTIONAL)  # with --index_files
  catalog_file: Optional[str] = dataclasses.field(default=None, metadata=_OPTIONAL)  # with --incremental
  # Its SHA-256, which an update checks the catalog against; None in a record from before it.
  catalog_sha256: Optional[str] = dataclasses.field(default=None, metadata=_OPTIONAL)
  # With --incremental: what the catalog's lookup by uri calls it (catalog_lookup.shard_id), kept
  # when the shard is renamed or written again; None in a record from before it.
  id: Optional[str] = dataclasses.field(default=None, metadata=_OPTIONAL)

  @property
  def files(self) -> List[str]:
    return [self.file] + [name for name in (self.index_file, self.catalog_file) if name]

  @property
  def key(self) -> str:
    """What the lookup calls it: its id, or for a shard of a record from before ids its file name."""
    return self.id or self.file


@dataclasses.dataclass(frozen=True, kw_only=True)
class Split(_Json):
  """A split's totals, its shards (by file name) and histograms, each bin a string key as JSON has it."""
  num_examples: int
  num_bytes: int
  shards: List[Shard]
  classes: Dict[str, int]  # examples per label, in the order of labels
  longer_side_px: Dict[str, int]  # images per power-of-two bin of their longer side (run_totals.size_bin)
  kib: Dict[str, int]  # images per power-of-two bin of their stored size in KiB
  # With --annotations: objects per class, in the order of labels.
  objects: Optional[Dict[str, int]] = dataclasses.field(default=None, metadata=_OPTIONAL)
  # Images per data-quality flag (image_quality.flags), per class ('' for an image without one), in
  # the order of labels; written only when an image raises a flag.
  quality: Optional[Dict[str, Dict[str, int]]] = dataclasses.field(default=None, metadata=_OPTIONAL)

  @classmethod
  def from_dict(cls, data: Mapping[str, Any]) -> 'Split':
    return _typed(cls, data, shards=[_typed(Shard, shard) for shard in data['shards']])


@dataclasses.dataclass(frozen=True, kw_only=True)
class LookupFile(_Json):
  """One file of the catalog's lookup by uri (catalog_lookup.py): the uris it holds (its slot),
  and what an update checks it against."""
  slot: int
  file: str
  # The lines of the file and of its delta: a version that knows no deltas finds the file short and
  # refuses it as damaged, where it would read it without its changes.
  num_entries: int
  sha256: str
  # The changes since the file was written, in a file beside it (catalog_lookup.Lookup.with_changes):
  # how many entries it holds, and its SHA-256; None where there are none.
  delta_entries: Optional[int] = dataclasses.field(default=None, metadata=_OPTIONAL)
  delta_sha256: Optional[str] = dataclasses.field(default=None, metadata=_OPTIONAL)

  @property
  def own_entries(self) -> int:
    """The lines of the file itself, without its delta's."""
    return self.num_entries - (self.delta_entries or 0)

  @property
  def files(self) -> List[str]:
    """The file, and its delta's if it has one."""
    return [self.file] + ([output_layout.lookup_delta_file(self.file)] if self.delta_entries is not None else [])

  @property
  def staged(self) -> str:
    """What the run that wrote it staged: its delta where it has one (a file written again whole
    has none), else the file itself."""
    return self.files[-1]


@dataclasses.dataclass(frozen=True, kw_only=True)
class NearIndex(_Json):
  """The near-copy index (core/planning/near_index.py) of the grouping at ``distance`` of hash
  ``hash``: its node files (``nodes``, by slot) and band files (``bands``, slot band x count +
  file), of which those holding rows are listed."""
  distance: int
  hash: str
  nodes: List[LookupFile]
  bands: List[LookupFile]

  @classmethod
  def from_dict(cls, data: Mapping[str, Any]) -> 'NearIndex':
    return _typed(cls, data, nodes=[_typed(LookupFile, value) for value in data['nodes']],
                  bands=[_typed(LookupFile, value) for value in data['bands']])


@dataclasses.dataclass(frozen=True, kw_only=True)
class CatalogLookup(_Json):
  """With --incremental: the catalog's lookups by uri (``files``) and by content hash
  (``content_files``), ``count`` files each, of which those holding entries are listed; and the
  near-copy index, where the last run grouped near copies on workers (not in one process)."""
  count: int
  files: List[LookupFile]
  content_files: List[LookupFile]
  near_index: Optional[NearIndex] = dataclasses.field(default=None, metadata=_OPTIONAL)

  @classmethod
  def from_dict(cls, data: Mapping[str, Any]) -> 'CatalogLookup':
    near = data.get('near_index')
    return _typed(cls, data, files=[_typed(LookupFile, value) for value in data['files']],
                  content_files=[_typed(LookupFile, value) for value in data['content_files']],
                  near_index=NearIndex.from_dict(near) if near else None)

  def index_files(self) -> List[LookupFile]:
    """Every file of the near-copy index."""
    return self.near_index.nodes + self.near_index.bands if self.near_index else []


@dataclasses.dataclass(frozen=True, kw_only=True)
class Duplicates(_Json):
  """Groups of identical files: counted, and the first of them listed (their uris)."""
  num_groups: int
  num_extra_copies: int
  removed: bool  # --dedupe
  num_removed: int = 0  # listed in the errors files too, as duplicate, but no errors; 0.1 counted them as errors
  # Groups whose files were given different labels; written only when there are any.
  num_label_conflicts: Optional[int] = dataclasses.field(default=None, metadata=_OPTIONAL)
  # Each listed group: {'images': uris, 'labels': each's, 'kept' (--dedupe: the uri kept, or null
  # where every copy was rejected as label_conflict), 'label_conflict'}; a record before 0.2.x lists
  # the uris alone, the first kept under --dedupe.
  groups: List[Any]


EARLIER_HASH = 'dct64'


@dataclasses.dataclass(frozen=True, kw_only=True)
class NearDuplicates(_Json):
  """Groups of near copies (their perceptual hashes within ``distance`` bits, core/planning/
  near_copies.py), each in one split or, ``removed`` (--near_copies=drop), one image kept:
  counted, and the first of them listed ({'images': uris, 'split' or 'kept', 'label_conflict'})."""
  distance: int
  num_groups: int
  num_images: int
  removed: bool
  num_removed: int = 0  # listed in the errors files as near_duplicate, but no errors
  num_label_conflicts: Optional[int] = dataclasses.field(default=None, metadata=_OPTIONAL)
  # What the grouping's bounds left out, where any: near-uniform images (one hash shared by more
  # than SAME_HASH_CAP files), hashes a key could not hold or whose comparison was cut short, and
  # sets of look-alikes larger than ``largest_group`` (and their images), split image by image.
  left_out: Optional[Dict[str, int]] = dataclasses.field(default=None, metadata=_OPTIONAL)
  # The most images a group was kept whole with (near_copies.group_cap); None from a run before it.
  largest_group: Optional[int] = dataclasses.field(default=None, metadata=_OPTIONAL)
  # The perceptual hash the catalog's hashes were made with (perceptual_hash.NAME); None from a run
  # before it was named, whose hash neither faced one way nor hashed blank images by brightness
  # (EARLIER_HASH).
  hash: Optional[str] = dataclasses.field(default=None, metadata=_OPTIONAL)
  groups: List[Dict[str, Any]]

  @property
  def hash_name(self) -> str:
    """The hash's name: EARLIER_HASH where the record names none."""
    return self.hash or EARLIER_HASH


@dataclasses.dataclass(frozen=True, kw_only=True)
class Embedding(_Json):
  """--embedding_model's embeddings: the model, the input it was given, the output's shape and
  the Example keys it is stored under."""
  model: str
  sha256: str
  input_size: List[int]
  input: str
  output_shape: List[int]
  num_values: int
  key: str
  shape_key: str
  images_stored: bool  # False under --embedding_only


@dataclasses.dataclass(frozen=True, kw_only=True)
class Update(_Json):
  """What an --incremental run changed: its inputs since the earlier run's (each input once:
  a changed file's earlier record was replaced), and the output's shards. A run that converted
  everything says why."""
  added: int
  changed: int
  removed: int
  unchanged: int
  shards_written: int  # new shards
  shards_rewritten: int  # earlier shards that lost records, written again under their names
  shards_kept: int  # earlier shards left as they were
  new_classes: List[str]
  full_conversion: Optional[str] = dataclasses.field(default=None, metadata=_OPTIONAL)
  # Inputs whose fingerprint changed but not their bytes: kept, with their new fingerprints.
  touched: Optional[int] = dataclasses.field(default=None, metadata=_OPTIONAL)
  # The shards holding records that it wrote, new or again, sorted: what `verify` reads of an
  # updated output unless asked for all. None in a full conversion or a record from before it.
  written_files: Optional[List[str]] = dataclasses.field(default=None, metadata=_OPTIONAL)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Listing(_Json):
  """The input as an --incremental run listed it (core/inputs/listing_digest.py): how many
  items and rejections, and their digest. A later run that lists the same has nothing to do."""
  num_listed: int
  digest: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunRecord(_Json):
  """A completed run's beam_pipeline.json; its JSON keys are these fields, in this order."""
  tool: str = TOOL
  version: str
  created: str  # UTC, ISO 8601 to the second
  num_examples: int
  # Stored as a re-encoding of their source (another format, or downscaled), and downscaled.
  num_reencoded: int
  num_resized: int
  # Turned upright by their Exif orientation (--exif_orientation=apply), re-encoded.
  num_rotated: int = 0
  # JPEGs that libjpeg decodes only with warnings: stored, or rejected under --strict_jpeg.
  num_damaged_jpeg: int = 0
  splits: Dict[str, Split]
  labels: List[str]
  num_classes: int
  num_errors: int
  errors_by_reason: Dict[str, int]
  errors_file: str  # the errors files' names as a pattern, or the one file's name
  errors_files: List[str]
  # Files a folder or glob held that are no images (.DS_Store, notes.txt, .git/), listed in the
  # errors files as skipped but no errors; written only when there are any.
  num_skipped: Optional[int] = dataclasses.field(default=None, metadata=_OPTIONAL)
  duplicates: Duplicates
  # Near copies, unless --near_copies=off (and in a record from before they were found).
  near_duplicates: Optional[NearDuplicates] = dataclasses.field(default=None, metadata=_OPTIONAL)
  compression: str
  schema: str
  embedding: Optional[Embedding] = None
  options: Dict[str, Any]  # the settings as given (Settings.as_dict), and the runner
  update: Optional[Update] = dataclasses.field(default=None, metadata=_OPTIONAL)  # with --incremental
  # With --incremental, where every input listed had a fingerprint.
  listing: Optional[Listing] = dataclasses.field(default=None, metadata=_OPTIONAL)
  # With --incremental: the catalog's lookup by uri; None in a record from before it.
  catalog_lookup: Optional[CatalogLookup] = dataclasses.field(default=None, metadata=_OPTIONAL)

  def input_given(self) -> Optional[str]:
    """The --input the run converted, as given (a folder without the '/**' its listing adds);
    None in a record without it."""
    path = self.options.get('input')
    return InputSpec(self.options.get('input_kind', ''), path).given if path else None

  @classmethod
  def read(cls, output: str, exists: Callable[[str], bool] = os.path.exists,
           open_file: Callable[[str], IO] = open) -> 'RunRecord':
    """The record of the completed run in ``output``; FileNotFoundError for any other directory.

    ``exists`` and ``open_file`` reach the file: the built-ins for a local output, Beam's
    FileSystems or tf.io.gfile for any, from the caller that has them.
    """
    path = uris.join(output, output_layout.RUN_RECORD)
    if exists(path):
      with open_file(path) as f:
        return cls.from_dict(json.load(f))
    old = uris.join(output, output_layout.OLD_RUN_RECORD)
    if exists(old):
      with open_file(old) as f:
        info = json.load(f)
      if info.get('tool') == TOOL:
        return cls.from_dict(info)
    raise FileNotFoundError(f'{path} does not exist: {output} is not a completed conversion (it is still '
                            'running, was interrupted or failed, or is not an output of beam_pipeline)')

  @classmethod
  def from_dict(cls, data: Mapping[str, Any]) -> 'RunRecord':
    """The record of parsed JSON, of this version or an earlier one."""
    embedding, update, near, listing, lookup = (data.get('embedding'), data.get('update'),
                                                data.get('near_duplicates'), data.get('listing'),
                                                data.get('catalog_lookup'))
    return _typed(cls, data, splits={name: Split.from_dict(split) for name, split in data['splits'].items()},
                  errors_files=data.get('errors_files', [data['errors_file']]),
                  duplicates=_typed(Duplicates, data['duplicates']),
                  near_duplicates=_typed(NearDuplicates, near) if near else None,
                  embedding=_typed(Embedding, embedding) if embedding else None,
                  update=_typed(Update, update) if update else None,
                  listing=_typed(Listing, listing) if listing else None,
                  catalog_lookup=CatalogLookup.from_dict(lookup) if lookup else None)

  @classmethod
  def from_json(cls, text: str) -> 'RunRecord':
    return cls.from_dict(json.loads(text))

  def to_json(self) -> str:
    """The text of beam_pipeline.json."""
    return json.dumps(self.as_dict(), indent=2, sort_keys=False, ensure_ascii=False) + '\n'
