"""Mistakes that used to pass silently (issue 60): each now gives a clear answer before any work,
or is read the way the user meant."""
import pytest

from beam_pipeline import cli
from helpers import photos
from helpers.dataset_reader import read_errors, read_output


def test_a_class_folder_named_composed_and_decomposed_in_unicode_is_one_class(tmp_path):
  """A folder copied from macOS names 'café' with e and a combining accent (NFD), one made
  elsewhere with é (NFC): one class, as the summary, labels.txt and the records say."""
  composed, decomposed = 'caf\u00e9', 'cafe\u0301'
  photos.write_files(tmp_path / 'in', {f'{composed}/a{i}.jpg': photos.jpeg(i) for i in range(2)})
  photos.write_files(tmp_path / 'in', {f'{decomposed}/b{i}.jpg': photos.jpeg(10 + i) for i in range(2)})
  assert cli.main([f'--input={tmp_path / "in"}', f'--output={tmp_path / "out"}', '--runner=DirectRunner',
                   '--skip_transform']) == 0
  info, records = read_output(tmp_path / 'out')
  assert info['labels'] == [composed] and info['splits']['train']['classes'] == {composed: 4}
  assert (tmp_path / 'out' / 'labels.txt').read_text(encoding='utf-8') == composed + '\n'
  assert {record['image/class/text'].decode() for record in records['train']} == {composed}


def test_a_mistyped_split_name_stops_the_run_before_it_starts(tmp_path, capsys):
  photos.write_files(tmp_path / 'in', photos.labelled(['cat'], 2))
  code = cli.main([f'--input={tmp_path / "in"}', f'--output={tmp_path / "out"}', '--runner=DirectRunner',
                   '--splits=train=0.8,validaton=0.2'])
  assert code == 2
  assert capsys.readouterr().err.splitlines() == [
      "error: --splits=train=0.8,validaton=0.2: 'validaton' is one letter off validation; did you mean validation? "
      '(to name a split of your own so, put a digit or an underscore in it: validaton_1)']
  assert not (tmp_path / 'out').exists()


@pytest.mark.parametrize('interval', ['1e-9', '0.05', '0.099'])
def test_a_progress_interval_under_a_tenth_of_a_second_is_refused(tmp_path, capsys, interval):
  """1e-9 was taken: 40,499 progress lines for one run."""
  photos.write_files(tmp_path / 'in', photos.labelled(['cat'], 1))
  assert cli.main([f'--input={tmp_path / "in"}', f'--output={tmp_path / "out"}', '--runner=DirectRunner',
                   f'--progress_interval={interval}']) == 2
  assert capsys.readouterr().err.splitlines() == [
      f'error: --progress_interval={interval} is less than 0.1: give 0.1 or more']


def test_an_output_linked_into_the_input_is_not_read_as_input(tmp_path):
  """--output=link, a symlink to a folder inside --input: the listing meets the output there, and
  leaves it out as it does an output given by its own path, run after run."""
  photos.write_files(tmp_path / 'in', photos.labelled(['cat', 'dog'], 2))
  (tmp_path / 'in' / 'converted').mkdir()
  (tmp_path / 'link').symlink_to(tmp_path / 'in' / 'converted')
  for _ in range(2):
    assert cli.main([f'--input={tmp_path / "in"}', f'--output={tmp_path / "link"}', '--runner=DirectRunner',
                     '--skip_transform', '--overwrite']) == 0
    info, _ = read_output(tmp_path / 'link')
    assert (info['num_examples'], info['num_errors'], info.get('num_skipped')) == (4, 0, None)


def test_another_output_of_this_tool_inside_the_input_is_skipped_not_rejected(tmp_path):
  """An earlier conversion kept beside the photos: its shards, graph and reports are skipped as
  files of an output of this tool's, not charged to the error budget as not_image."""
  photos.write_files(tmp_path / 'in', photos.labelled(['cat', 'dog'], 2))
  assert cli.main([f'--input={tmp_path / "in"}', f'--output={tmp_path / "in" / "cat" / "old"}',
                   '--runner=DirectRunner', '--overwrite']) == 0
  kept = [path for path in (tmp_path / 'in' / 'cat' / 'old').rglob('*') if path.is_file()]
  assert cli.main([f'--input={tmp_path / "in"}', f'--output={tmp_path / "out"}', '--runner=DirectRunner',
                   '--skip_transform']) == 0
  info, _ = read_output(tmp_path / 'out')
  errors = read_errors(tmp_path / 'out')
  assert (info['num_examples'], info['num_errors']) == (4, 0)
  assert {error['reason'] for error in errors} == {'skipped'}
  old = [error for error in errors if '/old/' in error['uri']]
  assert len(old) == len(kept)
  assert all(error['detail'].endswith('an output of beam_pipeline (its shards, graph and reports)') for error in old)
