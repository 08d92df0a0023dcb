"""convert()'s keyword arguments as the command's options: this tool's as the command line's flags,
so that they are checked as the command checks them, and Beam's as Python values, as
PipelineOptions takes them from Python (a Beam flag's text form depends on how Beam parses it:
--dry_run=True, but --save_main_session alone)."""
from typing import Any, Dict, List, Mapping, Tuple

from beam_pipeline.core import option_table
from beam_pipeline.core.user_errors import UsageError

# Options of the command line that a function call has no use for, and what to do instead.
NOT_FOR_CALLS = {
    'json': 'json= prints the command\'s summary as JSON; convert() returns it (ConversionSummary.as_dict())',
    'help': 'help= prints the command\'s help; see help(beam_pipeline.convert) or python -m beam_pipeline --help',
}


def split(options: Mapping[str, Any]) -> Tuple[List[str], Dict[str, Any]]:
  """(this tool's options as flags, Beam's options) of keyword arguments. None leaves an option at
  its default; a switch takes True or False (or its text, 'true'); other values are given as text,
  as on the command line (numbers as they print). UsageError for an option a call cannot give."""
  flags: List[str] = []
  beam: Dict[str, Any] = {}
  for name, value in options.items():
    if name in NOT_FOR_CALLS:
      raise UsageError(NOT_FOR_CALLS[name])
    if value is None:
      continue
    option = option_table.BY_NAME.get(name)
    if option is None:
      beam[name] = value
    elif isinstance(option.kind, option_table.Switch) and isinstance(value, bool):
      flags.append(f'{option.flag}={str(value).lower()}')
    else:
      flags.append(f'{option.flag}={value}')
  return flags, beam
