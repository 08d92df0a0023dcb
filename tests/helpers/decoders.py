"""What every reader makes of stored bytes: the check the image tests share."""
import io

import tensorflow as tf
from PIL import Image


def assert_decodes_everywhere(prepared) -> None:
  """TensorFlow's decode_image and decode_jpeg, and Pillow's full load, all to the recorded
  size of ``prepared`` (an image_info.PreparedImage)."""
  info, data = prepared.info, prepared.stored
  assert tf.io.decode_image(data, channels=3, expand_animations=False).shape == (info.height, info.width, 3)
  assert tf.io.decode_jpeg(data, channels=3).shape == (info.height, info.width, 3)
  with Image.open(io.BytesIO(data)) as image:
    image.load()
    assert image.size == (info.width, info.height)
