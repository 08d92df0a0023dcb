"""validation.validate_batch, the first heavy step, called as a worker calls it."""
import os

from beam_pipeline.core import images, validation
from beam_pipeline.core.records import InputItem

from helpers import photos
from helpers.values import settings


def test_validation_decodes_a_batch_in_chunks_of_bounded_bytes(tmp_path, monkeypatch):
  """Ten photos and a damaged file: TensorFlow gets them in chunks of at most the chunk
  size plus one image, and every input comes back once, as a record or a rejection."""
  photos.write_files(tmp_path, {f'cat/{i}.jpg': data for i, data in enumerate(photos.jpegs(10, size=(64, 48)))})
  (tmp_path / 'cat' / 'bad.jpg').write_bytes(b'<html>')
  items = [InputItem(str(tmp_path / 'cat' / f'{i}.jpg')) for i in range(10)]
  items.insert(4, InputItem(str(tmp_path / 'cat' / 'bad.jpg')))
  chunks = []
  prepare_images = images.prepare_images
  monkeypatch.setattr(images, 'prepare_images', lambda datas, *args: chunks.append(
      [len(d) for d in datas]) or prepare_images(datas, *args))
  size = os.path.getsize(items[0].uri)
  result = validation.validate_batch(items, settings(), chunk_bytes=2 * size)
  assert all(sum(chunk[:-1]) < 2 * size for chunk in chunks) and sum(map(len, chunks)) == 11
  assert [r.uri for r in result.records] == [item.uri for item in items if 'bad' not in item.uri]
  assert [(r.uri, r.reason) for r in result.rejections] == [(items[4].uri, 'not_image')]
  assert result.source_formats == {'JPEG': 10}
  assert {r.label for r in result.records} == {'cat'}
  assert len({r.order_key for r in result.records}) == 10
