"""Read a finished output as a ``tf.data.Dataset`` of ``(images, labels)``,
``(embeddings, labels)`` or ``(images, boxes)`` for ``model.fit``.

The file list and compression come from beam_pipeline.json, the commit marker, so
a directory without it (an interrupted or running conversion) is refused rather
than read half-written.
"""
from typing import Any, Callable, Dict, Optional, Tuple

import tensorflow as tf

from beam_pipeline.core import schemas, split_names, uris
from beam_pipeline.core.writing import model_input
from beam_pipeline.core.output.run_record import RunRecord
from beam_pipeline.core.settings import COMPRESSIONS, IMAGE_SIZE


def run_record(output_dir: str) -> RunRecord:
  """The output's beam_pipeline.json, read with TensorFlow's file systems (as the shards are);
  FileNotFoundError if the conversion did not complete."""
  return RunRecord.read(output_dir, tf.io.gfile.exists, tf.io.gfile.GFile)


FEATURES = ('image', 'embedding', 'detection')
# What pads a batch's box lists (features='detection'), as Keras' detection models expect.
PADDING = -1


def load(output_dir: str, split: str = 'train', *, features: str = 'image', image_size: int = IMAGE_SIZE,
         batch_size: int = 32, shuffle_buffer: int = 0, seed: Optional[int] = None,
         max_boxes: Optional[int] = None, drop_remainder: bool = False) -> tf.data.Dataset:
  """Batches for ``model.fit``.

  ``features='image'``: (images, labels), float32 images in [0, 1], resized to
  image_size x image_size. ``features='embedding'``: (embeddings, labels), the float32
  embeddings of --embedding_model, each shaped by its image/embedding/shape. Labels
  are the class ids of labels.txt (-1 for unlabeled images); of an output converted with
  --multi_label, float32 multi-hot vectors [batch, len(labels.txt)], 1.0 for each class the
  image has (for a sigmoid output and binary cross-entropy).
  ``features='detection'`` (an output converted with --annotations): (images, boxes),
  images as for 'image' and boxes a dict of 'boxes' [batch, max_boxes, 4], float32
  ymin, xmin, ymax, xmax normalized (Keras' bounding_box_format='rel_yxyx', which the
  resize keeps), and 'classes' [batch, max_boxes], int64 and 0-based: the line of
  labels.txt, as KerasCV's and KerasHub's detectors count classes (0 to N-1), so
  image/object/class/label - 1 (the records and label_map.pbtxt count from 1, 0 being
  the Object Detection API's background); both padded with -1 to ``max_boxes``.
  The dataset knows its length (``len(dataset)``, ``dataset.cardinality()``), the split's
  batches as beam_pipeline.json counts its records, the last one short unless
  ``drop_remainder``: Keras then knows an epoch's steps, and says nothing of running out of data.

  Args:
    output_dir: a completed conversion's --output: a local path or any URI TensorFlow's file systems read
      (gs://). FileNotFoundError where it has no beam_pipeline.json.
    split: the split to read: any word for a usual split ('val' reads validation), as the conversion reads it.
      ValueError, naming the splits the output has, for another.
    features: what the batches hold: 'image', 'embedding' or 'detection', as above. ValueError for another word,
      or for what the output does not store (images under --embedding_only, embeddings, boxes).
    image_size: the side of the square the images are resized to (bilinearly, their aspect not kept); by default
      that of --image_size (224). Unused for 'embedding'.
    batch_size: records per batch.
    shuffle_buffer: 0 shuffles nothing; above 0, the order of the shards is shuffled, and the records in a buffer
      of this many (use it for training). Each pass over the dataset is shuffled anew.
    seed: the shuffles' seed; None leaves it to TensorFlow's global seed (tf.random.set_seed), if any. Shuffled
      shards are read side by side in no fixed order, so even a seed does not promise the same order twice.
    max_boxes: for 'detection', the length the box lists are padded to: None, the batch's most; a number, that
      many, and a record with more boxes fails the read rather than lose them.
    drop_remainder: leave out the last batch where it is short, so that every batch holds ``batch_size`` records
      (as a fixed batch shape needs) and the length counts full batches only.
  """
  info = run_record(output_dir)
  split = split if split in info.splits else split_names.named(split)
  if split not in info.splits:
    raise ValueError(f'{output_dir} has no split {split!r}; it has {", ".join(info.splits) or "none"}')
  if features not in FEATURES:
    raise ValueError(f'features={features!r} is not one of {", ".join(map(repr, FEATURES))}')
  files = [uris.join(output_dir, shard.file) for shard in info.splits[split].shards]
  if features == 'detection':
    spec, parse = _detection_features(info, image_size, max_boxes)
  else:
    label_key = schemas.keys(info.schema)[schemas.LABEL]
    spec, parse_features = (_image_features if features == 'image' else _embedding_features)(info, image_size)
    multi_label = bool(info.options.get('multi_label'))
    spec[label_key] = tf.io.VarLenFeature(tf.int64) if multi_label else tf.io.FixedLenFeature([], tf.int64)
    num_classes = len(info.labels)

    def parse(parsed: Dict[str, tf.Tensor]) -> Tuple[tf.Tensor, tf.Tensor]:
      if multi_label:
        return parse_features(parsed), model_input.multi_hot(parsed[label_key], num_classes)
      return parse_features(parsed), parsed[label_key]

  dataset = tf.data.Dataset.from_tensor_slices(files)
  if shuffle_buffer:
    dataset = dataset.shuffle(len(files), seed=seed)
  dataset = dataset.interleave(
      lambda f: tf.data.TFRecordDataset(f, compression_type=COMPRESSIONS[info.compression]),
      num_parallel_calls=tf.data.AUTOTUNE, deterministic=not shuffle_buffer)
  # Checked as it is read: a shard that holds another count than the record says fails the read.
  dataset = dataset.apply(tf.data.experimental.assert_cardinality(info.splits[split].num_examples))
  if shuffle_buffer:
    dataset = dataset.shuffle(shuffle_buffer, seed=seed)
  dataset = dataset.map(lambda serialized: parse(tf.io.parse_single_example(serialized, spec)),
                        num_parallel_calls=tf.data.AUTOTUNE)
  if features == 'detection':
    dataset = dataset.padded_batch(batch_size, padded_shapes=([image_size, image_size, 3], {
        'boxes': [max_boxes, 4], 'classes': [max_boxes]}), padding_values=(0.0, {
            'boxes': float(PADDING), 'classes': tf.constant(PADDING, tf.int64)}), drop_remainder=drop_remainder)
  else:
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
  return dataset.prefetch(tf.data.AUTOTUNE)


def _image_features(info: RunRecord, image_size: int) -> Tuple[Dict[str, Any], Callable]:
  """The image's feature spec, and its decoding from the parsed record."""
  if info.embedding and not info.embedding.images_stored:
    raise ValueError("this output holds embeddings instead of images (--embedding_only); load features='embedding'")
  image_key = schemas.keys(info.schema)[schemas.IMAGE]

  def image(parsed: Dict[str, tf.Tensor]) -> tf.Tensor:
    return model_input.image(parsed[image_key], image_size) / 255.0

  return {image_key: tf.io.FixedLenFeature([], tf.string)}, image


def _embedding_features(info: RunRecord, _) -> Tuple[Dict[str, Any], Callable]:
  """The embedding's feature spec, and its shaping: by the record's own shape, which must be
  the one beam_pipeline.json gives (Keras needs it known)."""
  embedding = info.embedding
  if not embedding:
    raise ValueError('this output holds no embeddings; convert with --embedding_model to store them')
  key, shape_key, shape = embedding.key, embedding.shape_key, embedding.output_shape

  def shaped(parsed: Dict[str, tf.Tensor]) -> tf.Tensor:
    return tf.ensure_shape(tf.reshape(parsed[key], parsed[shape_key]), shape)

  return {key: tf.io.FixedLenFeature([embedding.num_values], tf.float32),
          shape_key: tf.io.FixedLenFeature([len(shape)], tf.int64)}, shaped


def _detection_features(info: RunRecord, image_size: int, max_boxes: Optional[int]) -> Tuple[Dict[str, Any], Callable]:
  """The spec of the image and its objects, and (image, {'boxes', 'classes'}) from the parsed record."""
  if 'annotations' not in info.options:
    raise ValueError("this output holds no boxes; convert with --annotations to store them")
  spec, image = _image_features(info, image_size)
  keys = schemas.keys(info.schema)
  corners = [keys[field] for field in (schemas.OBJECT_YMIN, schemas.OBJECT_XMIN, schemas.OBJECT_YMAX,
                                       schemas.OBJECT_XMAX)]
  spec.update({key: tf.io.VarLenFeature(tf.float32) for key in corners})
  spec[keys[schemas.OBJECT_LABEL]] = tf.io.VarLenFeature(tf.int64)

  def parse(parsed: Dict[str, tf.Tensor]) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    boxes = tf.stack([tf.sparse.to_dense(parsed[key]) for key in corners], axis=-1)
    classes = tf.sparse.to_dense(parsed[keys[schemas.OBJECT_LABEL]]) - 1  # labels.txt's lines, as Keras counts
    if max_boxes is not None:
      with tf.control_dependencies([tf.debugging.assert_less_equal(
          tf.shape(classes)[0], max_boxes, message=f'a record has more boxes than max_boxes={max_boxes}')]):
        classes = tf.identity(classes)
    return image(parsed), {'boxes': boxes, 'classes': classes}

  return spec, parse
