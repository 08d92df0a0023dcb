"""The checked values of the command line, as small picklable types.

They go with every task to the worker processes of a local run, and into the
job Dataflow runs. The options themselves (their defaults, values and how the run
record names them) are core/option_table.py's.
"""
import math
from typing import NamedTuple, Optional, Tuple

from beam_pipeline.core import option_table

GLOB = 'glob'
DIRECTORY = 'directory'
CSV = 'csv'
JSONL = 'jsonl'


class InputSpec(NamedTuple):
  kind: str
  path: str  # the file pattern for globs and directories, the file for manifests
  multi_label: bool = False  # --multi_label: a manifest row may name several labels

  @property
  def is_manifest(self) -> bool:
    return self.kind in (CSV, JSONL)

  @property
  def given(self) -> str:
    """The path as --input gives it: a folder without the '/**' its listing adds."""
    return self.path[:-len('/**')] if self.kind == DIRECTORY and self.path.endswith('/**') else self.path


class LabelSource(NamedTuple):
  kind: str  # one of labels.PARENT_DIR, NONE, REGEX, MANIFEST
  pattern: Optional[str] = None  # for REGEX

  def __str__(self) -> str:
    return self.kind + (f':{self.pattern}' if self.pattern else '')


class SplitSpec(NamedTuple):
  names: Tuple[str, ...]
  fractions: Tuple[float, ...]


IMAGE_FORMATS = option_table.BY_NAME['image_format'].kind.values

# Option defaults that more than the command line knows: the fields below and reader.load.
IMAGE_SIZE = option_table.default('image_size')  # the square side images are resized to for training
IMAGE_FORMAT = option_table.default('image_format')
JPEG_QUALITY = option_table.default('jpeg_quality')
EXIF_ORIENTATION = option_table.default('exif_orientation')
MIN_SIDE = option_table.default('min_side')
EMBEDDING_IMAGE_SIZE = option_table.default('embedding_image_size')
EMBEDDING_BATCH_SIZE = option_table.default('embedding_batch_size')

# --compression's values, and TensorFlow's compression_type for each (its TFRecord writer and readers).
COMPRESSIONS = {'none': '', 'gzip': 'GZIP'}


class StoredImages(NamedTuple):
  """How the bytes a record stores are chosen: --image_format, --jpeg_quality, --max_side,
  --exif_orientation."""
  format: str = IMAGE_FORMAT  # original (JPEG and PNG kept, the rest PNG), jpeg or png
  jpeg_quality: int = JPEG_QUALITY
  max_side: int = 0  # longer side past which images are downscaled; 0: never
  exif_orientation: str = EXIF_ORIENTATION  # apply: stored upright, tag removed; ignore: bytes as they are


class EmbeddingSpec(NamedTuple):
  """--embedding_model and its options. The model check before the run fills in
  ``sha256`` and ``output_shape``, which the graph and beam_pipeline.json record."""
  model: str  # local or gs://: a .keras file or a SavedModel directory
  image_size: int = EMBEDDING_IMAGE_SIZE  # the square side images are resized to for the model
  only: bool = False  # --embedding_only: records hold the embedding instead of the image
  batch_size: int = EMBEDDING_BATCH_SIZE
  sha256: str = ''
  output_shape: Tuple[int, ...] = ()

  @property
  def num_values(self) -> int:
    """How many floats one embedding holds."""
    return math.prod(self.output_shape)


class Settings(NamedTuple):
  """Validated values of the conversion's options: small and picklable, for DoFns and worker tasks."""
  input: InputSpec
  output: str
  label_source: LabelSource
  schema: str
  target_shard_bytes: int
  compression: str
  max_pixels: int
  max_file_bytes: int
  splits: SplitSpec
  dedupe: bool
  image_size: int
  skip_transform: bool
  read_threads: int
  max_error_fraction: float
  stored: StoredImages = StoredImages()
  embedding: Optional[EmbeddingSpec] = None
  strict_jpeg: bool = False  # reject JPEGs that libjpeg decodes only with warnings
  min_side: int = MIN_SIDE  # reject stored images with a shorter side
  index_files: bool = False  # write SHARD.idx beside each shard (record_index)
  annotations: Optional[str] = None  # --annotations: a COCO .json or a folder of VOC .xml files
  drop_unannotated: bool = False
  include_masks: bool = False  # --include_masks: image/object/mask from COCO segmentations
  # This run's name (core/output/run_lock.py): its staging folder and its lock; not an option, so not in as_dict.
  run_id: str = ''
  input_root: Optional[str] = None  # --input_root: every input file must lie in this folder (input_root.py)
  num_shards: int = 0  # --num_shards: shards per split, of even record counts; 0: by target_shard_bytes
  overwrite: bool = False  # --overwrite: replace an output converted from another input (earlier_input.py)
  incremental: bool = False  # --incremental: convert what changed since the output's run (incremental_update.py)
  rebuild: bool = False  # --rebuild: an --incremental run that converts everything
  near_copies: str = 'group'  # --near_copies: group, drop or off
  near_distance: int = 0  # --near_distance; 0: by the input's size (near_copies.distance_for)
  reject_quality: Tuple[str, ...] = ()  # --reject_quality: data-quality flags (image_quality.flags) that reject

  @property
  def multi_label(self) -> bool:
    """--multi_label: records hold every label of their manifest row. Kept on the input, whose
    rows it changes how to read, so the listing sees it."""
    return self.input.multi_label

  def as_dict(self) -> dict:
    """The options as recorded in beam_pipeline.json (core/option_table.py says how), and the input's kind."""
    return {**option_table.recorded(self), 'input_kind': self.input.kind}
