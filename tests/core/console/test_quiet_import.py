"""quiet_import: TensorFlow without its start-up notices, and without what it imports for nothing here."""
import json
import subprocess
import sys

from helpers.commands import ROOT, user_environment

SCRIPT = '''
import json, sys
from beam_pipeline import cli
from beam_pipeline.core.console import quiet_import
cli.quiet_libraries()
tf = quiet_import.tensorflow()
left_out = {name: name in sys.modules for name in ('keras', 'matplotlib', 'googleapiclient')}
decoded = tf.io.decode_png(tf.io.encode_png(tf.zeros([2, 3, 3], tf.uint8))).shape.as_list()
import keras, matplotlib
hidden_now = [name for name in ('keras', 'matplotlib', 'googleapiclient') if sys.modules.get(name, 1) is None]
print(json.dumps({'left_out': left_out, 'decoded': decoded, 'keras': keras.__version__.split('.')[0],
                  'layer': type(keras.layers.Dense(1)).__name__, 'hidden_now': hidden_now}))
'''


def test_tensorflow_imports_without_keras_matplotlib_or_the_api_client_which_import_as_usual_after():
  done = subprocess.run([sys.executable, '-c', SCRIPT], cwd=ROOT, env=user_environment(), capture_output=True,
                        text=True, timeout=120, check=True)
  result = json.loads(done.stdout.strip().splitlines()[-1])
  assert result['left_out'] == {'keras': False, 'matplotlib': False, 'googleapiclient': False}
  assert result['decoded'] == [2, 3, 3]
  assert result['keras'] == '3' and result['layer'] == 'Dense' and result['hidden_now'] == []
  assert done.stderr == ''  # no TensorFlow start-up notice, as the command runs it


TRANSFORM_SCRIPT = '''
import json, sys
from beam_pipeline.core.console import quiet_import
tft = quiet_import.tensorflow_transform()
left_out = 'pandas' in sys.modules
from tensorflow_transform import impl_helper
import pandas
print(json.dumps({'left_out': not left_out, 'same': quiet_import.tensorflow_transform() is tft,
                  'pandas': hasattr(pandas, 'DataFrame'), 'hidden_now': sys.modules.get('pandas', 1) is None}))
'''


def test_tensorflow_transform_imports_without_pandas_which_imports_as_usual_after():
  done = subprocess.run([sys.executable, '-c', TRANSFORM_SCRIPT], cwd=ROOT, env=user_environment(),
                        capture_output=True, text=True, timeout=120, check=True)
  result = json.loads(done.stdout.strip().splitlines()[-1])
  assert result == {'left_out': True, 'same': True, 'pandas': True, 'hidden_now': False}
