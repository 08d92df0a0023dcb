"""The embedding model of measurement e: seed 001's EfficientNetB0 feature extractor.

Keras builds it without its ImageNet weights (nothing is downloaded) and saves it once
under work/bench-models/; random weights cost what trained ones do. Its output is the
seed's 7x7x1280 feature map.

Usage: python -m benchmarks.embedding_model   (prints the model's path)
"""
import os
import subprocess
import sys
from pathlib import Path

PATH = Path(__file__).resolve().parents[1] / 'work' / 'bench-models' / 'efficientnet_b0.keras'


def ensure() -> Path:
  """The saved model, built now (in a child process, which keeps TensorFlow out of the
  benchmark's own) unless it is there already."""
  if not PATH.exists():
    built = subprocess.run([sys.executable, '-m', 'benchmarks.embedding_model'], cwd=PATH.parents[2],
                           capture_output=True, text=True, check=False)
    if built.returncode:  # its standard error is TensorFlow's start-up chatter unless it failed
      raise RuntimeError(f'building {PATH} failed:\n{built.stderr[-3000:]}')
  return PATH


def build() -> None:
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
  import keras  # pylint: disable=import-outside-toplevel
  PATH.parent.mkdir(parents=True, exist_ok=True)
  model = keras.applications.EfficientNetB0(include_top=False, weights=None, input_shape=(224, 224, 3))
  partial = PATH.with_name('building.keras')
  model.save(partial)
  partial.rename(PATH)


if __name__ == '__main__':
  if not PATH.exists():
    build()
  print(PATH)
