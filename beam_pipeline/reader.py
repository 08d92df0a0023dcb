"""Read a finished output as a ``tf.data.Dataset`` of ``(images, labels)`` for ``model.fit``.

The file list and compression come from dataset_info.json, the commit marker, so
a directory without it (an interrupted or running conversion) is refused rather
than read half-written.
"""
from typing import Any, Dict, Optional

import tensorflow as tf

from beam_pipeline.core import dataset_info as info_file, schemas, uris


def dataset_info(output_dir: str) -> Dict[str, Any]:
  """The output's dataset_info.json, read with TensorFlow's file systems (as the shards are);
  FileNotFoundError if the conversion did not complete."""
  return info_file.read(output_dir, tf.io.gfile.exists, tf.io.gfile.GFile)


def load(output_dir: str, split: str = 'train', *, image_size: int = 224, batch_size: int = 32,
         shuffle_buffer: int = 0, seed: Optional[int] = None) -> tf.data.Dataset:
  """Batches of float32 images in [0, 1], resized to image_size x image_size, and int64 labels.

  Labels are the class ids of labels.txt (-1 for unlabeled images). With
  shuffle_buffer > 0, shard order and records are shuffled (use it for training).
  """
  info = dataset_info(output_dir)
  if split not in info['splits']:
    raise ValueError(f'{output_dir} has no split {split!r}; it has {", ".join(info["splits"]) or "none"}')
  files = [uris.join(output_dir, shard['file']) for shard in info['splits'][split]['shards']]
  keys = schemas.keys(info['schema'])
  image_key, label_key = keys[schemas.IMAGE], keys[schemas.LABEL]
  spec = {image_key: tf.io.FixedLenFeature([], tf.string), label_key: tf.io.FixedLenFeature([], tf.int64)}

  def decode(serialized: tf.Tensor):
    features = tf.io.parse_single_example(serialized, spec)
    image = tf.io.decode_image(features[image_key], channels=3, expand_animations=False)
    image.set_shape([None, None, 3])
    return tf.image.resize(image, [image_size, image_size]) / 255.0, features[label_key]

  dataset = tf.data.Dataset.from_tensor_slices(files)
  if shuffle_buffer:
    dataset = dataset.shuffle(len(files), seed=seed)
  dataset = dataset.interleave(
      lambda f: tf.data.TFRecordDataset(f, compression_type='GZIP' if info['compression'] == 'gzip' else ''),
      num_parallel_calls=tf.data.AUTOTUNE, deterministic=not shuffle_buffer)
  if shuffle_buffer:
    dataset = dataset.shuffle(shuffle_buffer, seed=seed)
  return (dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
          .batch(batch_size)
          .prefetch(tf.data.AUTOTUNE))
