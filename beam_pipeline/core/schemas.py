"""Example key presets: the one place that names the features a record holds.

``default`` uses the TF-slim / Object Detection keys most image readers expect;
``simple`` writes the ``image_raw``/``label``/``id`` keys of the hand-written
converters our users are replacing, so their readers keep working. The encoder,
the reader and the tf.Transform graph look keys up here by field.
"""
import re
from typing import Any, Mapping, Optional, Tuple

from beam_pipeline.core import rejections
from beam_pipeline.core.rejections import Rejected

# The fields a record can carry; a schema maps the ones it writes to their keys.
IMAGE = 'image'  # bytes: the stored image
FORMAT = 'format'  # bytes: jpeg or png
HEIGHT = 'height'  # int64: of the stored image
WIDTH = 'width'  # int64
ORIGINAL_HEIGHT = 'original_height'  # int64: of the source, before any downscaling (--max_side)
ORIGINAL_WIDTH = 'original_width'  # int64
CHANNELS = 'channels'  # int64: what tf.io.decode_image(channels=0) yields
LABEL = 'label'  # int64: the class id of labels.txt, UNLABELED without one
TEXT = 'text'  # bytes: the label's text
URI = 'uri'  # bytes: where the image came from
SHA256 = 'sha256'  # bytes: hex digest of the stored image
SOURCE_ID = 'source_id'  # bytes: a decimal number, stable and distinct per record (Model Garden parses it)
EMBEDDING = 'embedding'  # float list: --embedding_model's output, flattened
EMBEDDING_SHAPE = 'embedding_shape'  # int64 list: its shape
# With --annotations, one value per object, in the Object Detection API's keys (default schema only).
OBJECT_XMIN, OBJECT_YMIN = 'object_xmin', 'object_ymin'  # float list: normalized to the stored image
OBJECT_XMAX, OBJECT_YMAX = 'object_xmax', 'object_ymax'
OBJECT_LABEL = 'object_label'  # int64 list: 1-based (label_map.pbtxt's ids: labels.txt's line + 1; 0 is background)
OBJECT_TEXT = 'object_text'  # bytes list: the class names
OBJECT_AREA = 'object_area'  # float list: pixels of the stored image
OBJECT_IS_CROWD, OBJECT_DIFFICULT, OBJECT_TRUNCATED = 'object_is_crowd', 'object_difficult', 'object_truncated'
OBJECT_MASK = 'object_mask'  # bytes list: with --include_masks, a PNG of 0s and 1s the stored image's size

KEYS = {
    'default': {IMAGE: 'image/encoded', FORMAT: 'image/format', HEIGHT: 'image/height', WIDTH: 'image/width',
                ORIGINAL_HEIGHT: 'image/original_height', ORIGINAL_WIDTH: 'image/original_width',
                CHANNELS: 'image/channels', LABEL: 'image/class/label', TEXT: 'image/class/text',
                URI: 'image/filename', SHA256: 'image/key/sha256', SOURCE_ID: 'image/source_id'},
    'simple': {IMAGE: 'image_raw', LABEL: 'label', URI: 'id'},
}
# Written with --embedding_model; under --embedding_only without IMAGE.
EMBEDDING_KEYS = {
    'default': {EMBEDDING: 'image/embedding', EMBEDDING_SHAPE: 'image/embedding/shape'},
    'simple': {EMBEDDING: 'embedding', EMBEDDING_SHAPE: 'embedding_shape'},
}
# Written with --annotations, by every record of the run (empty lists for a negative).
OBJECT_KEYS = {
    'default': {OBJECT_XMIN: 'image/object/bbox/xmin', OBJECT_YMIN: 'image/object/bbox/ymin',
                OBJECT_XMAX: 'image/object/bbox/xmax', OBJECT_YMAX: 'image/object/bbox/ymax',
                OBJECT_LABEL: 'image/object/class/label', OBJECT_TEXT: 'image/object/class/text',
                OBJECT_AREA: 'image/object/area', OBJECT_IS_CROWD: 'image/object/is_crowd',
                OBJECT_DIFFICULT: 'image/object/difficult', OBJECT_TRUNCATED: 'image/object/truncated',
                OBJECT_MASK: 'image/object/mask'},
}
SCHEMAS = tuple(KEYS)
# Fields a manifest column of the same key replaces: a dataset's own image ids (COCO's) win.
FROM_MANIFEST = (SOURCE_ID,)
UNLABELED = -1
# Model Garden's decoders parse image/source_id into an int64 (-1 meaning none): a decimal number
# from 0 to 2**63 - 1, digits only.
_DECIMAL = re.compile(r'[0-9]{1,19}')
_MAX_SOURCE_ID = 2**63 - 1


def keys(schema: str) -> Mapping[str, str]:
  """Field -> feature key, for the fields ``schema`` writes, embeddings and objects included."""
  return {**KEYS[schema], **EMBEDDING_KEYS[schema], **OBJECT_KEYS.get(schema, {})}


def check_extras(extras: Mapping[str, Any], schema: str) -> None:
  """A manifest field named like a schema key would overwrite it: reject the row instead, but
  for the fields a manifest may give (FROM_MANIFEST)."""
  ours = {key for field, key in keys(schema).items() if field not in FROM_MANIFEST}
  clashes = sorted(set(extras) & ours)
  if clashes:
    raise Rejected(rejections.BAD_MANIFEST_ROW,
                   f'manifest field(s) {", ".join(clashes)} clash with the {schema} schema\'s keys')


def source_id_key(schema: str) -> Optional[str]:
  """The key ``schema`` writes image/source_id under, which a manifest may give (FROM_MANIFEST)."""
  return KEYS[schema].get(SOURCE_ID)


def with_given_source_id(extras: Tuple[Tuple[str, Any], ...], schema: str) -> Tuple[Tuple[str, Any], ...]:
  """A manifest row's fields with the image/source_id it gives, if any, as the decimal text the
  key promises (JSON's 17 or '0017' as '17'); rejects the row (bad_manifest_row) if that value
  is not a whole number from 0 to 2**63 - 1, which Model Garden's decoders could not parse."""
  key = source_id_key(schema)
  if key is None or key not in dict(extras):
    return extras
  value = dict(extras)[key]
  text = str(value).strip() if isinstance(value, (str, int)) and not isinstance(value, bool) else ''
  if not _DECIMAL.fullmatch(text) or int(text) > _MAX_SOURCE_ID:
    raise Rejected(rejections.BAD_MANIFEST_ROW, f'{key} {value!r} is not a decimal number from 0 to 2**63 - 1, as '
                                                'Model Garden\'s decoders parse it')
  return tuple((name, str(int(text)) if name == key else given) for name, given in extras)
