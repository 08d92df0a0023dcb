"""The Exif segments of a JPEG counted before Pillow parses them (quadratically)."""
import pytest

from beam_pipeline.core.images import preparation
from beam_pipeline.core.images.formats import jpeg_segments
from beam_pipeline.core.rejections import Rejected

from helpers.hostile_files import exif_segment, segment
from helpers.image_cases import cases


def test_exif_bytes_outside_exif_segments_do_not_reject_a_photo():
  """The bytes Exif\\0\\0 counted anywhere only bound the segment count: a photo with one
  Exif segment and those bytes many times in a comment is walked, and written."""
  photo = cases()['photo.jpg'].data
  comment = segment(0xFE, b'Exif\0\0' * (jpeg_segments.MAX_EXIF_SEGMENTS + 1))
  marked = photo[:2] + exif_segment(fill=16) + comment + photo[2:]
  assert preparation.prepare_image(marked, max_pixels=10**8).stored is marked
  too_many = photo[:2] + exif_segment(fill=16) * (jpeg_segments.MAX_EXIF_SEGMENTS + 1) + photo[2:]
  with pytest.raises(Rejected) as raised:
    preparation.prepare_image(too_many, max_pixels=10**8)
  assert raised.value.reason == 'corrupt'


@pytest.mark.parametrize('comments', [0, jpeg_segments.WALKED_SEGMENTS])
def test_exif_segments_are_counted_however_many_other_segments_lie_before_them(comments):
  """A photo's few segments are walked; past WALKED_SEGMENTS the count falls back to the bytes
  counted in C, and says the same."""
  photo = cases()['photo.jpg'].data
  others = segment(0xFE, b'a comment') * comments
  at_most = photo[:2] + others + exif_segment(fill=16) * jpeg_segments.MAX_EXIF_SEGMENTS + photo[2:]
  too_many = photo[:2] + others + exif_segment(fill=16) * (jpeg_segments.MAX_EXIF_SEGMENTS + 1) + photo[2:]
  assert not jpeg_segments.too_many_exif_segments(at_most)
  assert jpeg_segments.too_many_exif_segments(too_many)
  assert len(list(jpeg_segments.exif_starts(too_many))) == jpeg_segments.MAX_EXIF_SEGMENTS + 1
