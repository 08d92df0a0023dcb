"""A stored image as a model takes it: decoded as every reader decodes it, resized to a square.

One definition for the three places that feed models: the reader's datasets, the
tf.Transform graph, and the embedding step. A model trained on one of them then
sees the same pixels from the others; and, of a --multi_label output, the same labels.
"""
import tensorflow as tf


def image(encoded: tf.Tensor, size: int) -> tf.Tensor:
  """[size, size, 3] float32, values in [0, 255]: ``tf.io.decode_image`` to 8-bit RGB
  (an animation's first frame), resized bilinearly with ``tf.image.resize``."""
  decoded = tf.io.decode_image(encoded, channels=3, expand_animations=False)
  decoded.set_shape([None, None, 3])
  return tf.image.resize(decoded, [size, size])


def multi_hot(class_ids: tf.SparseTensor, num_classes: int) -> tf.Tensor:
  """A --multi_label record's labels as a model takes them: float32, 1.0 at each of its class
  ids (image/class/label, parsed as a VarLenFeature) of ``num_classes``; of one record or of
  a batch of them alike."""
  return tf.cast(tf.sparse.to_indicator(class_ids, num_classes), tf.float32)
