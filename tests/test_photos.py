"""The tests' synthetic photos (helpers/photos.py) depend only on their own parameters, so a
statistical check over them gives the same answer whichever tests ran before in the process."""
from PIL import Image

from helpers import photos


def files(root):
  return {path.relative_to(root): path.read_bytes() for path in sorted(root.rglob('*')) if path.is_file()}


def test_a_photos_bytes_depend_only_on_its_parameters(tmp_path):
  first = (photos.jpeg(3, 64, 48), photos.jpegs(5, seed=2), photos.labelled(('cat', 'dog'), 2, seed=1))
  photos.write_sample_set(str(tmp_path / 'one'), per_class=2)
  Image.effect_noise((64, 48), 30)  # Pillow's own generator moves on; ours must not follow it
  photos.jpegs(7, seed=9)
  again = (photos.jpeg(3, 64, 48), photos.jpegs(5, seed=2), photos.labelled(('cat', 'dog'), 2, seed=1))
  photos.write_sample_set(str(tmp_path / 'two'), per_class=2)
  assert first == again
  assert files(tmp_path / 'one') == files(tmp_path / 'two') != {}
  assert len(set(first[1])) == 5 and photos.jpeg(3, 64, 48) != photos.jpeg(4, 64, 48)
