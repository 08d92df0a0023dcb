"""TensorFlow decodes the bytes to be stored: the reader every record must satisfy.

Every image's stored bytes are decoded here once before they become a record, and
summarized for its perceptual hash and quality flags: a batch at a time in one tf.data
graph, which decodes on every core the process may use (eager calls from Python threads
do not run in parallel; on a core of its own, as a local worker is, one image after the
other), and one by one where a batch's failures must be explained (checked_by_tensorflow)
or its warnings attributed (jpeg_warnings).
"""
import os
from typing import Dict, List, NamedTuple, Optional, Tuple, Union

import numpy as np
import tensorflow as tf

from beam_pipeline.core import rejections
from beam_pipeline.core.console import native_output
from beam_pipeline.core.images import colour_signature, decoder_messages, image_quality, perceptual_hash
from beam_pipeline.core.images.image_info import PendingImage, PreparedImage
from beam_pipeline.core.rejections import Rejected

_NO_HEADER = (-1, -1, -1)


class Decoded(NamedTuple):
  """What TensorFlow's decode of one image gave."""
  header: Tuple[int, ...]  # a JPEG's (height, width, channels) as its header says; else _NO_HEADER
  shape: Tuple[int, ...]  # as decoded (a JPEG at 1/8 scale)
  phash: str  # perceptual_hash.phash of the decoded pixels, turned upright
  statistics: Tuple[float, ...]  # image_quality.Statistics'
  colour: str = ''  # colour_signature of the decoded pixels, turned upright


def _grid(image: tf.Tensor) -> tf.Tensor:
  """A decoded image summarized: perceptual_hash.SIDE x SIDE cells, each the mean of the pixels
  under it, in the image's own channels. One raw op and no more: the graph gives the grids
  alone (padded to one shape per batch), and the hash and statistics are numpy's over a whole
  batch, as the same work in operations per image here, or tf.image.resize's own checks and
  reshapes, cost many times more (benchmarks/README.md, Near copies)."""
  return tf.raw_ops.ResizeArea(images=image[None], size=[perceptual_hash.SIDE, perceptual_hash.SIDE])[0]


def _decoding_graph(num_parallel_calls: Optional[int]):
  """The graph that decodes a batch, its images mapped ``num_parallel_calls`` at a time (None:
  one after the other, in order)."""
  @tf.function(input_signature=[tf.TensorSpec([None], tf.string), tf.TensorSpec([None], tf.bool),
                                tf.TensorSpec([], tf.int64)], autograph=False)
  def decoded_graph(datas: tf.Tensor, is_jpeg: tf.Tensor, max_pixels: tf.Tensor) -> Tuple[tf.Tensor, ...]:
    def jpeg_decoded(data):
      header = tf.io.extract_jpeg_shape(data)
      pixels = tf.cast(header[0], tf.int64) * tf.cast(header[1], tf.int64)
      # A bomb's header fails here, before its pixels are decoded.
      with tf.control_dependencies([tf.debugging.assert_less_equal(pixels, max_pixels)]):
        return header, tf.io.decode_jpeg(data, channels=0, ratio=8)

    def other_decoded(data):
      return tf.constant(_NO_HEADER), tf.io.decode_image(data, channels=0, expand_animations=False)

    def decoded(index, data, jpeg):
      header, image = tf.cond(jpeg, lambda: jpeg_decoded(data), lambda: other_decoded(data))
      return index, header, tf.shape(image), _grid(image)

    images = tf.data.Dataset.from_tensor_slices((tf.range(tf.size(datas)), datas, is_jpeg))
    images = (images.map(decoded, num_parallel_calls=num_parallel_calls, deterministic=False) if num_parallel_calls
              else images.map(decoded)).ignore_errors()
    # An end marker keeps the batch non-empty when every image fails.
    marker = tf.data.Dataset.from_tensors((tf.constant(-1), tf.constant(_NO_HEADER), tf.constant(_NO_HEADER),
                                           tf.zeros([perceptual_hash.SIDE, perceptual_hash.SIDE, 1])))
    # Padded: the grids of images of fewer channels get zeros past their own.
    return images.concatenate(marker).padded_batch(tf.size(datas, out_type=tf.int64) + 1).get_single_element()
  return decoded_graph


# On every core the process may use; on one alone (a local worker pinned to its core), in order:
# there a parallel map's threads only add their own cost (benchmarks/README.md, What the whole
# conversion costs).
_DECODED_IN_PARALLEL = _decoding_graph(tf.data.AUTOTUNE)
_DECODED_IN_ORDER = _decoding_graph(None)


def _one_core() -> bool:
  """Whether this process may run on one core only."""
  return hasattr(os, 'sched_getaffinity') and len(os.sched_getaffinity(0)) == 1


def batch_decoded(pending: List[PendingImage], max_pixels: int) -> Dict[int, Decoded]:
  """{position: what its decode gave} for the images TensorFlow decodes (JPEG: at 1/8 scale,
  which still entropy-decodes every coefficient, and only within max_pixels); an image that
  fails is left out."""
  graph = _DECODED_IN_ORDER if _one_core() else _DECODED_IN_PARALLEL
  indexes, headers, shapes, grids = (tensor.numpy() for tensor in graph(
      tf.constant([p.stored for p in pending]), tf.constant([p.format == 'jpeg' for p in pending]),
      tf.constant(max_pixels, tf.int64)))
  kept = indexes >= 0
  positions = indexes[kept].tolist()
  if not positions:
    return {}
  return dict(zip(positions, _decoded(headers[kept].tolist(), shapes[kept].tolist(), grids[kept],
                                      [pending[position] for position in positions])))


def _decoded(headers: List, shapes: List, grids: np.ndarray, images: List[PendingImage]) -> List[Decoded]:
  """Each image's Decoded, from its header, decoded shape and grid: the summaries and hashes of them all at once.

  Args:
    headers: each image's (height, width, channels) as its JPEG header says; _NO_HEADER for another format.
    shapes: each image's shape as decoded (a JPEG at 1/8 scale), whose channels are the image's own.
    grids: the images' grids (_grid) in one array, padded with zeros to the most channels of any.
    images: the images decoded, in the same order: each is hashed upright, by the Exif turn it still needs (to_turn).
  """
  channels = np.array([shape[2] for shape in shapes])
  gray = perceptual_hash.thumbnails(grids, channels)
  turns = [image.to_turn for image in images]
  mirrored = perceptual_hash.facing(gray, turns)
  colours = colour_signature.signatures(grids, channels, turns, mirrored)
  statistics = image_quality.statistics(grids, gray, channels).tolist()
  hashes = [perceptual_hash.flat(values[0]) if image_quality.featureless(values) else phash
            for phash, values in zip(perceptual_hash.phashes(gray, turns, mirrored), statistics)]
  return [Decoded(tuple(header), tuple(shape), phash, tuple(values), colour)
          for header, shape, phash, values, colour in zip(headers, shapes, hashes, statistics, colours)]


def checked_by_tensorflow(pending: PendingImage) -> Union[PreparedImage, Rejected]:
  """Decodes the stored bytes with TensorFlow itself, the reader every record must satisfy.

  libjpeg inside TensorFlow treats damage that Pillow silently repairs (a scan cut
  short by a stray marker, say) as fatal, and no byte-level rule can predict that.
  JPEGs decode at 1/8 scale, which still entropy-decodes every coefficient.
  """
  try:
    if pending.format == 'jpeg':
      image = tf.io.decode_jpeg(pending.stored, channels=0, ratio=8)
    else:
      image = tf.io.decode_image(pending.stored, channels=0, expand_animations=False)
  except tf.errors.OpError as e:
    return Rejected(rejections.CORRUPT, f'{pending.source_format} data does not decode in TensorFlow: '
                    f'{decoder_messages.tensorflow_message(e)}')
  decoded, = _decoded([_NO_HEADER], [list(image.shape)], _grid(image).numpy()[None], [pending])
  return pending.checked(decoded.shape, decoded.phash, decoded.statistics, decoded.colour)


def jpeg_warnings(data: bytes, decoders: native_output.Capture) -> str:
  """What libjpeg warns of while TensorFlow decodes the JPEG ``data`` (as batch_decoded does), in one line."""
  mark = decoders.mark()
  try:
    tf.io.decode_jpeg(data, channels=0, ratio=8)
  except tf.errors.OpError:
    pass  # decoded in the batch; a failure here is the checks' to report, not damage
  return decoder_messages.one_line(decoders.since(mark))
