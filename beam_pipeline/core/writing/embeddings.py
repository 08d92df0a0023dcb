"""CNN embeddings of the stored images: what a model is given, and what it must take and give.

Plain functions, for the write step, which runs the model (embedding_model.py),
and for the tests, which compute the same
embeddings on their own.
"""
from typing import List, Optional, Sequence, Tuple

import tensorflow as tf

from beam_pipeline.core.writing import model_input
from beam_pipeline.core.user_errors import ModelError


def model_inputs(images: Sequence[bytes], size: int) -> List[tf.Tensor]:
  """Each image as the model takes it (model_input.image): [size, size, 3] float32,
  values in [0, 255]. Nothing is normalized: models carry their own normalization,
  as Keras applications do."""
  return [_resized(tf.constant(image), size) for image in images]


@tf.function(reduce_retracing=True)
def _resized(image: tf.Tensor, size: int) -> tf.Tensor:
  """One image's model input; traced once per size, which saves the eager ops' overhead."""
  return model_input.image(image, size)


def check_input(shape: Sequence[Optional[int]], dtype: tf.DType, image_size: int) -> None:
  """Raises ModelError unless a model input of ``shape`` and ``dtype`` takes a batch of
  RGB images of image_size x image_size."""
  dims = tuple(shape)
  if len(dims) != 4 or dims[3] not in (None, 3):
    raise ModelError(f'takes input of shape {_text(dims)}, not a batch of RGB images (batch, height, width, 3)')
  if not dtype.is_floating:
    raise ModelError(f'takes {dtype.name} input, not float32 images (values 0-255)')
  fixed = {side for side in dims[1:3] if side is not None}
  if fixed and fixed != {image_size}:
    wanted = f'; give --embedding_image_size={fixed.pop()}' if len(fixed) == 1 and None not in dims[1:3] else ''
    raise ModelError(f'takes images of {_text(dims[1:3], "x")} pixels, not {image_size}x{image_size}{wanted}')


def output_shape(output: tf.Tensor, batch_size: int) -> Tuple[int, ...]:
  """The shape of one image's embedding, from the model's ``output`` for a batch of ``batch_size``
  images; ModelError unless that output holds one float tensor per image."""
  if not output.dtype.is_floating or output.shape.rank < 2 or output.shape[0] != batch_size:
    raise ModelError(f'gives {output.dtype.name} output of shape {_text(output.shape)} for {batch_size} '
                     f'image(s), not one float embedding per image')
  return tuple(int(side) for side in output.shape[1:])


def _text(dims: Sequence[Optional[int]], separator: str = ', ') -> str:
  """A shape as Keras prints it, or with ``x`` a size (any: not fixed)."""
  if separator == 'x':
    return 'x'.join('any' if side is None else str(side) for side in dims)
  return '(' + ', '.join('None' if side is None else str(side) for side in dims) + ')'
