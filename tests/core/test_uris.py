"""uris answers as Beam's FileSystems does, without importing Beam in the workers."""
import pytest
from apache_beam.io.filesystems import FileSystems

from beam_pipeline.core import uris

URIS = ['/data/x.jpg', 'data/x.jpg', 'gs://b/x.jpg', ' gs://b/x.jpg', 'GS://b/x.jpg', 's3://b/x', 'hdfs://h/x',
        'x.y+z://a', '/data/gs://x.jpg', 'c:\\x.jpg', '1s://x', 'file:///x', 'gs:/x', '']


@pytest.mark.parametrize('uri', URIS)
def test_remote_uris_are_the_ones_beam_sees_a_scheme_in(uri):
  assert uris.is_remote(uri) == (FileSystems.get_scheme(uri) is not None)


@pytest.mark.parametrize('path', ['/data/Cat/1.jpg', 'data/Cat/1.jpg', 'data//Cat/', 'Cat/1.jpg', '1.jpg', '/1.jpg',
                                  '/', 'gs://b/Cat/1.jpg', 'gs://b/Cat/', 'gs://b/1.jpg', 'gs://b', ' gs://b/x '])
def test_split_agrees_with_filesystems(path, monkeypatch, tmp_path):
  monkeypatch.chdir(tmp_path)
  assert uris.split(path) == FileSystems.split(path)


@pytest.mark.parametrize('base, name', [('/out', 'beam_pipeline.json'), ('out/', 'x'), ('gs://b/out', 'x.json'),
                                        ('gs://b/out/', 'train-00000-of-00001.tfrecord')])
def test_join_agrees_with_filesystems(base, name):
  assert uris.join(base, name) == FileSystems.join(base, name)
