import re

import pytest
from apache_beam.io.filesystems import FileSystems

from beam_pipeline.core.inputs import labels
from beam_pipeline.core.settings import LabelSource
from beam_pipeline.core.rejections import Rejected
from beam_pipeline.core.user_errors import UsageError


def test_label_modes():
  assert labels.label_for('/data/PetImages/Cat/1.jpg', None, LabelSource('parent_dir')) == 'Cat'
  assert labels.label_for('gs://b/imgs/Dog/2.jpg', None, LabelSource('parent_dir')) == 'Dog'
  assert labels.label_for('gs://b/x/cat.123.jpg', None, LabelSource('regex', r'^([a-z]+)\.')) == 'cat'
  assert labels.label_for('gs://b/x/1.jpg', None, LabelSource('none')) is None
  assert labels.label_for('gs://b/x/1.jpg', 'tabby', LabelSource('manifest')) == 'tabby'
  assert labels.label_for('gs://b/x/1.jpg', None, LabelSource('manifest')) is None


@pytest.mark.parametrize('uri', ['/data/Cat/1.jpg', 'data/Cat/1.jpg', 'data//Cat/1.jpg', 'data/x/../Cat/1.jpg',
                                 'Cat/1.jpg', '1.jpg', '/1.jpg', 'gs://b/Cat/1.jpg', 'gs://b/1.jpg'])
def test_parent_dir_labels_are_what_filesystems_split_says(uri, monkeypatch, tmp_path):
  """The fast path (split at the last '/', cached folder names) agrees with Beam's
  FileSystems.split on every shape of path, relative ones resolved from the cwd."""
  monkeypatch.chdir(tmp_path)
  directory, _ = FileSystems.split(uri)
  expected = FileSystems.split(directory)[1]
  try:
    found = labels.label_for(uri, None, LabelSource('parent_dir'))
  except Rejected as e:
    assert not expected and e.reason == 'no_label'
  else:
    assert found == expected


def test_unmatched_regex_and_line_breaks_are_rejections():
  with pytest.raises(Rejected) as raised:
    labels.label_for('gs://b/x/IMG_1.jpg', None, LabelSource('regex', r'^([a-z]+)\.'))
  assert raised.value.reason == 'no_label'
  with pytest.raises(Rejected):
    labels.label_for('/d/bad\nname/1.jpg', None, LabelSource('parent_dir'))


@pytest.mark.parametrize('value, from_manifest, expected', [
    (None, False, LabelSource('parent_dir')),
    (None, True, LabelSource('manifest')),
    ('none', True, LabelSource('none')),
    ('regex:^(.+?)_', False, LabelSource('regex', '^(.+?)_')),
])
def test_parse_label_source(value, from_manifest, expected):
  assert labels.parse_label_source(value, from_manifest) == expected


@pytest.mark.parametrize('value, message', [
    ('regex:(a)(b)', 'exactly one capture group'),
    ('regex:(', 'not a valid regular expression'),
    ('manifest', 'needs a CSV or JSONL manifest'),
    ('folder', 'is not one of'),
])
def test_bad_label_options(value, message):
  with pytest.raises(UsageError) as raised:
    labels.parse_label_source(value, from_manifest=False)
  assert message in str(raised.value)


def test_class_order_is_numeric_for_integer_labels():
  assert labels.sorted_labels(['dog', 'cat', 'dog']) == ['cat', 'dog']
  assert labels.sorted_labels(['10', '2', '1']) == ['1', '2', '10']
  assert labels.labels_txt(['cat', 'dog']) == 'cat\ndog\n'


@pytest.mark.parametrize('uri, source', [('/d/ dog /1.jpg', LabelSource('parent_dir')),
                                         ('/d/x/ dog.1.jpg', LabelSource('regex', r'^(.*)\.1')),
                                         ('/d/x/1.jpg', LabelSource('manifest'))])
def test_labels_of_every_source_are_stripped(uri, source):
  """TensorFlow Datasets strips class names: ' dog' and 'dog' are one class here too."""
  assert labels.label_for(uri, ' dog ' if source.kind == 'manifest' else None, source) == 'dog'


@pytest.mark.parametrize('uri, manifest_label, source, why', [
    ('/d/x/1.jpg', '', LabelSource('manifest'), 'its manifest row gives an empty label'),
    ('/d/x/1.jpg', 'li\nne', LabelSource('manifest'), 'holds a line break'),
    ('/d/x/1.jpg', 'a\tb', LabelSource('manifest'), 'control character U+0009'),
    ('/d/a\x1eb/1.jpg', None, LabelSource('parent_dir'), 'holds a line break'),
    ('/d/ /1.jpg', None, LabelSource('parent_dir'), 'is blank'),
    ('/d/x/a\x07b.1.jpg', None, LabelSource('regex', r'^(.*)\.1'), 'control character U+0007'),
])
def test_a_label_that_names_no_class_is_no_label(uri, manifest_label, source, why):
  with pytest.raises(Rejected, match=re.escape(why)) as raised:
    labels.label_for(uri, manifest_label, source)
  assert raised.value.reason == 'no_label'


def test_an_empty_manifest_label_is_nothing_without_label_source_manifest():
  assert labels.label_for('/d/cat/1.jpg', '', LabelSource('parent_dir')) == 'cat'
  assert labels.label_for('/d/cat/1.jpg', '', LabelSource('none')) is None
