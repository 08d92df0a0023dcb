"""Tiny Keras CNNs with random weights, saved the ways users save models: nothing is downloaded."""
from pathlib import Path

import keras
import tensorflow as tf

SIZE = 32  # --embedding_image_size the tests use: small, so the CNN runs fast
SHAPE = (4, 4, 2)  # what tiny_cnn gives per image, shaped, so records must carry the shape


def tiny_cnn(size: int = SIZE, seed: int = 0) -> keras.Model:
  """Normalizes its 0-255 input itself, as Keras applications do; SHAPE out for size 32."""
  keras.utils.set_random_seed(seed)
  images = keras.Input((None, None, 3)) if size is None else keras.Input((size, size, 3))
  x = keras.layers.Rescaling(1 / 127.5, offset=-1)(images)
  x = keras.layers.Conv2D(8, 3, strides=2, padding='same', activation='relu')(x)
  x = keras.layers.Conv2D(2, 3, strides=2, padding='same')(x)
  x = keras.layers.MaxPooling2D(2)(x)
  return keras.Model(images, x)


def dense() -> keras.Model:
  """A model that takes numbers, not images."""
  numbers = keras.Input((10,))
  return keras.Model(numbers, keras.layers.Dense(2)(numbers))


def save_keras(model: keras.Model, directory: Path) -> Path:
  path = Path(directory) / 'tiny.keras'
  model.save(path)
  return path


def export_saved_model(model: keras.Model, directory: Path) -> Path:
  """A SavedModel directory as Keras 3 exports one (model.export)."""
  path = Path(directory) / 'tiny_savedmodel'
  model.export(str(path), verbose=False)
  return path


def module_saved_model(model: keras.Model, directory: Path) -> Path:
  """A SavedModel directory as tf.saved_model.save writes one, with its own serving signature."""
  path = Path(directory) / 'tiny_module'
  serve = tf.function(lambda images: {'features': model(images)},
                      input_signature=[tf.TensorSpec([None, None, None, 3], tf.float32, name='images')])
  module = tf.Module()
  module.model = model
  tf.saved_model.save(module, str(path), signatures={'serving_default': serve})
  return path


# Every way the tests save a model, by name.
SAVERS = {'keras': save_keras, 'export': export_saved_model, 'module': module_saved_model}
