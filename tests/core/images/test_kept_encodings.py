"""Re-encodings kept from validation for the shard writer: taken once, only when they are the
record's bytes, within their bounds, and never needed: the shard is the same either way."""
import hashlib
import os

import pytest

from beam_pipeline.core.images import kept_encodings, validation
from beam_pipeline.core.messages import InputItem, ShardPlan
from beam_pipeline.core.writing import shard_writer

from helpers import photos
from helpers.values import settings


@pytest.fixture
def kept(tmp_path):
  directory = tmp_path / 'kept'
  kept_encodings.enable(str(directory))
  yield directory
  kept_encodings.disable()


def _sha(data: bytes) -> str:
  return hashlib.sha256(data).hexdigest()


def test_a_kept_encoding_is_taken_once_with_its_source_size_and_turn(kept):
  kept_encodings.keep('a' * 64, _sha(b'png bytes'), b'png bytes', (3000, 4000), True)
  assert kept_encodings.taken('a' * 64, _sha(b'png bytes')) == kept_encodings.Kept(b'png bytes', (3000, 4000), True)
  assert kept_encodings.taken('a' * 64, _sha(b'png bytes')) is None
  assert os.listdir(kept) == []


def test_bytes_that_are_not_the_records_are_never_taken(kept):
  kept_encodings.keep('a' * 64, _sha(b'png bytes'), b'png bytes', (3, 4), False)
  path, = kept.iterdir()
  path.write_bytes(path.read_bytes()[:-1] + b'X')  # damaged on disk
  assert kept_encodings.taken('a' * 64, _sha(b'png bytes')) is None
  assert kept_encodings.taken('b' * 64, _sha(b'other')) is None


def test_nothing_is_kept_beyond_the_bound_or_when_not_enabled(kept, monkeypatch):
  monkeypatch.setattr(kept_encodings, 'KEEP_BYTES', 25)
  kept_encodings.enable(str(kept))  # counts afresh
  for index in range(3):
    kept_encodings.keep(f'{index:064x}', _sha(b'ten bytes!'), b'ten bytes!', (1, 1), False)
  assert len(list(kept.iterdir())) == 2  # 2 x (10 + header) bytes fit in 25, a third does not
  kept_encodings.disable()
  kept_encodings.keep('f' * 64, _sha(b'x'), b'x', (1, 1), False)
  assert kept_encodings.taken(f'{0:064x}', _sha(b'ten bytes!')) is None
  assert len(list(kept.iterdir())) == 2


def test_a_shard_written_from_kept_encodings_is_the_shard_written_without(kept, tmp_path):
  """WebPs, TIFFs and a JPEG turned upright by its Exif orientation are validated with keeping
  enabled; the shard written from what was kept equals the one written by encoding again."""
  files = {}
  for index in range(6):
    image = photos.image(index, 96, 64)
    files[f'{index}.{("webp", "tif", "jpg")[index % 3]}'] = photos.encode(image, ('WEBP', 'TIFF', 'JPEG')[index % 3],
                                                                           **({'exif': _turned()} if index % 3 == 2
                                                                              else {}))
  photos.write_files(tmp_path / 'in', files)
  items = [InputItem(str(tmp_path / 'in' / name)) for name in sorted(files)]
  checked = validation.validate_batch(items, settings())
  assert not checked.rejections and all(record.reencoded for record in checked.records)
  records = tuple(record._replace(split='train') for record in checked.records)
  assert len(list(kept.iterdir())) == 6
  from_kept = shard_writer.write_shard(ShardPlan('train', 0, 1, records), str(tmp_path / 'kept.tfrecord'), settings(),
                                       ['cat'])
  assert list(kept.iterdir()) == []  # each taken
  kept_encodings.disable()
  again = shard_writer.write_shard(ShardPlan('train', 0, 1, records), str(tmp_path / 'again.tfrecord'), settings(),
                                   ['cat'])
  assert (tmp_path / 'kept.tfrecord').read_bytes() == (tmp_path / 'again.tfrecord').read_bytes()
  assert from_kept.shard == again.shard
  assert from_kept.shard.num_rotated == 2


def _turned() -> bytes:
  """Exif that says the picture is to be turned a quarter (orientation 6)."""
  from PIL import Image  # pylint: disable=import-outside-toplevel
  exif = Image.Exif()
  exif[0x0112] = 6
  return exif.tobytes()
