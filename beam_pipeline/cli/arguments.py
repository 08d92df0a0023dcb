"""The command line: its subcommands and every option, in one argparse parser, free of Beam
and TensorFlow so that parsing it costs neither import.

``python -m beam_pipeline [convert] OPTIONS`` converts; ``inspect OUTPUT`` and
``verify OUTPUT`` look at a finished output. A conversion's own options are Beam
pipeline options too (options.ConversionOptions adds them to Beam's parser
with add_conversion_options); the flags this parser does not know are Beam's, and
go to PipelineOptions.
"""
import argparse
from typing import Any, List, NoReturn, Tuple

from beam_pipeline.core import option_table
from beam_pipeline.core.user_errors import UsageError

SUBCOMMANDS = ('convert', 'inspect', 'verify')
# Beam's own flags that --help lists under Cloud; every other Beam flag works as well.
BEAM_FLAGS = {'runner': ('DirectRunner', 'DataflowRunner'), 'project': ('my-project',), 'region': ('us-central1',),
              'temp_location': ('gs://my-bucket/tmp',), 'setup_file': ('./setup.py',),
              'sdk_container_image': ('us-central1-docker.pkg.dev/my-project/tfrecords/images-to-tfrecords:0.1.0',)}
# Options of the command itself, not of the pipeline: they never reach Beam.
CONSOLE_OPTIONS = tuple(option.name for option in option_table.OPTIONS if option.group == option_table.CONSOLE)


def _boolean(value: str) -> bool:
  """A switch's value, as a Flex Template launcher passes it (--dedupe=true) or a user writes it."""
  try:
    return option_table.Switch().parse('', value)
  except UsageError:
    raise argparse.ArgumentTypeError(f'{value!r} is not true or false') from None


def _positive_whole_number(value: str) -> int:
  """A count that must be at least 1 (inspect's --samples): 0 draws an empty sheet, a negative
  number fails deep inside Pillow."""
  try:
    number = int(value)
  except ValueError:
    raise argparse.ArgumentTypeError(f'{value!r} is not a whole number') from None
  if number < 1:
    raise argparse.ArgumentTypeError(f'{value!r} must be a positive whole number')
  return number


def add_conversion_options(parser: argparse.ArgumentParser, console: bool = False) -> Any:
  """A conversion's own options (core/option_table.py), in groups: on the command line's parser and
  on Beam's; the console's too if ``console``. Every value is kept as text, to be checked with its
  option (options.validate), but a switch's, which argparse reads as given or not. Returns the
  group 'cloud', where the command line lists Beam's own flags."""
  groups = {name: parser.add_argument_group(name, description) for name, description in option_table.GROUPS.items()
            if console or name != option_table.CONSOLE}
  for option in option_table.OPTIONS:
    if option.group not in groups:
      continue
    if isinstance(option.kind, option_table.Switch):  # --dedupe, --dedupe=true or --dedupe=false
      groups[option.group].add_argument(option.flag, nargs='?', const=True, default=False, type=_boolean,
                                        metavar='true|false', help=option.help_text)
    else:
      groups[option.group].add_argument(option.flag, default=option.default, help=option.help_text)
  return groups['cloud']


def _add_beam_flags(group) -> None:
  """Beam's own flags, listed in --help; given, they go to PipelineOptions as they are."""
  for name, examples in BEAM_FLAGS.items():
    group.add_argument(f'--{name}', default=argparse.SUPPRESS,
                       help=f'E.g. --{name}={examples[0]}' + (f' or {examples[1]}' if len(examples) > 1 else ''))


class _Parser(argparse.ArgumentParser):
  """Reports a malformed command line as a UsageError (one line) instead of usage text and an exit."""

  def error(self, message: str) -> NoReturn:
    raise UsageError(message)


def parser() -> argparse.ArgumentParser:
  root = _Parser(prog='python -m beam_pipeline', allow_abbrev=False,
                 description='Turn an image collection into validated, sharded TFRecords.')
  commands = root.add_subparsers(dest='command', required=True, parser_class=_Parser)
  convert = commands.add_parser(
      'convert', prog='python -m beam_pipeline', allow_abbrev=False,
      description='Convert images to validated, sharded TFRecords (the word convert may be left out).',
      epilog='Other commands: python -m beam_pipeline inspect OUTPUT (--help for its options), '
      'python -m beam_pipeline verify OUTPUT.')
  _add_beam_flags(add_conversion_options(convert, console=True))

  inspect = commands.add_parser('inspect', prog='python -m beam_pipeline inspect', allow_abbrev=False,
                                description='The dataset a completed conversion wrote, at a glance.')
  inspect.add_argument('output', metavar='OUTPUT', help='A completed output directory (local or gs://).')
  inspect.add_argument('--errors', action='store_true', help='List the rejected files, grouped by reason.')
  inspect.add_argument('--contact_sheet', metavar='PATH.png', help='Draw sample images of every class, with '
                       'label and split, into this PNG.')
  inspect.add_argument('--plots', metavar='PATH.png', help='Plot the class balance per split and the '
                       'image sizes into this PNG.')
  inspect.add_argument('--quality_sheet', metavar='PATH.png', help='Draw example images of every data-quality '
                       'flag the run counted, a row each, with file name, class and split, into this PNG. They are '
                       'found by measuring the stored images again, in shard order, in the first 20,000 records.')
  inspect.add_argument('--samples', type=_positive_whole_number, default=8,
                       help='Images per class on the contact sheet, and per flag on the quality sheet. '
                       'Default: %(default)s')
  inspect.add_argument('--near_duplicates', metavar='PATH.png', help='Draw the groups of near copies '
                       'beam_pipeline.json lists, those whose labels conflict first, side by side, a row each, with '
                       'each file\'s name, class and split (kept or removed under --near_copies=drop), 20 groups a '
                       'page: this PNG, then PATH-2.png and on. The files are read where the conversion found them.')
  inspect.add_argument('--duplicates', action='store_true', help='List the groups of exact and of near copies '
                       '(the first 1,000 of each, as beam_pipeline.json holds them), with their files.')

  verify = commands.add_parser('verify', prog='python -m beam_pipeline verify', allow_abbrev=False,
                               description='Check every record of a completed output: framing, parsing, '
                               'decoding to its recorded size, and its hash.')
  verify.add_argument('output', metavar='OUTPUT', help='A completed output directory (local or gs://).')
  verify.add_argument('--all', action='store_true', dest='everything',
                      help='Read every shard of an --incremental output: by default only those its last update '
                      'wrote are read, the others checked for their presence and size.')
  return root


def command_of(argv: List[str]) -> str:
  """The subcommand argv asks for: its first word, or convert."""
  return argv[0] if argv[:1] and argv[0] in SUBCOMMANDS else 'convert'


def parse(argv: List[str]) -> Tuple[argparse.Namespace, List[str]]:
  """The command and its options, and the flags left over: Beam's, for a conversion.

  Raises UsageError with one line for anything malformed, and SystemExit(0) after
  printing the help for -h/--help.
  """
  if command_of(argv) == 'convert' and argv[:1] != ['convert']:
    argv = ['convert', *argv]
  namespace, rest = parser().parse_known_args(argv)
  if namespace.command != 'convert' and rest:
    raise UsageError(f'unrecognized arguments: {" ".join(rest)}')
  strays = stray_arguments(rest)
  if strays:
    more = f' (and {len(strays) - 1:,} more)' if len(strays) > 1 else ''
    raise UsageError(f'unexpected argument {strays[0]}{more}: quote a glob so the shell leaves it to --input, '
                     "e.g. --input='photos/*/*.jpg'")
  return namespace, rest


def stray_arguments(rest: List[str]) -> List[str]:
  """The words of ``rest`` (what this parser left to Beam) that no flag takes as its value: the
  files a shell expanded an unquoted --input glob into, which Beam would discard with a warning
  (the run converting the first file alone). A word after a flag without '=' is that flag's value,
  as Beam reads it."""
  strays = []
  for index, word in enumerate(rest):
    if word == '--':
      break
    previous = rest[index - 1] if index else ''
    if not word.startswith('-') and not (previous.startswith('-') and '=' not in previous):
      strays.append(word)
  return strays
