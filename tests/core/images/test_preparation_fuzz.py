"""Property: on any bytes, prepare_image rejects with a reason or returns what TensorFlow decodes."""
import os

import hypothesis
import hypothesis.strategies as st
import tensorflow as tf

from beam_pipeline.core.images import preparation
from beam_pipeline.core.rejections import Rejected

from helpers.image_cases import cases

SEEDS = [c.data for c in cases().values() if c.reason is None]


@st.composite
def mutated_images(draw):
  data = bytearray(draw(st.sampled_from(SEEDS)))
  for _ in range(draw(st.integers(1, 4))):
    kind = draw(st.sampled_from(['flip', 'truncate', 'insert', 'delete']))
    at = draw(st.integers(0, max(0, len(data) - 1)))
    if kind == 'flip' and data:
      data[at] ^= draw(st.integers(1, 255))
    elif kind == 'truncate':
      del data[at:]
    elif kind == 'insert':
      data[at:at] = draw(st.binary(min_size=1, max_size=16))
    elif data:
      del data[at:at + draw(st.integers(1, 64))]
  return bytes(data)


def _check(data: bytes) -> None:
  if os.environ.get('FUZZ_SAVE'):  # a native crash leaves its input behind in this file
    with open(os.environ['FUZZ_SAVE'], 'wb') as f:
      f.write(data)
  try:
    prepared = preparation.prepare_image(data, max_pixels=10**7)
  except Rejected as e:
    assert e.reason and e.detail
    return
  info = prepared.info
  decoded = tf.io.decode_image(prepared.stored, channels=3, expand_animations=False)
  assert decoded.shape == (info.height, info.width, 3), info
  assert tf.io.decode_image(prepared.stored, channels=0, expand_animations=False).shape[-1] == info.channels


# FUZZ_EXAMPLES=20000 FUZZ_RANDOM=1 runs a longer, non-repeating campaign.
@hypothesis.settings(max_examples=int(os.environ.get('FUZZ_EXAMPLES', 1500)), deadline=None,
                     derandomize=not os.environ.get('FUZZ_RANDOM'),
                     suppress_health_check=[hypothesis.HealthCheck.too_slow])
@hypothesis.given(mutated_images())
def test_mutated_images_are_rejected_or_tensorflow_readable(data):
  _check(data)


@hypothesis.settings(max_examples=100, deadline=None, derandomize=True)
@hypothesis.given(st.binary(max_size=2048))
def test_random_bytes_never_crash(data):
  _check(data)
