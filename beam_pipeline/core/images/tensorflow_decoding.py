"""TensorFlow decodes the bytes to be stored: the reader every record must satisfy.

Every image's stored bytes are decoded here once before they become a record: a
batch at a time in one tf.data graph, which decodes on every core (eager calls from
Python threads do not run in parallel), and one by one where a batch's failures must
be explained (checked_by_tensorflow) or its warnings attributed (jpeg_warnings).
"""
from typing import Dict, List, Tuple, Union

import tensorflow as tf

from beam_pipeline.core import rejections
from beam_pipeline.core.console import native_output
from beam_pipeline.core.images import decoder_messages
from beam_pipeline.core.images.image_info import PendingImage, PreparedImage
from beam_pipeline.core.rejections import Rejected

_NO_HEADER = (-1, -1, -1)


@tf.function(input_signature=[tf.TensorSpec([None], tf.string), tf.TensorSpec([None], tf.bool),
                              tf.TensorSpec([], tf.int64)], autograph=False)
def _shapes_graph(datas: tf.Tensor, is_jpeg: tf.Tensor, max_pixels: tf.Tensor) -> Tuple[tf.Tensor, ...]:
  def jpeg_shapes(data):
    header = tf.io.extract_jpeg_shape(data)
    pixels = tf.cast(header[0], tf.int64) * tf.cast(header[1], tf.int64)
    # A bomb's header fails here, before its pixels are decoded.
    with tf.control_dependencies([tf.debugging.assert_less_equal(pixels, max_pixels)]):
      return header, tf.shape(tf.io.decode_jpeg(data, channels=0, ratio=8))

  def other_shapes(data):
    return tf.constant(_NO_HEADER), tf.shape(tf.io.decode_image(data, channels=0, expand_animations=False))

  def decoded_shapes(index, data, jpeg):
    return (index, *tf.cond(jpeg, lambda: jpeg_shapes(data), lambda: other_shapes(data)))

  decoded = (tf.data.Dataset.from_tensor_slices((tf.range(tf.size(datas)), datas, is_jpeg))
             .map(decoded_shapes, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
             .ignore_errors())
  # An end marker keeps the batch non-empty when every image fails.
  marker = tf.data.Dataset.from_tensors((tf.constant(-1), tf.constant(_NO_HEADER), tf.constant(_NO_HEADER)))
  return decoded.concatenate(marker).batch(tf.size(datas, out_type=tf.int64) + 1).get_single_element()


def batch_shapes(pending: List[PendingImage], max_pixels: int) -> Dict[int, Tuple[Tuple[int, ...], Tuple[int, ...]]]:
  """{position: (header shape, decoded shape)} for the images TensorFlow decodes (JPEG:
  at 1/8 scale, which still entropy-decodes every coefficient, and only within
  max_pixels); an image that fails is left out."""
  indexes, headers, shapes = _shapes_graph(tf.constant([p.stored for p in pending]),
                                           tf.constant([p.format == 'jpeg' for p in pending]),
                                           tf.constant(max_pixels, tf.int64))
  return {index: (tuple(header), tuple(shape))
          for index, header, shape in zip(indexes.numpy().tolist(), headers.numpy().tolist(), shapes.numpy().tolist())
          if index >= 0}


def checked_by_tensorflow(pending: PendingImage) -> Union[PreparedImage, Rejected]:
  """Decodes the stored bytes with TensorFlow itself, the reader every record must satisfy.

  libjpeg inside TensorFlow treats damage that Pillow silently repairs (a scan cut
  short by a stray marker, say) as fatal, and no byte-level rule can predict that.
  JPEGs decode at 1/8 scale, which still entropy-decodes every coefficient.
  """
  try:
    if pending.format == 'jpeg':
      shape = tf.io.decode_jpeg(pending.stored, channels=0, ratio=8).shape
    else:
      shape = tf.io.decode_image(pending.stored, channels=0, expand_animations=False).shape
  except tf.errors.OpError as e:
    return Rejected(rejections.CORRUPT, f'{pending.source_format} data does not decode in TensorFlow: '
                    f'{decoder_messages.tensorflow_message(e)}')
  return pending.checked(tuple(shape))


def jpeg_warnings(data: bytes, decoders: native_output.Capture) -> str:
  """What libjpeg warns of while TensorFlow decodes the JPEG ``data`` (as batch_shapes does), in one line."""
  mark = decoders.mark()
  try:
    tf.io.decode_jpeg(data, channels=0, ratio=8)
  except tf.errors.OpError:
    pass  # decoded in the batch; a failure here is the checks' to report, not damage
  return decoder_messages.one_line(decoders.since(mark))
