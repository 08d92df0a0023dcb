"""tf.Transform internals: tracing a preprocessing function into its SavedModel without
tf.Transform's Beam analysis (core/writing/transform_graph.py says why none is needed).

Checked with tensorflow-transform 1.21.0 (requirements.txt pins it). Imports TensorFlow
and tf.Transform: only the worker step that writes the graph imports it.
"""
import os
from typing import Callable, Dict

import tensorflow as tf
from tensorflow_transform import impl_helper

CHECKED_WITH = 'tensorflow-transform 1.21.0'


def trace_and_write(saved_model_dir: str, preprocessing_fn: Callable, input_signature: Dict[str, tf.TensorSpec],
                    temp_dir: str) -> str:
  """Traces ``preprocessing_fn`` into a SavedModel in ``saved_model_dir`` and returns the
  directory, inside it, of its transformed schema.

  tf.Transform's public API reaches this only through ``tft_beam.AnalyzeAndTransformDataset``,
  which runs Beam; its Beam implementation calls ``impl_helper.trace_and_write_v2_saved_model``
  once its analyzers have run, which is all a graph without analyzers needs. There is no
  public fallback.

  Args:
    saved_model_dir: where the SavedModel goes: tf.Transform's transform_fn directory.
    preprocessing_fn: the function traced, from the raw features to the transformed ones.
    input_signature: the raw features it takes, by key: the SavedModel's serving signature.
    temp_dir: a scratch directory for tf.Transform's tracing.
  """
  impl_helper.trace_and_write_v2_saved_model(
      saved_model_dir=saved_model_dir, preprocessing_fn=preprocessing_fn, input_signature=input_signature,
      base_temp_dir=temp_dir, baseline_analyzers_fingerprint={}, tensor_replacement_map=None,
      output_keys_to_name_map=None, save_options=None)
  return os.path.join(saved_model_dir, impl_helper.METADATA_DIR_NAME)
