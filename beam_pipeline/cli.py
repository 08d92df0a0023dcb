"""``python -m beam_pipeline``: convert images (the default), or ``inspect OUTPUT``.

This module imports no Beam: a conversion's own module (beam/launch.py) does,
once the command line says there is one.
"""
import argparse
import sys
from typing import List, NoReturn, Optional

from beam_pipeline.core import dataset_info, uris

SUBCOMMANDS = ('inspect',)


def is_conversion(argv: List[str]) -> bool:
  """Whether the command line asks for a conversion rather than one of the SUBCOMMANDS."""
  return argv[:1] not in ([name] for name in SUBCOMMANDS)


def main(argv: Optional[List[str]] = None) -> int:
  argv = sys.argv[1:] if argv is None else list(argv)
  if not is_conversion(argv):
    return inspect(argv[1:])
  from beam_pipeline.beam import launch  # pylint: disable=import-outside-toplevel
  return launch.convert(argv)


class _Parser(argparse.ArgumentParser):

  def error(self, message: str) -> NoReturn:
    print(f'error: {message}; usage: {self.format_usage().strip()[len("usage: "):]}', file=sys.stderr)
    sys.exit(2)


def inspect(argv: List[str]) -> int:
  """``python -m beam_pipeline inspect OUTPUT``: what a completed output holds."""
  parser = _Parser(prog='python -m beam_pipeline inspect', description='Summarize a completed output.')
  parser.add_argument('output', metavar='OUTPUT_DIRECTORY')
  try:
    output = parser.parse_args(argv).output
  except SystemExit as e:
    return e.code
  try:
    info = _read_info(output)
  except FileNotFoundError as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  print('\n'.join(dataset_info.summary(info, output)))
  for split in info['splits'].values():
    for shard in split['shards']:
      print(f'  {shard["file"]}: {shard["num_examples"]} examples, {shard["num_bytes"]} bytes')
  print(f'labels: {", ".join(info["labels"]) or "(unlabeled)"}')
  return 0


def _read_info(output: str) -> dict:
  """dataset_info.json; a remote output's through Beam's FileSystems, imported for it alone."""
  if not uris.is_remote(output):
    return dataset_info.read(output)
  from apache_beam.io.filesystems import FileSystems  # pylint: disable=import-outside-toplevel
  return dataset_info.read(output, FileSystems.exists, FileSystems.open)
