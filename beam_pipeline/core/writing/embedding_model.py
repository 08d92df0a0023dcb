"""--embedding_model loaded and run: once per process, on local files only.

The write step computes a shard's embeddings as it writes the shard, in batches.
Beam's RunInference is not used: it would take one element per image, and its
outputs would then have to be grouped into shards again, sending every embedding
(up to hundreds of KB each) through a shuffle that today carries a few hundred
bytes of metadata per image. Its TensorFlow model handler is not used either: it
loads models with ``tf.keras.models.load_model``, which in Keras 3 reads only
``.keras`` and H5 files, and would make worker processes import Beam.

A SavedModel directory is loaded with ``tf.saved_model.load`` and its serving
signature. The model must be a local path: the Beam side copies one on Cloud
Storage to local disk first (pipeline/model_files.py), as it hands reading remote
files in (core/inputs/reading.py). A process keeps its loaded model for as long as it
lives, shared by its threads (several on a Dataflow worker), on a GPU as on a CPU.
"""
import os
import threading
import zipfile
from typing import Any, Callable, Dict, List, Sequence, Tuple

import keras
import numpy as np
import tensorflow as tf
from beam_pipeline.core import rejections
from beam_pipeline.core.writing import embeddings
from beam_pipeline.core.user_errors import ModelError
from beam_pipeline.core.settings import EmbeddingSpec

# This process's models by (local path, sha256), and the lock its threads load them under.
_held: Dict[Tuple[str, str], '_ImageModel'] = {}
_loading = threading.Lock()


class _ImageModel:
  """A loaded model as one function of a float32 image batch, however it was saved."""

  def __init__(self, function: Callable[[tf.Tensor], Any], input_spec: tf.TensorSpec, keep: Any = None):
    self._function = function
    self.input_spec = input_spec
    self._keep = keep  # what the function's variables belong to

  def __call__(self, images: tf.Tensor) -> tf.Tensor:
    return self._function(images)


def load(path: str) -> _ImageModel:
  """The model at the local ``path``: a SavedModel directory, or a Keras file; ModelError
  (for the user) if it is neither, or takes or gives more than one tensor."""
  if os.path.isdir(path):
    return _saved_model(path)
  if path.endswith('.keras') and not zipfile.is_zipfile(path):
    raise ModelError('is not a Keras model file (a .keras zip archive) nor a SavedModel directory')
  try:
    model = keras.models.load_model(path, compile=False)
  except Exception as e:  # Keras raises several types, for files it cannot read
    raise ModelError(f'could not be loaded as a Keras model or a SavedModel directory: '
                     f'{rejections.first_line(e)}') from None
  if len(model.inputs) != 1 or len(model.outputs) != 1:
    raise ModelError(f'takes {len(model.inputs)} input(s) and gives {len(model.outputs)} output(s); '
                     'it needs to take one image batch and give one embedding per image')
  spec = tf.TensorSpec(model.inputs[0].shape, model.inputs[0].dtype)
  return _ImageModel(_graph_function(model), spec, model)


def _graph_function(model: keras.Model) -> Callable[[tf.Tensor], tf.Tensor]:
  """The Keras model as a TensorFlow graph function (ten times faster than its eager call),
  traced once per image size for any batch size, so a shard's last, smaller batch costs
  no second trace."""
  functions: Dict[Tuple[int, ...], Callable] = {}

  def call(images: tf.Tensor) -> tf.Tensor:
    shape = tuple(images.shape[1:])
    if shape not in functions:
      functions[shape] = tf.function(lambda batch: model(batch, training=False),
                                     input_signature=[tf.TensorSpec([None, *shape], tf.float32)])
    return functions[shape](images)

  return call


def _saved_model(path: str) -> _ImageModel:
  if not os.path.exists(os.path.join(path, 'saved_model.pb')):
    raise ModelError('is a directory without saved_model.pb; give a .keras file or a SavedModel directory')
  loaded = tf.saved_model.load(path)
  signature = loaded.signatures.get('serving_default')
  if signature is None:
    raise ModelError('is a SavedModel without a serving_default signature; export it with model.export(PATH) '
                     'or tf.saved_model.save(model, PATH, signatures=...)')
  inputs, outputs = signature.structured_input_signature[1], signature.structured_outputs
  if len(inputs) != 1 or len(outputs) != 1:
    raise ModelError(f'has a serving signature with inputs ({", ".join(sorted(inputs))}) and outputs '
                     f'({", ".join(sorted(outputs))}); it needs one image batch in and one embedding per image out')
  (name, spec), (output,) = next(iter(inputs.items())), list(outputs)
  return _ImageModel(lambda images: signature(**{name: images})[output], spec, loaded)


def describe(model: _ImageModel, image_size: int) -> Tuple[int, ...]:
  """The shape of one embedding of ``model``, from a batch of one black image, once its
  input is checked; ModelError if it takes no such batch or gives no embedding."""
  embeddings.check_input(model.input_spec.shape, model.input_spec.dtype, image_size)
  try:
    output = model(tf.zeros([1, image_size, image_size, 3], tf.float32))
  except Exception as e:  # pylint: disable=broad-except
    raise ModelError(f'failed on a batch of one {image_size}x{image_size} RGB image: '
                     f'{rejections.first_line(e)}') from None
  return embeddings.output_shape(tf.convert_to_tensor(output), 1)


def _model(spec: EmbeddingSpec, path: str) -> _ImageModel:
  """This process's copy of the model at the local ``path``, loaded by its first caller."""
  key = (path, spec.sha256)
  with _loading:
    if key not in _held:
      _held[key] = load(path)
    return _held[key]


def embedder(spec: EmbeddingSpec, path: str) -> Callable[[Sequence[bytes]], List[np.ndarray]]:
  """A function from stored images to their flattened float32 embeddings, with this
  process's copy of the model at the local ``path``; the caller batches them
  (--embedding_batch_size)."""
  model = _model(spec, path)

  def embed(images: Sequence[bytes]) -> List[np.ndarray]:
    outputs = np.asarray(model(tf.stack(embeddings.model_inputs(images, spec.image_size))), np.float32)
    return list(outputs.reshape(len(images), -1))

  return embed


def check(spec: EmbeddingSpec, path: str) -> Tuple[int, ...]:
  """Loads the model at the local ``path`` (for this process to keep) and returns the shape
  of one embedding; ModelError if it cannot embed images."""
  return describe(_model(spec, path), spec.image_size)
