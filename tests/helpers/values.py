"""The core's values for tests of planning, steps and coders, without a command line or images."""
import hashlib
from typing import Any, Optional

from beam_pipeline.core import sharding
from beam_pipeline.core.records import ImageRecord
from beam_pipeline.core.settings import InputSpec, LabelSource, Settings, SplitSpec


def image_record(uri: str, label: Optional[str] = 'cat', split: Optional[str] = None, sha256: Optional[str] = None,
                 num_bytes: int = 100, **fields: Any) -> ImageRecord:
  """A record as validation makes it; ``sha256`` (of the content) defaults to one of the uri."""
  sha256 = sha256 or hashlib.sha256(uri.encode('utf-8', 'surrogateescape')).hexdigest()
  values = dict(uri=uri, label=label, split=split, extras=(), source_sha256=sha256, sha256=sha256,
                num_bytes=num_bytes, format='jpeg', height=1, width=1, channels=3, reencoded=False,
                order_key=sharding.order_key(sha256, uri))
  values.update(fields)
  return ImageRecord(**values)


def settings(**changes: Any) -> Settings:
  """The default options' Settings, for a directory input; ``changes`` replace fields."""
  values = dict(input=InputSpec('directory', '/in/**'), output='/out', label_source=LabelSource('parent_dir'),
                schema='default', target_shard_bytes=150 * 2**20, compression='none', max_pixels=10**8,
                max_file_bytes=100 * 2**20, splits=SplitSpec(('train',), (1.0,)), dedupe=False, image_size=224,
                skip_transform=False, read_threads=32, max_error_fraction=0.05)
  return Settings(**{**values, **changes})
