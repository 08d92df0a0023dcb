"""What a decoder raised or printed, as a rejection's detail quotes it: one line, and short.

libjpeg, libpng, Pillow and TensorFlow say why an image fails in their own words,
over several lines, or after TensorFlow's function-node prefix; every image module
quotes them the same way, so an errors file reads alike whichever decoder spoke.
"""
import re
from typing import List

import tensorflow as tf

from beam_pipeline.core import rejections

# The longest a decoder's message is quoted in a rejection's detail.
DETAIL_CHARS = 200


def first_line(error: BaseException) -> str:
  """What a decoder raised (``error``), in one line."""
  return rejections.first_line(error, DETAIL_CHARS)


# The prefix TensorFlow's own logging (absl's) gives a line below TF_CPP_MIN_LOG_LEVEL=3
# (which a user may set lower): severity, date, time, thread, and the source file that logged it.
# libpng's warnings reach standard error through it ('W0000 00:00:1796542481.328831    3411
# png_io.cc:96] '), libjpeg's directly, without one.
_LOGGED = re.compile(r'^[IWEF]\d{4} [\d:.]+ +\d+ ([\w.]+):\d+\] ')
_DECODER_SOURCES = re.compile(r'^(png|jpeg|gif|bmp|webp)\w*\.cc$')


def lines(said: str) -> List[str]:
  """The lines of what standard error caught (``said``) that the image decoders printed, alike
  however often an image is decoded: libjpeg's, and TensorFlow's log lines from its decoders'
  sources without their prefix (time and thread differ each time); not its other log lines (a
  missing GPU driver, the first op's device set-up)."""
  found = []
  for line in said.splitlines():
    logged = _LOGGED.match(line)
    if not logged:
      found.append(line)
    elif _DECODER_SOURCES.match(logged.group(1)):
      found.append(line[logged.end():])
  return found


def one_line(said: str) -> str:
  """What the decoders printed to standard error (``said``), in one line (``lines``)."""
  return ' / '.join(lines(said))[:DETAIL_CHARS]


def tensorflow_message(error: tf.errors.OpError) -> str:
  """An op's error in one line, without TensorFlow's {{function_node ...}} prefix."""
  return rejections.first_line(error, DETAIL_CHARS).split("}}")[-1].strip()
