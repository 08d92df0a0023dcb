"""Pillow's own decompression-bomb guard, set from --max_pixels in each process that opens images.

Pillow refuses to open an image of more than twice Image.MAX_IMAGE_PIXELS (89,478,485 in
Pillow 12: about 179 million pixels), whatever --max_pixels allows, and says so in its own
words. The option is the limit: each run sets Pillow's guard from it where images are
opened (validation, the shard writer: worker processes, Beam's SDK workers, Dataflow's
alike), never below Pillow's default, so the guard stays a second line of defence at twice
the option; and a refusal it still makes is said in the option's terms.
"""
import re

from PIL import Image

# Pillow's default, as it stood when this module was first imported in the process.
PILLOW_DEFAULT = Image.MAX_IMAGE_PIXELS
_PILLOW_PIXELS = re.compile(r'\((\d+) pixels\)')


def set_for(max_pixels: int) -> None:
  """Sets Pillow's guard for a run of ``max_pixels`` (--max_pixels): to the option where it is
  above Pillow's default, else to the default (a run before in this process may have raised it)."""
  Image.MAX_IMAGE_PIXELS = max(PILLOW_DEFAULT, max_pixels)


def refusal(error: Image.DecompressionBombError, max_pixels: int) -> str:
  """What Pillow's refusal of an image's size means for the run: its pixels against --max_pixels."""
  found = _PILLOW_PIXELS.search(str(error))
  return f'{found.group(1) if found else "more"} pixels exceeds --max_pixels={max_pixels}'
