"""The tf.Transform graph, written as a worker writes it."""
import tensorflow as tf
import tensorflow_transform as tft

from beam_pipeline.core import schemas
from beam_pipeline.core.output import output_layout
from beam_pipeline.core.writing import examples, transform_graph
from beam_pipeline.core.messages import TransformGraph

from helpers import photos


def _example(schema, label_id, text):
  fields = {schemas.IMAGE: photos.jpeg(1, 20, 10), schemas.FORMAT: b'jpeg', schemas.HEIGHT: 10, schemas.WIDTH: 20,
            schemas.ORIGINAL_HEIGHT: 10, schemas.ORIGINAL_WIDTH: 20,
            schemas.CHANNELS: 3, schemas.LABEL: label_id, schemas.TEXT: text, schemas.URI: b'x',
            schemas.SHA256: b'0'}
  return examples.encode_example(fields, {}, schema)


def test_each_schema_gets_a_graph_that_reads_its_own_records(tmp_path):
  """The default schema's graph looks the label's text up in labels.txt; the simple
  schema's, whose records carry no text, passes their class id through."""
  for schema in schemas.SCHEMAS:
    directory = tmp_path / schema
    transform_graph.write_graph(str(directory), TransformGraph(8, schema), ['cat', 'dog'])
    assert sorted(p.name for p in directory.iterdir()) == sorted(output_layout.TRANSFORM_DIRECTORIES)
    output = tft.TFTransformOutput(str(directory))
    batch = tf.constant([_example(schema, 1, b'dog'), _example(schema, 0, b'cat')])
    transformed = output.transform_features_layer()(tf.io.parse_example(batch, output.raw_feature_spec()))
    assert transformed['image'].shape == (2, 8, 8, 3)
    assert transformed['label'].numpy().tolist() == [1, 0], schema
