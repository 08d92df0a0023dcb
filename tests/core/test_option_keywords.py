"""convert()'s keywords: this tool's options as the command line's flags, Beam's as values."""
import re

import pytest

from beam_pipeline.core import option_keywords
from beam_pipeline.core.user_errors import UsageError


def test_our_options_become_flags_and_beams_stay_python_values():
  flags, beam = option_keywords.split({
      'splits': 'train=0.8,validation=0.2', 'dedupe': True, 'index_files': False, 'target_shard_mb': 0.5,
      'max_side': None, 'max_error_fraction': '0.2', 'runner': 'DataflowRunner', 'dry_run': True,
      'experiments': ['use_runner_v2']})
  assert flags == ['--splits=train=0.8,validation=0.2', '--dedupe=true', '--index_files=false',
                   '--target_shard_mb=0.5', '--max_error_fraction=0.2']
  assert beam == {'runner': 'DataflowRunner', 'dry_run': True, 'experiments': ['use_runner_v2']}


def test_a_switch_given_as_text_is_checked_as_the_command_checks_it():
  assert option_keywords.split({'dedupe': 'yes'})[0] == ['--dedupe=yes']  # the parser says what is wrong


@pytest.mark.parametrize('name, says', [('json', 'returns it'), ('help', re.escape('help(beam_pipeline.convert)'))])
def test_what_only_the_command_line_has_is_refused(name, says):
  with pytest.raises(UsageError, match=f'{name}=.*{says}'):
    option_keywords.split({name: True})
