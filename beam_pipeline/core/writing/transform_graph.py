"""The tf.Transform graph written beside the shards: one preprocessing for training and serving.

``tft.TFTransformOutput(output).transform_features_layer()`` turns raw Examples
into ``image`` (decoded, resized to --image_size, scaled to [0, 1]; not under
--embedding_only), ``embedding`` (with --embedding_model, in the model's output
shape) and ``label``: with the default schema, the class id of
``image/class/text`` in labels.txt; with the simple one, the stored ``label`` as
it is; with --multi_label, a float32 multi-hot vector of ``image/class/label``'s ids,
as long as labels.txt.

The graph's one data-dependent part is its vocabulary, and that is labels.txt
itself, known once the records are labelled. So nothing is analyzed: the graph is
traced with the vocabulary as an asset file, which is what tf.Transform's own
Beam implementation does once its analyzers have run (compat/tft_internals.py). One
worker task does it, where the Beam analysis cost the pipeline several times
more, and would need Beam in the worker, to compute a list the pipeline already
has.
"""
import math
import os
import shutil
from typing import Callable, Dict, List, Union

import tensorflow as tf
import tensorflow_transform as tft
from tensorflow_transform.tf_metadata import dataset_metadata, metadata_io, schema_utils

from beam_pipeline.compat import tft_internals
from beam_pipeline.core import schemas
from beam_pipeline.core.inputs import labels
from beam_pipeline.core.output import output_layout
from beam_pipeline.core.writing import model_input
from beam_pipeline.core.messages import TransformGraph

# TensorFlow cannot initialize a lookup table from an empty file, so a vocabulary
# with no classes (an unlabeled dataset) holds one NUL line, which no label taken
# from a path can equal; every text then maps to -1.
_NO_CLASSES = b'\x00\n'


_Feature = Union[tf.io.FixedLenFeature, tf.io.VarLenFeature]


def raw_feature_spec(graph: TransformGraph) -> Dict[str, _Feature]:
  """The features the graph reads: the image (unless --embedding_only), the embedding (with
  --embedding_model), and the label's text (default schema), id (simple) or ids (--multi_label)."""
  keys = schemas.keys(graph.schema)
  spec = {}
  if graph.images:
    spec[keys[schemas.IMAGE]] = tf.io.FixedLenFeature([], tf.string)
  if graph.embedding_shape:
    spec[keys[schemas.EMBEDDING]] = tf.io.FixedLenFeature([math.prod(graph.embedding_shape)], tf.float32)
  if graph.multi_label:
    spec[keys[schemas.LABEL]] = tf.io.VarLenFeature(tf.int64)
  elif schemas.TEXT in schemas.KEYS[graph.schema]:
    spec[keys[schemas.TEXT]] = tf.io.FixedLenFeature([], tf.string)
  else:
    spec[keys[schemas.LABEL]] = tf.io.FixedLenFeature([], tf.int64)
  return spec


def preprocessing_fn_for(graph: TransformGraph, vocabulary_file: str,
                         num_classes: int = 0) -> Callable[[Dict[str, tf.Tensor]], Dict[str, tf.Tensor]]:
  """The graph's function; ``num_classes`` (labels.txt's length) is the length of a --multi_label
  output's multi-hot label."""
  keys, image_size = schemas.keys(graph.schema), graph.image_size

  def decode(encoded: tf.Tensor) -> tf.Tensor:
    return model_input.image(encoded, image_size) / 255.0

  def preprocessing_fn(inputs: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    outputs = {}
    if graph.images:
      outputs['image'] = tf.map_fn(decode, inputs[keys[schemas.IMAGE]],
                                   fn_output_signature=tf.TensorSpec([image_size, image_size, 3], tf.float32))
    if graph.embedding_shape:
      outputs['embedding'] = tf.reshape(inputs[keys[schemas.EMBEDDING]], [-1, *graph.embedding_shape])
    if graph.multi_label:
      outputs['label'] = model_input.multi_hot(inputs[keys[schemas.LABEL]], num_classes)
    elif schemas.TEXT in schemas.KEYS[graph.schema]:
      outputs['label'] = tft.apply_vocabulary(inputs[keys[schemas.TEXT]], vocabulary_file, default_value=-1)
    else:
      outputs['label'] = inputs[keys[schemas.LABEL]]
    return outputs

  return preprocessing_fn


def write_graph(directory: str, graph: TransformGraph, class_names: List[str]) -> None:
  """Writes output_layout.TRANSFORM_DIRECTORIES (the SavedModel, its output schema, the raw
  schema) under the local ``directory``, which is staging: the caller moves them into
  the output. What a killed run left there is removed first."""
  shutil.rmtree(directory, ignore_errors=True)
  os.makedirs(directory)
  # The SavedModel keeps a copy among its assets.
  vocabulary_file = os.path.join(directory, output_layout.VOCABULARY_FILE)
  with open(vocabulary_file, 'wb') as f:
    f.write(labels.labels_txt(class_names).encode('utf-8') or _NO_CLASSES)
  spec = raw_feature_spec(graph)
  transform_fn = os.path.join(directory, tft.TFTransformOutput.TRANSFORM_FN_DIR)
  function = preprocessing_fn_for(graph, vocabulary_file, len(class_names))
  metadata = tft_internals.trace_and_write(transform_fn, function,
                              {key: _input_spec(feature) for key, feature in spec.items()},
                              os.path.join(directory, 'tmp'))
  # The schema of the transformed features (the label's range included) comes with the SavedModel.
  os.rename(metadata, os.path.join(directory, tft.TFTransformOutput.TRANSFORMED_METADATA_DIR))
  raw_metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(spec))
  metadata_io.write_metadata(raw_metadata, os.path.join(directory, tft.TFTransformOutput.RAW_METADATA_DIR))
  shutil.rmtree(os.path.join(directory, 'tmp'), ignore_errors=True)
  os.remove(vocabulary_file)


def _input_spec(feature: _Feature) -> Union[tf.TensorSpec, tf.SparseTensorSpec]:
  """A batch of ``feature`` as the traced function takes it: a VarLenFeature parses as sparse."""
  if isinstance(feature, tf.io.VarLenFeature):
    return tf.SparseTensorSpec([None, None], feature.dtype)
  return tf.TensorSpec([None, *feature.shape], feature.dtype)
