"""The tf.Transform graph written beside the shards: one preprocessing for training and serving.

``tft.TFTransformOutput(output).transform_features_layer()`` turns raw Examples
(``image/encoded``, ``image/class/text``) into ``image`` (decoded, resized to
--image_size, scaled to [0, 1]) and ``label`` (the class id of labels.txt).

The graph's one data-dependent part is its vocabulary, and that is labels.txt
itself, known once the records are labelled. So nothing is analyzed: the graph is
traced with the vocabulary as an asset file, which is what tf.Transform's own
Beam implementation does once its analyzers have run
(``impl_helper.trace_and_write_v2_saved_model``, pinned with tensorflow-transform
in requirements.txt). It takes a worker 0.4 s, tf.Transform's import included;
the Beam analysis took the pipeline 1.5 s, and would need Beam in the worker,
to compute a list the pipeline already has.
"""
import os
from typing import Callable, Dict, List

import tensorflow as tf
import tensorflow_transform as tft
from tensorflow_transform import impl_helper
from tensorflow_transform.tf_metadata import dataset_metadata, metadata_io, schema_utils

from beam_pipeline import labels

IMAGE_KEY = 'image/encoded'
TEXT_KEY = 'image/class/text'
RAW_FEATURE_SPEC = {IMAGE_KEY: tf.io.FixedLenFeature([], tf.string),
                    TEXT_KEY: tf.io.FixedLenFeature([], tf.string)}
VOCABULARY_FILE = 'class_labels.txt'
# TensorFlow cannot initialize a lookup table from an empty file, so a vocabulary
# with no classes (an unlabeled dataset) holds one NUL line, which no label taken
# from a path can equal; every text then maps to -1.
_NO_CLASSES = b'\x00\n'


def preprocessing_fn_for(image_size: int,
                         vocabulary_file: str) -> Callable[[Dict[str, tf.Tensor]], Dict[str, tf.Tensor]]:

  def decode(encoded: tf.Tensor) -> tf.Tensor:
    image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
    image.set_shape([None, None, 3])
    return tf.image.resize(image, [image_size, image_size]) / 255.0

  def preprocessing_fn(inputs: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    images = tf.map_fn(decode, inputs[IMAGE_KEY],
                       fn_output_signature=tf.TensorSpec([image_size, image_size, 3], tf.float32))
    return {'image': images, 'label': tft.apply_vocabulary(inputs[TEXT_KEY], vocabulary_file, default_value=-1)}

  return preprocessing_fn


def write_graph(directory: str, image_size: int, class_names: List[str]) -> None:
  """Writes transform_fn/, transformed_metadata/ and metadata/ (the raw schema) under ``directory``.

  ``directory`` is staging: the caller moves the three into the output. What a
  killed run left there is removed first.
  """
  if tf.io.gfile.exists(directory):
    tf.io.gfile.rmtree(directory)
  tf.io.gfile.makedirs(directory)
  vocabulary_file = os.path.join(directory, VOCABULARY_FILE)  # the SavedModel keeps a copy among its assets
  with tf.io.gfile.GFile(vocabulary_file, 'wb') as f:
    f.write(labels.labels_txt(class_names).encode('utf-8') or _NO_CLASSES)
  transform_fn = os.path.join(directory, tft.TFTransformOutput.TRANSFORM_FN_DIR)
  input_signature = {key: tf.TensorSpec([None], spec.dtype) for key, spec in RAW_FEATURE_SPEC.items()}
  impl_helper.trace_and_write_v2_saved_model(
      saved_model_dir=transform_fn, preprocessing_fn=preprocessing_fn_for(image_size, vocabulary_file),
      input_signature=input_signature, base_temp_dir=os.path.join(directory, 'tmp'),
      baseline_analyzers_fingerprint={}, tensor_replacement_map=None, output_keys_to_name_map=None,
      save_options=None)
  # The schema of the transformed features (the label's range included) comes with the SavedModel.
  tf.io.gfile.rename(os.path.join(transform_fn, impl_helper.METADATA_DIR_NAME),
                     os.path.join(directory, tft.TFTransformOutput.TRANSFORMED_METADATA_DIR))
  raw_metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(RAW_FEATURE_SPEC))
  metadata_io.write_metadata(raw_metadata, os.path.join(directory, tft.TFTransformOutput.RAW_METADATA_DIR))
