"""The boxes of measurement h: a COCO instances file for a cached photo set, one to three
boxes per file in pixels of its own size, written once beside the set.

Every file gets boxes, the broken ones too (they are rejected as images, not as
annotations), so the converter accounts for the same files as without boxes.

Usage: python -m benchmarks.box_annotations N   (prints the file's path)
"""
import json
import random
from pathlib import Path

from PIL import Image

from benchmarks import baselines

CLASSES = ('cat', 'dog', 'person')


def ensure(images: Path) -> Path:
  """instances.json beside the ``images`` folder, made now unless it is there."""
  path = images.parent / 'instances.json'
  if path.exists():
    return path
  rng = random.Random(0)
  entries, annotations = [], []
  for number, name in enumerate(sorted(baselines.list_files(str(images))), start=1):
    try:
      with Image.open(name) as image:
        width, height = image.size
    except Exception:  # pylint: disable=broad-except  # a broken file: boxes on an assumed size
      width, height = 640, 480
    entries.append({'id': number, 'file_name': str(Path(name).relative_to(images)), 'width': width, 'height': height})
    for _ in range(rng.randint(1, 3)):
      w, h = rng.uniform(0.1, 0.5) * width, rng.uniform(0.1, 0.5) * height
      x, y = rng.uniform(0, width - w), rng.uniform(0, height - h)
      annotations.append({'id': len(annotations) + 1, 'image_id': number, 'category_id': rng.randint(1, len(CLASSES)),
                          'bbox': [x, y, w, h], 'area': w * h, 'iscrowd': 0})
  categories = [{'id': number, 'name': name} for number, name in enumerate(CLASSES, start=1)]
  partial = path.with_suffix('.partial')
  partial.write_text(json.dumps({'images': entries, 'annotations': annotations, 'categories': categories}))
  partial.rename(path)
  return path


if __name__ == '__main__':
  import sys
  from benchmarks import photo_set
  print(ensure(photo_set.ensure(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)[0]))
