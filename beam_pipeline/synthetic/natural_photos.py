"""Distinct, varied synthetic photos, for measuring how near copies are told from other photos.

sample_set.synthetic_photo lays its shapes over one vertical gradient that every photo
shares, so to a perceptual hash, which sees only an image's coarse layout, all its photos
look alike. Here each seed has a layout of its own, as real photos do: colour fields of
1/f ("pink") noise, whose power falls with frequency as that of natural scenes does, light
falling from one side, a few objects with soft edges, and sensor-like grain so that JPEG
sizes resemble photos'. The pixels depend only on (seed, width, height).
"""
import numpy as np
from PIL import Image, ImageDraw, ImageFilter

# The colour fields are drawn this many pixels on their longer side, then enlarged: their
# fine detail would only be lost under the grain, and a large FFT per photo costs seconds.
_FIELD_SIDE = 160


def pink_field(rng: np.random.Generator, height: int, width: int, exponent: float) -> np.ndarray:
  """Noise whose amplitude falls as 1/f**exponent, scaled to mean 0 and standard deviation 1.

  Args:
    rng: the random numbers it is drawn from.
    height: its rows.
    width: its columns.
    exponent: how fast its amplitude falls with frequency (1: pink noise, as natural scenes' does).
  """
  frequency = np.hypot(np.fft.fftfreq(height)[:, None], np.fft.rfftfreq(width)[None, :])
  frequency[0, 0] = 1.0
  spectrum = (rng.standard_normal(frequency.shape) + 1j * rng.standard_normal(frequency.shape)) / frequency**exponent
  spectrum[0, 0] = 0.0
  field = np.fft.irfft2(spectrum, s=(height, width))
  return (field - field.mean()) / field.std()


def photo(seed: int, width: int, height: int) -> Image.Image:
  """An RGB photo of its own: a scene of pink-noise colour, lit from one side, with objects on it."""
  rng = np.random.default_rng([0x9E37, seed])
  scale = _FIELD_SIDE / max(width, height)
  field_height, field_width = max(2, round(height * scale)), max(2, round(width * scale))
  fields = np.stack([pink_field(rng, field_height, field_width, rng.uniform(0.9, 1.6)) for _ in range(3)], axis=-1)
  # Mostly light and shade (the first field, equal in every channel), with less colour on top.
  pixels = (rng.uniform(60, 190, 3) + fields[..., :1] * rng.uniform(25, 60) +
            fields @ (rng.normal(0, 1, (3, 3)) * rng.uniform(5, 25)))
  angle = rng.uniform(0, 2 * np.pi)
  y, x = np.mgrid[0:field_height, 0:field_width]
  light = (x / field_width - 0.5) * np.cos(angle) + (y / field_height - 0.5) * np.sin(angle)
  pixels *= (1 + rng.uniform(0.2, 0.8) * light)[..., None]
  image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).resize((width, height), Image.BICUBIC)
  objects = image.copy()  # so that an object's blurred edge blends into what lies around it
  mask = Image.new('L', (width, height))
  draw, mask_draw = ImageDraw.Draw(objects), ImageDraw.Draw(mask)
  for _ in range(rng.integers(2, 9)):
    centre_x, centre_y = rng.uniform(0, width), rng.uniform(0, height)
    half_width, half_height = rng.uniform(0.04, 0.3) * width, rng.uniform(0.04, 0.3) * height
    box = (centre_x - half_width, centre_y - half_height, centre_x + half_width, centre_y + half_height)
    colour = tuple(int(c) for c in rng.integers(0, 256, 3))
    kind = rng.integers(3)
    if kind == 2:
      corners = [(centre_x + half_width * np.cos(a), centre_y + half_height * np.sin(a))
                 for a in np.sort(rng.uniform(0, 2 * np.pi, rng.integers(3, 7)))]
      draw.polygon(corners, fill=colour)
      mask_draw.polygon(corners, fill=255)
    else:
      (draw.ellipse if kind == 0 else draw.rectangle)(box, fill=colour)
      (mask_draw.ellipse if kind == 0 else mask_draw.rectangle)(box, fill=255)
  softness = max(1.0, min(width, height) / 300)
  image.paste(objects.filter(ImageFilter.GaussianBlur(softness)), mask=mask.filter(ImageFilter.GaussianBlur(softness)))
  grain = rng.uniform(1.5, 4.0)
  noisy = np.asarray(image, np.float32) + rng.standard_normal((height, width, 1), np.float32) * grain
  return Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))


def size(seed: int, longer: tuple = (400, 1280)) -> tuple:
  """A photo's (width, height): its longer side within ``longer``, at a camera's or a phone's
  aspect ratio, upright or not; from the seed alone."""
  rng = np.random.default_rng([0x51DE, seed])
  side = int(rng.integers(longer[0], longer[1] + 1))
  shorter = round(side / rng.choice([4 / 3, 3 / 2, 16 / 9, 1.0]))
  return (side, shorter) if rng.random() < 0.7 else (shorter, side)
