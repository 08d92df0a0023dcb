"""A new user's first hour, second pass (issue 38): what the shell, a copied folder, a rerun or a
pipe does to the command, and what TensorFlow Datasets and Keras expect of its output."""
import os

from beam_pipeline import cli
from helpers import photos


def test_an_unquoted_glob_fails_in_one_line_that_says_to_quote_it(tmp_path, capsys):
  """The shell expands ``--input photos/*/*.jpg``: Beam would discard all but the first file with
  a warning, and the run convert that one image and exit 0."""
  photos.write_files(tmp_path / 'photos', photos.labelled(['cat', 'dog'], 3))
  expanded = sorted(str(path) for path in (tmp_path / 'photos').glob('*/*.jpg'))
  code = cli.main(['--input', *expanded, '--output', str(tmp_path / 'out'), '--runner=DirectRunner'])
  error = capsys.readouterr().err
  assert code == 2
  assert error.splitlines() == [f'error: unexpected argument {expanded[1]} (and 4 more): quote a glob so the shell '
                                "leaves it to --input, e.g. --input='photos/*/*.jpg'"]
  assert not os.path.exists(tmp_path / 'out')
