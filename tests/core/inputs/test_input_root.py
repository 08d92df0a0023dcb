"""--input_root: a uri is compared where it really leads, '..' and links resolved."""
import os

import pytest

from beam_pipeline.core.inputs import input_root
from beam_pipeline.core.rejections import Rejected


@pytest.fixture
def tree(tmp_path):
  (tmp_path / 'root' / 'cat').mkdir(parents=True)
  (tmp_path / 'root' / 'cat' / '1.jpg').write_bytes(b'x')
  (tmp_path / 'secret.txt').write_text('root:x:0:0')
  (tmp_path / 'root' / 'out-link.jpg').symlink_to(tmp_path / 'secret.txt')
  (tmp_path / 'root' / 'in-link.jpg').symlink_to(tmp_path / 'root' / 'cat' / '1.jpg')
  (tmp_path / 'root-sibling').mkdir()
  (tmp_path / 'link-to-root').symlink_to(tmp_path / 'root')
  return tmp_path


@pytest.mark.parametrize('path, inside', [
    ('root/cat/1.jpg', True), ('root/in-link.jpg', True), ('root/cat/../cat/1.jpg', True),
    ('root/cat/../../secret.txt', False), ('secret.txt', False), ('root/out-link.jpg', False),
    ('root-sibling/x.jpg', False),  # a name that starts like the root is not in it
    ('link-to-root/cat/1.jpg', True),  # a link to the root leads into it
])
def test_local_paths_are_compared_where_they_lead(tree, path, inside):
  assert input_root.contains(str(tree / 'root'), str(tree / path)) is inside
  assert input_root.contains(str(tree / 'link-to-root'), str(tree / path)) is inside


@pytest.mark.parametrize('uri, inside', [
    ('gs://b/images/cat/1.jpg', True), ('gs://b/images/', True), ('gs://b/imagesx/1.jpg', False),
    ('gs://c/images/1.jpg', False), ('gs://b/images/../secret', False), ('gs://b/images/./1.jpg', False),
    ('/b/images/1.jpg', False),
])
def test_remote_uris_are_compared_as_named_and_dot_segments_refused(uri, inside):
  assert input_root.contains('gs://b/images', uri) is inside
  assert input_root.contains('gs://b/images/', uri) is inside


def test_check_rejects_with_where_the_uri_leads(tree):
  input_root.check(str(tree / 'secret.txt'), None)  # no root: anything goes
  input_root.check(str(tree / 'root' / 'cat' / '1.jpg'), str(tree / 'root'))
  with pytest.raises(Rejected) as raised:
    input_root.check(str(tree / 'root' / 'out-link.jpg'), str(tree / 'root'))
  assert raised.value.reason == 'outside_input_root'
  assert raised.value.detail == f'not in --input_root={tree}/root (it leads to {os.path.realpath(tree / "secret.txt")})'
