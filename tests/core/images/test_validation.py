"""validation.validate_batch, the first heavy step, called as a worker calls it."""
import os
import re

from beam_pipeline.core.images import perceptual_hash, preparation, validation
from beam_pipeline.core.messages import InputItem
from beam_pipeline.core.settings import StoredImages

from beam_pipeline.synthetic import natural_photos, quality_cases
from beam_pipeline.synthetic.quality_cases import encode
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
  prepare_images = preparation.prepare_images
  monkeypatch.setattr(preparation, 'prepare_images', lambda datas, *args: chunks.append(
      [len(d) for d in datas]) or prepare_images(datas, *args))
  size = os.path.getsize(items[0].uri)
  result = validation.validate_batch(items, settings(), chunk_bytes=2 * size)
  assert all(sum(chunk[:-1]) < 2 * size for chunk in chunks) and sum(map(len, chunks)) == 11
  assert [r.uri for r in result.records] == [item.uri for item in items if 'bad' not in item.uri]
  assert [(r.uri, r.reason) for r in result.rejections] == [(items[4].uri, 'not_image')]
  assert result.source_formats == {'JPEG': 10}
  assert {r.label for r in result.records} == {'cat'}
  assert len({r.order_key for r in result.records}) == 10


def test_images_with_a_side_shorter_than_min_side_as_stored_are_too_small(tmp_path):
  """--min_side=4 with --max_side=40: 4x3 is too small; 64x4 is kept; 200x10 is 40x2 as
  stored, too small for readers that crop, though its source was not."""
  photos.write_files(tmp_path, {f'cat/{w}x{h}.jpg': photos.jpegs(1, size=(w, h))[0]
                                for w, h in ((4, 3), (30, 4), (200, 10), (48, 40))})
  items = [InputItem(str(tmp_path / 'cat' / name)) for name in sorted(os.listdir(tmp_path / 'cat'))]
  result = validation.validate_batch(items, settings(min_side=4, stored=StoredImages(max_side=40)))
  assert sorted(os.path.basename(r.uri) for r in result.records) == ['30x4.jpg', '48x40.jpg']
  assert sorted((os.path.basename(r.uri), r.reason, r.detail) for r in result.rejections) == [
      ('200x10.jpg', 'too_small', '40x2 pixels as stored: a side is shorter than --min_side=4'),
      ('4x3.jpg', 'too_small', '4x3 pixels: a side is shorter than --min_side=4')]
  assert len(validation.validate_batch(items, settings()).records) == 4


def test_a_record_carries_the_fingerprint_of_the_file_it_came_from(tmp_path):
  """An incremental run tells from a written record whether its file changed since."""
  photos.write_files(tmp_path, {f'cat/{i}.jpg': data for i, data in enumerate(photos.jpegs(2, size=(32, 24)))})
  items = [InputItem(str(tmp_path / 'cat' / '0.jpg'), fingerprint='file:1:2'),
           InputItem(str(tmp_path / 'cat' / '1.jpg'))]
  result = validation.validate_batch(items, settings())
  assert sorted((os.path.basename(r.uri), r.fingerprint) for r in result.records) == [
      ('0.jpg', 'file:1:2'), ('1.jpg', '')]


def test_a_record_carries_its_perceptual_hash_and_quality_flags(tmp_path):
  """What near copies are grouped by, and what is worth a look, travel with the record (not into the Example)."""
  photo = natural_photos.photo(0, 400, 300)
  photos.write_files(tmp_path, {'cat/plain.jpg': encode(photo, 'JPEG', quality=90),
                                'cat/dark.png': encode(quality_cases.dark(photo), 'PNG'),
                                'cat/strip.jpg': encode(natural_photos.photo(1, 1200, 300), 'JPEG', quality=90)})
  items = [InputItem(str(tmp_path / 'cat' / name)) for name in ('plain.jpg', 'dark.png', 'strip.jpg')]
  records = {os.path.basename(r.uri): r for r in validation.validate_batch(items, settings()).records}
  assert {name: r.quality for name, r in records.items()} == {
      'plain.jpg': (), 'dark.png': ('dark',), 'strip.jpg': ('extreme_aspect',)}
  assert all(re.fullmatch('[0-9a-f]{32}', r.phash) for r in records.values())
  assert perceptual_hash.near(records['plain.jpg'].phash, records['dark.png'].phash)
