"""A picture as the bytes of a file of one format, as a camera, an editor or a web site stores it."""
import io

from PIL import Image


def encode(image: Image.Image, fmt: str, **params) -> bytes:
  """``image`` saved as ``fmt`` (a Pillow format name) with Pillow's ``params``."""
  buffer = io.BytesIO()
  image.save(buffer, fmt, **params)
  return buffer.getvalue()
