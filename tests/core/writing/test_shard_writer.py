"""The shard writer's own rejections and checks, as plain calls: files that change or vanish
between validation and writing, and a re-encoding that comes out other than validated."""
import os

import tensorflow as tf

from beam_pipeline.core.images import image_info, preparation
from beam_pipeline.core.writing import shard_writer
from beam_pipeline.core.messages import ShardPlan
from beam_pipeline.core.settings import StoredImages

from helpers import photos
from helpers.values import image_record, settings


def _validated(tmp_path, files):
  """The records validation makes of ``files`` ({name: bytes}), written under tmp_path."""
  records = []
  for name, data in files.items():
    (tmp_path / name).write_bytes(data)
    prepared = preparation.prepare_image(data, 10**8, StoredImages())
    info = prepared.info
    records.append(image_record(
        str(tmp_path / name), split='train', sha256=image_info.sha256_hex(prepared.stored),
        num_bytes=len(prepared.stored), format=info.format, height=info.height, width=info.width,
        channels=info.channels, reencoded=info.reencoded)._replace(source_sha256=image_info.sha256_hex(data)))
  return records


def _written(path):
  return [tf.train.Example.FromString(r.numpy()).features.feature for r in tf.data.TFRecordDataset(str(path))]


def test_a_file_changed_or_deleted_after_validation_is_rejected_alone(tmp_path):
  records = _validated(tmp_path, {f'{i}.jpg': photos.jpeg(i) for i in range(4)})
  (tmp_path / '1.jpg').write_bytes(photos.jpeg(9))
  os.remove(tmp_path / '2.jpg')
  written = shard_writer.write_shard(ShardPlan('train', 0, 1, tuple(records)), str(tmp_path / 'shard'), settings(),
                                     ['cat'])
  assert [(os.path.basename(r.uri), r.reason) for r in written.rejections] == [
      ('1.jpg', 'changed_during_run'), ('2.jpg', 'unreadable')]
  assert written.shard.num_examples == 2
  assert [f['image/filename'].bytes_list.value[0].decode() for f in _written(tmp_path / 'shard')] == [
      records[0].uri, records[3].uri]


def test_a_reencoding_other_than_validated_is_written_checked_with_its_own_hash(tmp_path):
  """The record planned for a BMP says another sha256 than its re-encoding gives now (as it
  would if a library encoded differently in this process). Expected: the image is not lost;
  what is written carries the hash and size of the bytes written."""
  record, = _validated(tmp_path, {'photo.bmp': photos.encode(photos.image(3), 'BMP')})
  planned = record._replace(sha256='0' * 64, num_bytes=1)
  written = shard_writer.write_shard(ShardPlan('train', 0, 1, (planned,)), str(tmp_path / 'shard'), settings(),
                                     ['cat'])
  assert written.rejections == [] and written.shard.num_examples == 1
  feature, = _written(tmp_path / 'shard')
  stored = feature['image/encoded'].bytes_list.value[0]
  assert feature['image/key/sha256'].bytes_list.value[0].decode() == image_info.sha256_hex(stored) == record.sha256


def test_a_reencoding_that_decodes_to_another_size_is_rejected(tmp_path):
  record, = _validated(tmp_path, {'photo.bmp': photos.encode(photos.image(3), 'BMP')})
  planned = record._replace(sha256='0' * 64, height=record.height + 1)
  written = shard_writer.write_shard(ShardPlan('train', 0, 1, (planned,)), str(tmp_path / 'shard'), settings(),
                                     ['cat'])
  assert [r.reason for r in written.rejections] == ['corrupt']
  assert 'made again, decodes to' in written.rejections[0].detail
  assert written.shard.num_examples == 0


def test_a_shard_of_reencoded_images_is_made_on_threads_in_its_plans_order(tmp_path):
  """WebP, BMP and TIFF re-encoded ahead on threads, JPEGs stored as they are, a file removed
  meanwhile: the shard holds the rest in the plan's order, each with the bytes validation made."""
  files = {}
  for i in range(9):
    files[f'{i}.{("webp", "bmp", "jpg", "tiff")[i % 4]}'] = photos.encode(photos.image(i, 64, 48),
                                                                          ('WEBP', 'BMP', 'JPEG', 'TIFF')[i % 4])
  records = _validated(tmp_path, files)
  os.remove(tmp_path / '5.bmp')
  written = shard_writer.write_shard(ShardPlan('train', 0, 1, tuple(records)), str(tmp_path / 'shard'), settings(),
                                     ['cat'])
  assert [os.path.basename(r.uri) for r in written.rejections] == ['5.bmp']
  kept = [record for record in records if not record.uri.endswith('5.bmp')]
  assert [(f['image/filename'].bytes_list.value[0].decode(), f['image/key/sha256'].bytes_list.value[0].decode())
          for f in _written(tmp_path / 'shard')] == [(record.uri, record.sha256) for record in kept]
