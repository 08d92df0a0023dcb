"""The values a run passes along: inputs, the metadata of validated images, rejections,
and the output units workers write.

They cross Beam's shuffles and travel to and from worker processes, so image bytes
never do: a record is a few hundred bytes, and the shard writer reads the image
again (checking ``source_sha256``). This module imports nothing of the package.
"""
import dataclasses
import json
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple


class InputItem(NamedTuple):
  """One input to convert, before its bytes are read."""
  uri: str
  label: Optional[str] = None  # from a manifest
  split: Optional[str] = None  # from a manifest or a split folder
  extras: Tuple[Tuple[str, Any], ...] = ()  # manifest fields passed through as features
  objects: Tuple[Any, ...] = ()  # with --annotations: its annotations.AnnotatedObject
  annotated_size: Optional[Tuple[int, int]] = None  # (width, height) the annotations were made on, if they say
  # With --multi_label: every label of its manifest row, once each, in the row's order; ``label``
  # is then the first of them.
  labels: Tuple[str, ...] = ()
  row: int = 0  # its manifest row's number (a CSV row's, a JSON line's), 1-based; 0: not from a manifest
  # What tells whether it changed since an earlier run (core/inputs/fingerprints.py); '' unless the
  # listing was asked for it, and where its metadata is unknown.
  fingerprint: str = ''


class CheckedImage(NamedTuple):
  """A validated image: everything its Example needs but the bytes."""
  uri: str
  label: Optional[str]
  split: Optional[str]
  extras: Tuple[Tuple[str, Any], ...]
  source_sha256: str  # of the file as read; identical photos share it, and the split follows it
  sha256: str  # of the stored bytes (differs from source_sha256 when re-encoded)
  num_bytes: int  # of the stored bytes
  format: str
  height: int
  width: int
  channels: int
  reencoded: bool
  order_key: str  # place in its split's shards, independent of the split (sharding.order_key)
  damaged: bool = False  # a JPEG that libjpeg decodes only with warnings (image_info.ImageInfo.damage)
  objects: Tuple[Any, ...] = ()  # with --annotations: its boxes.StoredObject, on the stored image
  labels: Tuple[str, ...] = ()  # with --multi_label: every label (InputItem.labels); ``label`` is the first
  row: int = 0  # InputItem.row: a manifest that names one image twice has its later rows rejected
  fingerprint: str = ''  # InputItem.fingerprint: what the file (and its manifest row) was when it was listed
  phash: str = ''  # 32 hex digits: perceptual_hash.phash of the stored image, upright; near copies are near in it
  quality: Tuple[str, ...] = ()  # image_quality.flags: sorted names, such as 'blurry' or 'dark'
  colour: str = ''  # colour_signature: which colours lie where, which the perceptual hash does not see

  def with_split(self, split: Optional[str]) -> 'CheckedImage':
    """The record in ``split``: what _replace(split=split) gives, made by slicing, as planning
    gives every record its split and _replace's keyword walk over the fields cost a tenth of
    planning in memory."""
    return tuple.__new__(CheckedImage, self[:2] + (split,) + self[3:])


class Rejection(NamedTuple):
  """One line of the errors output: an input that was not written, and why."""
  uri: str
  reason: str
  detail: str
  # With --incremental: the input's (InputItem.fingerprint), so that a later run need not read an
  # unchanged file only to reject it again (catalog_entries.CARRIED).
  fingerprint: str = ''

  @classmethod
  def of(cls, uri: str, error: Any) -> 'Rejection':
    """From a rejections.Rejected raised for ``uri``."""
    return cls(uri, error.reason, error.detail)

  def to_json(self) -> str:
    fingerprint = {'fingerprint': self.fingerprint} if self.fingerprint else {}
    return json.dumps({'uri': self.uri, 'reason': self.reason, 'detail': self.detail, **fingerprint},
                      ensure_ascii=False, sort_keys=True)

  @classmethod
  def from_json(cls, text: str) -> 'Rejection':
    line = json.loads(text)
    return cls(line['uri'], line['reason'], line['detail'], line.get('fingerprint', ''))


class Validated(NamedTuple):
  """What validating a batch gives: records, rejections, and what the accepted images really are."""
  records: List[CheckedImage]
  rejections: List[Rejection]
  source_formats: Dict[str, int]  # by Pillow's format name
  # Annotations of written images that could not be used (a box outside its image): errors
  # of the annotation file, not of an input.
  annotation_problems: Optional[List[Rejection]] = None


class InputItems(NamedTuple):
  """Input items that cross a shuffle as one element (an --incremental update's items on their
  way to their slot of the catalog's lookup): an element per item costs the shuffle more than
  the item's comparison. They are held as columns, one tuple per field of InputItem, so that
  they cross as a few tuples, not a tuple each, and the comparison reads the uris and
  fingerprints of unchanged files without making an InputItem of each."""
  columns: Tuple[Tuple[Any, ...], ...]  # InputItem's fields in order, each over every item; () for no item

  @classmethod
  def of(cls, items: Sequence[InputItem]) -> 'InputItems':
    return cls(tuple(zip(*items)))

  @property
  def uris(self) -> Tuple[str, ...]:
    return self.columns[0] if self.columns else ()

  @property
  def fingerprints(self) -> Tuple[str, ...]:
    return self.columns[_FINGERPRINT] if self.columns else ()

  @property
  def items(self) -> Tuple[InputItem, ...]:
    return tuple(map(InputItem._make, zip(*self.columns)))

  def item(self, index: int) -> InputItem:
    return InputItem._make(column[index] for column in self.columns)


_FINGERPRINT = InputItem._fields.index('fingerprint')


class ContentGroup(NamedTuple):
  """Records of identical files; the first (by uri) is the one kept under --dedupe."""
  records: Tuple[CheckedImage, ...]

  @property
  def weight(self) -> int:
    return len(self.records)

  @property
  def stratum(self) -> str:
    """What splits are stratified by: the label (under --multi_label the first one), or else the
    class of the first annotated object."""
    first = self.records[0]
    return first.label or (first.objects[0].label if first.objects else '')


class OutputUnit:
  """A piece of the output that one worker writes whole: a ShardPlan or the TransformGraph."""


@dataclasses.dataclass(frozen=True)
class ShardPlan(OutputUnit):
  """One shard: its records in the order they are written, and its place among its split's shards."""
  split: str
  index: int
  count: int  # the split's shards; 0 in an --incremental output, whose names leave it out
  records: Tuple[CheckedImage, ...]


@dataclasses.dataclass(frozen=True)
class ShardRewrite(OutputUnit):
  """An --incremental output's shard written again under its name, its records copied as they are,
  their images unread: without those of files deleted or changed since, with those of the
  small shards merged into it, and with the new fingerprints of files touched since."""
  split: str
  file: str
  sources: Tuple[str, ...]  # the earlier shards whose records it holds, in order: the shard itself first
  dropped: Tuple[str, ...]  # the uris whose records go
  touched: Tuple[Tuple[str, str], ...] = ()  # (uri, fingerprint) of kept records whose file was touched
  shard_id: Optional[str] = None  # the shard's id (catalog_lookup.shard_id), which it keeps
  # Only fingerprints change (no record dropped, none merged in): its catalog alone is written
  # again, the shard and its index file left as they are, unread but for the shard's size.
  catalog_only: bool = False
  num_bytes: int = 0  # the shard's size, where catalog_only: WriteOutputs looks it up


@dataclasses.dataclass(frozen=True)
class TransformGraph(OutputUnit):
  """The tf.Transform preprocessing graph, written beside the shards."""
  image_size: int
  schema: str
  embedding_shape: Tuple[int, ...] = ()  # with --embedding_model
  images: bool = True  # False under --embedding_only
  multi_label: bool = False  # 'label' is a multi-hot vector of image/class/label's ids


@dataclasses.dataclass(frozen=True)
class ShardReport:
  """What writing one shard reports: its line of beam_pipeline.json (its files, examples and bytes),
  and the counts and histograms the run record sums up over every shard (output/run_totals.py)."""
  split: str
  file: str
  num_examples: int
  num_bytes: int
  num_reencoded: int = 0  # stored as a re-encoding of their source
  num_resized: int = 0  # downscaled by --max_side
  num_rotated: int = 0  # turned upright by their Exif orientation
  num_damaged_jpeg: int = 0  # JPEGs that libjpeg decodes only with warnings
  classes: Dict[str, int] = dataclasses.field(default_factory=dict)  # examples per label
  longer_side_px: Dict[str, int] = dataclasses.field(default_factory=dict)  # images per power-of-two bin
  kib: Dict[str, int] = dataclasses.field(default_factory=dict)  # images per power-of-two bin of stored KiB
  objects: Optional[Dict[str, int]] = None  # with --annotations: objects per label
  # Images per data-quality flag (image_quality.flags), per class: {'dark': {'cat': 2}}.
  quality: Dict[str, Dict[str, int]] = dataclasses.field(default_factory=dict)
  index_file: Optional[str] = None  # with --index_files
  catalog_file: Optional[str] = None  # with --incremental
  catalog_sha256: Optional[str] = None  # of the catalog file (catalog_entries.checksum)
  shard_id: Optional[str] = None  # with --incremental: what the catalog's lookup calls it (catalog_lookup.shard_id)
  # The report of a shard as an earlier run wrote it, which this run wrote again: its counts come
  # off the earlier totals (run_totals.WrittenTotals.add_shard).
  replaced: bool = False
  rewritten: bool = False  # written again from earlier shards' records (ShardRewrite)
  catalog_only: bool = False  # ShardRewrite.catalog_only: only its catalog file was written

  @property
  def files(self) -> List[str]:
    """The shard's files in the output: the shard, its index file and its catalog if any."""
    return [self.file] + [name for name in (self.index_file, self.catalog_file) if name]


class ShardWritten(NamedTuple):
  """What writing a shard gives: its report, and the records it could not write; a shard written
  again (ShardRewrite) gives the reports of the shards whose records it took as well."""
  shard: ShardReport
  rejections: List[Rejection]
  replaced: Tuple[ShardReport, ...] = ()
  # With --incremental, the catalog entries whose lookup lines change: every record of a new shard;
  # of a shard written again, those merged into it and those touched.
  catalogued: Tuple[Any, ...] = ()
