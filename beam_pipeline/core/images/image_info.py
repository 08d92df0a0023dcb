"""The values an image is prepared into: bytes waiting for TensorFlow's decode
(PendingImage), then what a record says of them (ImageInfo) with the bytes it stores.

Values only: planning, re-encoding, TensorFlow's check and the batch that runs them
all pass these along, and none of them needs another to do so.
"""
import hashlib
from typing import NamedTuple, Optional, Tuple, Union

from beam_pipeline.core import rejections
from beam_pipeline.core.images.image_quality import Statistics
from beam_pipeline.core.rejections import Rejected


class ImageInfo(NamedTuple):
  """What a record says about its stored image."""
  format: str  # format of the stored bytes: jpeg or png
  height: int
  width: int
  channels: int  # what tf.io.decode_image(channels=0) yields for the stored bytes
  reencoded: bool  # stored bytes are a re-encoding, not the source bytes
  source_format: str  # what the source really is (Pillow's name), whatever its extension
  original_height: int  # of the source, before any downscaling
  original_width: int
  damage: str = ''  # what libjpeg warned of while TensorFlow decoded the JPEG source: its damage
  orientation: int = 1  # the source's Exif orientation: to apply, or (reencoded) applied
  phash: str = ''  # perceptual_hash.phash of the stored pixels, turned upright
  statistics: Optional[Statistics] = None  # of the stored pixels, for image_quality.flags
  colour: str = ''  # colour_signature of the stored pixels, turned upright


class PreparedImage(NamedTuple):
  """An image that becomes a record: what the record says of it, and the bytes it stores."""
  info: ImageInfo
  stored: bytes


def sha256_hex(data: bytes) -> str:
  """The hash a record keeps of its source's bytes and of its stored ones."""
  return hashlib.sha256(data).hexdigest()


class PendingImage(NamedTuple):
  """Bytes to store once TensorFlow has decoded them to the size they are meant to have."""
  stored: bytes
  format: str
  height: int
  width: int
  source_format: str
  reencoded: bool = False
  quick: bool = False  # a JPEG whose header only TensorFlow has read (height, width unknown yet)
  original_height: int = 0  # of the source
  original_width: int = 0
  damage: str = ''  # ImageInfo.damage
  orientation: int = 1  # ImageInfo.orientation

  @property
  def to_turn(self) -> int:
    """The Exif orientation its decoded pixels are still to be turned upright by (1: none)."""
    return 1 if self.reencoded else self.orientation

  def checked(self, shape: Tuple[int, ...], phash: str, statistics: Tuple[float, ...],
              colour: str = '') -> Union[PreparedImage, Rejected]:
    """The result, given what TensorFlow's decode of the stored bytes gave.

    Args:
      shape: the decoded shape (a JPEG at 1/8 scale), which must be the one planned.
      phash: the perceptual hash of the decoded pixels.
      statistics: their image_quality.Statistics.
      colour: their colour_signature.
    """
    scale = 8 if self.format == 'jpeg' else 1
    if shape[:2] != (-(-self.height // scale), -(-self.width // scale)):
      return Rejected(rejections.CORRUPT, f'{self.source_format} decodes to a {shape[1]}x{shape[0]} (1/{scale} '
                      f'scale) image in TensorFlow but its header says {self.width}x{self.height}')
    info = ImageInfo(self.format, self.height, self.width, int(shape[2]), self.reencoded, self.source_format,
                     self.original_height or self.height, self.original_width or self.width, self.damage,
                     self.orientation, phash, Statistics._make(statistics), colour)
    return PreparedImage(info, self.stored)
