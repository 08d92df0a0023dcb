"""Which bytes a record stores, for each choice of StoredImages: the source's own, or a
re-encoding, in which format and at what size. Measured against TensorFlow in
tests/core/images/test_stored_images.py, test_preparation.py, test_preparation_fuzz.py and
test_reencoding.py:

* ``original`` (the default): JPEG (also CMYK, grayscale, progressive, MPO) and
  PNG (all modes) keep their bytes; an APNG becomes a still PNG of its default image,
  the frame TensorFlow decodes (image_plans), as some decoders stop on its frames. Everything else Pillow
  reads is re-encoded losslessly as PNG (its first frame, the frame TensorFlow
  would return): BMP and WebP (decode_jpeg reads neither), GIF (TensorFlow's
  giflib rejects files Pillow reads and sizes its output by the largest frame
  rather than the canvas), TIFF, PSD, ICO, PPM, TGA, JPEG 2000, ...
* ``jpeg``: JPEG keeps its bytes; the rest becomes RGB JPEG at --jpeg_quality,
  transparency composited on white.
* ``png``: everything becomes PNG, losslessly (but for colour-space conversions
  PNG cannot hold, such as CMYK).
* ``max_side``: an image whose longer side is longer is downscaled (Lanczos,
  aspect ratio kept; JPEG through the decoder's DCT scaling to at least twice the
  size first, which is fast and loses nothing visible) and re-encoded in the
  format it is stored in.
* ``exif_orientation``: with ``apply`` (the default) an image whose Exif
  orientation is not 1 is stored upright and without the tag, re-encoded in the
  format it is stored in (a JPEG at --jpeg_quality): TensorFlow ignores the tag,
  DALI and Pillow's exif_transpose apply it, and every reader must see one picture
  of the recorded height and width. ``ignore`` keeps the bytes as they are
  (exif_orientation.turns).
"""
from typing import Tuple

# Source formats whose bytes each --image_format keeps.
KEPT = {'original': ('jpeg', 'png'), 'jpeg': ('jpeg',), 'png': ('png',)}


def stored_format(source_format: str, image_format: str) -> str:
  """The format an image is stored in: its own if ``image_format`` keeps it, else PNG (JPEG for jpeg)."""
  own = {'JPEG': 'jpeg', 'MPO': 'jpeg', 'PNG': 'png'}.get(source_format)
  if own in KEPT[image_format]:
    return own
  return 'jpeg' if image_format == 'jpeg' else 'png'


def downscaled_size(size: Tuple[int, int], max_side: int) -> Tuple[int, int]:
  """``size`` scaled so its longer side is ``max_side`` (aspect ratio kept), or as it is if
  no longer: images are never enlarged."""
  width, height = size
  if not max_side or max(width, height) <= max_side:
    return size
  scale = max_side / max(width, height)
  return max(1, round(width * scale)), max(1, round(height * scale))
