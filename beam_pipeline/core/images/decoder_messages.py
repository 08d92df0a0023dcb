"""What a decoder raised or printed, as a rejection's detail quotes it: one line, and short.

libjpeg, libpng, Pillow and TensorFlow say why an image fails in their own words,
over several lines, or after TensorFlow's function-node prefix; every image module
quotes them the same way, so an errors file reads alike whichever decoder spoke.
"""
import tensorflow as tf

from beam_pipeline.core import rejections

# The longest a decoder's message is quoted in a rejection's detail.
DETAIL_CHARS = 200


def first_line(error: BaseException) -> str:
  """What a decoder raised (``error``), in one line."""
  return rejections.first_line(error, DETAIL_CHARS)


def one_line(said: str) -> str:
  """What the decoders printed to standard error (``said``), in one line."""
  return ' / '.join(said.splitlines())[:DETAIL_CHARS]


def tensorflow_message(error: tf.errors.OpError) -> str:
  """An op's error in one line, without TensorFlow's {{function_node ...}} prefix."""
  return rejections.first_line(error, DETAIL_CHARS).split("}}")[-1].strip()
