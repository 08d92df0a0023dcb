"""A pandas DataFrame as convert()'s input: written as a JSONL manifest, named by its content."""
import json

import pytest

from beam_pipeline.core.inputs import dataframe_manifest, manifest_rows
from beam_pipeline.core.user_errors import UsageError

pandas = pytest.importorskip('pandas')  # Beam installs it; this package does not need it


def test_a_frame_is_a_jsonl_manifest_with_its_relative_paths_made_absolute(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  frame = pandas.DataFrame({'uri': ['cat/1.jpg', '/photos/2.jpg', 'gs://bucket/3.jpg'], 'label': ['cat', 'dog', None],
                            'split': ['train', 'validation', 'train'], 'weight': [1, 2, 3]}, index=[7, 8, 9])
  rows = [json.loads(line) for line in dataframe_manifest.jsonl(frame).splitlines()]
  assert rows == [{'uri': f'{tmp_path}/cat/1.jpg', 'label': 'cat', 'split': 'train', 'weight': 1},
                  {'uri': '/photos/2.jpg', 'label': 'dog', 'split': 'validation', 'weight': 2},
                  {'uri': 'gs://bucket/3.jpg', 'label': None, 'split': 'train', 'weight': 3}]
  assert list(frame['uri']) == ['cat/1.jpg', '/photos/2.jpg', 'gs://bucket/3.jpg']  # the caller's frame, untouched


def test_the_file_is_named_by_its_content():
  one, other = dataframe_manifest.jsonl(pandas.DataFrame({'uri': ['/a.jpg']})), \
      dataframe_manifest.jsonl(pandas.DataFrame({'uri': ['/b.jpg']}))
  assert dataframe_manifest.file_name(one) == dataframe_manifest.file_name(one)
  assert dataframe_manifest.file_name(one) != dataframe_manifest.file_name(other)
  assert dataframe_manifest.file_name(one).endswith('.jsonl')


def test_whole_number_labels_beside_a_missing_one_stay_whole_and_bytes_paths_are_paths(tmp_path):
  """pandas makes a column of 0, 1 and None floats: 0.0, 1.0 and NaN. Read back, they are the
  classes 0 and 1 and one missing label, not three rejected rows; a path given as bytes is a path."""
  frame = pandas.DataFrame({'uri': [b'/a.jpg', '/b.jpg', '/c.jpg'], 'label': [0, 1, None]})
  assert str(frame['label'].dtype) == 'float64'
  items = [manifest_rows.jsonl_line_item(str(tmp_path / 'm.jsonl'), line)
           for line in dataframe_manifest.jsonl(frame).splitlines()]
  assert [(item.uri, item.label) for item in items] == [('/a.jpg', '0'), ('/b.jpg', '1'), ('/c.jpg', '')]


@pytest.mark.parametrize('frame, says', [
    ({'path': ['/a.jpg'], 'label': ['cat']}, 'needs a uri column .*; it has path, label'),
    ({'uri': [], 'label': []}, 'has no rows'),
    ({'uri': ['/a.jpg', '/b.jpg'], 'thumbnail': [None, b'\xff\xd8']},
     "column thumbnail holds bytes \\(row 1\\), which a manifest field cannot: decode them to text, or leave the "
     'column out'),
])
def test_a_frame_that_names_no_image_is_refused(frame, says):
  with pytest.raises(UsageError, match=says):
    dataframe_manifest.jsonl(pandas.DataFrame(frame))
