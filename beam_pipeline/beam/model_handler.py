"""--embedding_model run with Beam's TensorFlow model handler, loaded once per worker process.

The write step computes a shard's embeddings as it writes the shard, in batches,
calling the handler's ``load_model`` and ``run_inference`` itself rather than
through the RunInference transform: RunInference would take one element per
image, and its outputs would then have to be grouped into shards again, sending
every embedding (up to hundreds of KB each) through a shuffle that today carries
a few hundred bytes of metadata per image. The loaded model lives in a
``Shared`` handle, so the threads of an SDK worker process (several on Dataflow)
share one copy, on a GPU as on a CPU.

Beam's handler loads models with ``tf.keras.models.load_model``, which in Keras 3
reads only ``.keras`` and H5 files; ImageEmbeddingHandler loads a SavedModel
directory with ``tf.saved_model.load`` and its serving signature instead, and
copies a model on Cloud Storage to local disk first (Keras and TensorFlow read
local files; Beam's FileSystems reads gs://).
"""
import os
import zipfile
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import keras
import numpy as np
import tensorflow as tf
from apache_beam.ml.inference.base import PredictionResult
from apache_beam.ml.inference.tensorflow_inference import TFModelHandlerTensor
from apache_beam.utils import shared

from beam_pipeline.beam import embedding
from beam_pipeline.core import embeddings, rejections
from beam_pipeline.core.usage import ModelError
from beam_pipeline.core.settings import EmbeddingSpec

_MODELS = shared.Shared()
# Shared keeps an object only while someone holds it; a worker process holds its
# model for as long as it lives, as a DoFn's setup would.
_held: Dict[Tuple[str, str], '_ImageModel'] = {}


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


def _embed(model: _ImageModel, batch: Sequence[tf.Tensor], inference_args: Dict[str, Any],
           model_id: Optional[str] = None) -> Iterable[PredictionResult]:
  """The handler's inference function: one flattened float32 embedding per image."""
  outputs = np.asarray(model(tf.stack(batch), **inference_args), np.float32)
  return [PredictionResult(image, output.reshape(-1), model_id) for image, output in zip(batch, outputs)]


class ImageEmbeddingHandler(TFModelHandlerTensor):
  """Beam's TFModelHandlerTensor for an image model however it was saved (see the module docstring)."""

  def __init__(self, spec: EmbeddingSpec):
    super().__init__(spec.model, inference_fn=_embed, min_batch_size=1, max_batch_size=spec.batch_size)

  def load_model(self) -> _ImageModel:
    with embedding.local_copy(self._model_uri) as path:
      return load(path)

  def get_metrics_namespace(self) -> str:
    return 'beam_pipeline_embedding'


def _model(spec: EmbeddingSpec) -> _ImageModel:
  """This process's copy of the model, loaded by its first caller."""
  key = (spec.model, spec.sha256)
  if key not in _held:
    _held[key] = _MODELS.acquire(ImageEmbeddingHandler(spec).load_model, tag=key)
  return _held[key]


def embedder(spec: EmbeddingSpec) -> Callable[[Sequence[bytes]], List[np.ndarray]]:
  """A function from stored images to their flattened embeddings, in batches of up to
  --embedding_batch_size, with this process's copy of the model."""
  handler, model = ImageEmbeddingHandler(spec), _model(spec)

  def embed(images: Sequence[bytes]) -> List[np.ndarray]:
    results = handler.run_inference(embeddings.model_inputs(images, spec.image_size), model)
    return [result.inference for result in results]

  return embed


def check(spec: EmbeddingSpec) -> Tuple[int, ...]:
  """Loads the model (for this process to keep) and returns the shape of one embedding;
  ModelError if it cannot embed images."""
  return describe(_model(spec), spec.image_size)
