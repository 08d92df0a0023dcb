"""The frames of fixed cameras: each frame its camera's scene, a radial gradient (a smooth,
featureless picture), with a few random pixels, so that a perceptual hash's bits are set by the
noise and most frames of a camera lie within a few bits of each other: what the frames of a
fixed camera, product shots on one background or scanned forms look like to near-copy grouping.
"""
import io
from pathlib import Path
from typing import Dict

import numpy as np
from PIL import Image

SIDE = 64
NOISY_PIXELS = 5


def frame(camera: int, index: int) -> bytes:
  """Frame ``index`` of camera ``camera`` as a JPEG: the camera's radial gradient, centred where
  the camera looks, with NOISY_PIXELS random pixels."""
  rng = np.random.default_rng([camera, index])
  centre = np.random.default_rng(camera).uniform(0, SIDE, 2)
  y, x = np.mgrid[0:SIDE, 0:SIDE]
  pixels = np.hypot(y - centre[0], x - centre[1]) * 255 / (SIDE * 1.5)
  pixels[rng.integers(0, SIDE, NOISY_PIXELS), rng.integers(0, SIDE, NOISY_PIXELS)] = rng.integers(0, 256, NOISY_PIXELS)
  buffer = io.BytesIO()
  Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).convert('RGB').save(buffer, 'JPEG', quality=90)
  return buffer.getvalue()


def write_frames(root: Path, images: int, cameras: int) -> Dict[str, int]:
  """``images`` frames, camera by camera in turn, each camera's in a class folder of its own
  (camera_<n>/frame-<index>.jpg). Returns {class: frames}."""
  counts: Dict[str, int] = {}
  for index in range(images):
    camera = index % cameras
    label = f'camera_{camera}'
    (root / label).mkdir(parents=True, exist_ok=True)
    (root / label / f'frame-{index:07d}.jpg').write_bytes(frame(camera, index))
    counts[label] = counts.get(label, 0) + 1
  return counts
