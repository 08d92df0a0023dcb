"""Every option is written once, in core/option_table.py: the parser, the checks, the run record's
options, the Flex Template's metadata.json and the README's table are made from it."""
import argparse
import json
import re

import pytest

from beam_pipeline.cli import arguments, option_docs, options
from beam_pipeline.core import option_table, settings
from beam_pipeline.core.user_errors import UsageError
from helpers.commands import ROOT


def test_the_checked_in_metadata_json_is_the_one_the_table_makes():
  """Run `make options` after changing an option."""
  assert (ROOT / option_docs.METADATA_FILE).read_text(encoding='utf-8') == option_docs.metadata_text()


def test_the_readmes_option_table_is_the_one_the_table_makes():
  """Run `make options` after changing an option."""
  readme = (ROOT / option_docs.README_FILE).read_text(encoding='utf-8')
  assert option_docs.readme_with_table(readme) == readme
  for option in option_table.pipeline_options():
    assert f'| `{option.flag}` |' in readme


def test_help_and_the_template_say_the_same_of_each_option():
  parser = argparse.ArgumentParser()
  arguments.add_conversion_options(parser, console=True)
  helps = {action.dest: action.help for action in parser._actions}  # pylint: disable=protected-access
  parameters = {parameter['name']: parameter for parameter in option_docs.metadata()['parameters']}
  for option in option_table.OPTIONS:
    assert helps[option.name] == option.help_text
    if option.template:
      assert parameters[option.name]['helpText'] == option.help_text
  assert '%' not in ''.join(option.help_text for option in option_table.OPTIONS)  # argparse formats help with %


def test_every_default_passes_its_own_checks_and_its_template_regex():
  for option in option_table.OPTIONS:
    if option.default is None:
      continue
    option.parse(option.default)
    if option.template:
      assert re.fullmatch(option.parameter_regex, option.default), option.name


def test_defaults_are_read_from_the_table_where_the_settings_use_them():
  assert (settings.IMAGE_SIZE, settings.JPEG_QUALITY, settings.MIN_SIDE) == (224, 95, 1)
  assert set(option_table.BY_NAME['compression'].kind.values) == set(settings.COMPRESSIONS)


def test_the_run_record_holds_every_recorded_option_by_its_flags_name(tmp_path):
  (tmp_path / 'in' / 'cat').mkdir(parents=True)
  (tmp_path / 'in' / 'cat' / '1.jpg').write_bytes(b'x')
  conversion = options.parse([f'--input={tmp_path}/in', f'--output={tmp_path}/out', '--max_side=512',
                              '--target_shard_mb=0.5'])
  recorded = conversion.settings.as_dict()
  always = {option.name for option in option_table.OPTIONS if option.recorded_as and option.recorded_if is None}
  assert always <= set(recorded) and set(recorded) - always == {'input_kind'}
  assert (recorded['max_side'], recorded['target_shard_mb'], recorded['max_pixels']) == (512, 0.5, 10**8)


@pytest.mark.parametrize('name, value, message', [
    ('jpeg_quality', '101', '--jpeg_quality=101 must be at most 100'),
    ('jpeg_quality', '9.5', '--jpeg_quality=9.5 must be a whole number'),
    ('max_error_fraction', '1.5', '--max_error_fraction=1.5 must be between 0 and 1'),
    ('target_shard_mb', '-1', '--target_shard_mb=-1 must be a positive number'),
    ('max_pixels', '9223372036854775808', '--max_pixels=9223372036854775808 is too large: at most 9223372036854775807'),
    ('compression', 'zstd', '--compression=zstd is not one of none, gzip'),
    ('dedupe', 'maybe', '--dedupe=maybe is not true or false'),
])
def test_a_value_is_checked_by_its_kind_in_one_line(name, value, message):
  with pytest.raises(UsageError) as refused:
    option_table.BY_NAME[name].parse(value)
  assert str(refused.value) == message


def test_the_metadata_parameters_are_the_template_options_required_first():
  names = [parameter['name'] for parameter in json.loads(option_docs.metadata_text())['parameters']]
  assert names[:2] == ['input', 'output']
  assert set(names) == {option.name for option in option_table.OPTIONS if option.template}
