"""Issue 35, second pass: checks that keep anything from being lost or leaked unsaid.

Each test runs the real command (in this process, as helpers.commands.convert does) and
looks at its exit code, its one error line and what it wrote.
"""
import pytest

from helpers import photos
from helpers.commands import convert, error_line


@pytest.fixture(scope='module')
def one_photo(tmp_path_factory):
  """A folder of one photo: enough input for a command that must stop before any work."""
  root = tmp_path_factory.mktemp('one-photo')
  photos.write_files(root / 'in', {'cat/1.jpg': photos.jpeg(1)})
  return root / 'in'


# Case 11: a numeric option out of its range stops the command at parse time (exit 2, one line),
# never a run that prints a progress line per microsecond or rejects every image.
@pytest.mark.parametrize('flag, message', [
    ('--progress_interval=0', '--progress_interval=0 must be a positive number'),
    ('--progress_interval=-5', '--progress_interval=-5 must be a positive number'),
    ('--progress_interval=inf', '--progress_interval=inf must be a positive number'),
    ('--progress_interval=often', '--progress_interval=often is not a number'),
    ('--read_threads=0', '--read_threads=0 must be a positive number'),
    ('--read_threads=0.5', '--read_threads=0.5 must be a whole number'),
    ('--embedding_batch_size=0', '--embedding_batch_size=0 must be a positive number'),
    ('--jpeg_quality=0', '--jpeg_quality=0 must be a positive number'),
    ('--jpeg_quality=101', '--jpeg_quality=101 must be at most 100'),
    ('--min_side=0', '--min_side=0 must be a positive number'),
    ('--image_size=0', '--image_size=0 must be a positive number'),
    ('--target_shard_mb=0', '--target_shard_mb=0 must be a positive number'),
    ('--target_shard_mb=-1', '--target_shard_mb=-1 must be a positive number'),
    ('--max_file_mb=0', '--max_file_mb=0 must be a positive number'),
    ('--max_error_fraction=-0.1', '--max_error_fraction=-0.1 must be between 0 and 1'),
    ('--max_error_fraction=1.5', '--max_error_fraction=1.5 must be between 0 and 1'),
    ('--max_pixels=0.5', '--max_pixels=0.5 must be a whole number'),
    ('--max_pixels=1e19', '--max_pixels=1e19 is too large'),
])
def test_a_numeric_option_out_of_range_stops_before_any_work(one_photo, tmp_path, capsys, flag, message):
  assert convert(f'--input={one_photo}', f'--output={tmp_path}/out', flag) == 2
  assert message in error_line(capsys.readouterr().err)
  assert not (tmp_path / 'out').exists()
