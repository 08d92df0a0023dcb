"""tf.Transform's internal tracing API as compat/tft_internals.py calls it: an upgrade that
renames or reshapes it fails here, naming what changed (tests/core/writing/test_transform_graph.py writes
and runs a graph through it)."""
import inspect

from tensorflow_transform import impl_helper


def test_tf_transforms_internal_tracing_api_is_still_there():
  parameters = inspect.signature(impl_helper.trace_and_write_v2_saved_model).parameters
  assert set(parameters) >= {'saved_model_dir', 'preprocessing_fn', 'input_signature', 'base_temp_dir',
                             'baseline_analyzers_fingerprint', 'tensor_replacement_map', 'output_keys_to_name_map',
                             'save_options'}
  assert impl_helper.METADATA_DIR_NAME == '.tft_metadata'
