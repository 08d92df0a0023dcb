"""The conversion's command line: its options, as a Beam PipelineOptions subclass, parsed
once and checked before any work.

argparse reads our options and leaves every other flag to Beam's PipelineOptions,
which gets our values as keyword arguments: each flag is parsed once, and every
standard Beam flag (--runner, --project, --labels, ...) works unchanged. Values
are checked here rather than by argparse ``type=``/``choices=``, so that every
mistake, including an unknown flag that Beam would only warn about, ends the
launch with one line that says what to do.
"""
import argparse
import difflib
import sys
from typing import List, NoReturn, Optional, Tuple

from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions, StandardOptions

from beam_pipeline.beam import inputs
from beam_pipeline.core import labels, schemas, splitting, uris
from beam_pipeline.core.settings import Settings
from beam_pipeline.core.usage import UsageError

COMPRESSIONS = ('none', 'gzip')
DESCRIPTION = ('Convert images to validated, sharded TFRecords. Every standard Beam option '
               '(--runner, --project, --region, --temp_location, --direct_num_workers, ...) also works.')


def _boolean(value: str) -> bool:
  """A switch's value, as a Flex Template launcher passes it (--dedupe=true) or a user writes it."""
  known = {'true': True, 'yes': True, '1': True, 'false': False, 'no': False, '0': False}
  if value.lower() not in known:
    raise argparse.ArgumentTypeError(f'{value!r} is not true or false')
  return known[value.lower()]


# An on/off option: --dedupe, --dedupe=true or --dedupe=false.
_SWITCH = dict(nargs='?', const=True, default=False, type=_boolean, metavar='true|false')


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """The conversion's options, on Beam's parser (ConversionOptions) and on the command line's."""
  parser.add_argument('--input', help='Images to convert: a glob (gs://b/imgs/**/*.jpg), a directory '
                      '(walked recursively) or a manifest (.csv in AutoML layout [set,]uri,label, '
                      'or .jsonl with uri/label/split and extra fields).')
  parser.add_argument('--output', help='Directory for shards, labels.txt, errors-*.jsonl and '
                      'dataset_info.json (written last: its presence means the run completed).')
  parser.add_argument('--label_source', default=None, help='Where labels come from: parent_dir (the '
                      'default for globs and directories: PetImages/Cat/1.jpg -> Cat), none, '
                      'regex:<pattern with one group> on the file name (regex:^([a-z]+)\\. gives '
                      'cat.12.jpg -> cat), or manifest (the default for manifests).')
  parser.add_argument('--schema', default='default', help='Example keys: default (image/encoded, '
                      'image/class/label, ...) or simple (image_raw, label, id).')
  parser.add_argument('--target_shard_mb', default='150', help='Target shard size in MB.')
  parser.add_argument('--compression', default='none', help='none or gzip.')
  parser.add_argument('--max_pixels', default='100000000', help='Reject images with more pixels '
                      '(all frames of a GIF count); guards against decompression bombs.')
  parser.add_argument('--max_file_mb', default='100', help='Reject files larger than this, unread.')
  parser.add_argument('--splits', default=None, help='Split fractions, e.g. train=0.8,validation=0.2: '
                      'stratified per class by content hash; a manifest split column or top-level '
                      'train/validation/test folders take precedence. Default: all train.')
  parser.add_argument('--dedupe', **_SWITCH, help='Keep one copy of identical '
                      'files (the others are rejected as duplicate); without it copies are kept, '
                      'always in one split, and listed in dataset_info.json.')
  parser.add_argument('--image_size', default='224', help='Side of the square images the tf.Transform '
                      'preprocessing graph resizes to.')
  parser.add_argument('--max_error_fraction', default='0.05', help='Fail the job (no dataset_info.json) '
                      'if more of the input than this is rejected: a wrong bucket or a permission '
                      'problem must not quietly produce a near-empty dataset. The errors file is '
                      'still written.')
  parser.add_argument('--read_threads', default='32', help='Concurrent image reads per worker from Cloud '
                      'Storage, which is latency-bound. Local files are read one at a time, which is faster.')
  parser.add_argument('--skip_transform', **_SWITCH, help='Do not write the '
                      'tf.Transform graph (transform_fn/, transformed_metadata/).')
  parser.add_argument('--no_wait', **_SWITCH, help='With DataflowRunner: return once the job is submitted '
                      '(its id and console link printed) instead of waiting for it and reporting what it '
                      'wrote. The Flex Template entry point always returns at once.')


class ConversionOptions(PipelineOptions):
  """This tool's options, beside Beam's own."""

  @classmethod
  def _add_argparse_args(cls, parser):
    add_arguments(parser)


class _Parser(argparse.ArgumentParser):
  """Reports a malformed option as a UsageError (one line) instead of usage text and exit."""

  def error(self, message: str) -> NoReturn:
    raise UsageError(message)


def parser() -> argparse.ArgumentParser:
  result = _Parser(prog='python -m beam_pipeline', description=DESCRIPTION, allow_abbrev=False)
  add_arguments(result)
  return result


def parse(argv: List[str]) -> Tuple[PipelineOptions, Settings]:
  """The command line's options, Beam's included, and the checked values of ours.

  Raises UsageError with one line for anything wrong, and SystemExit(0) after
  printing the help for -h/--help.
  """
  ours, beam_flags = parser().parse_known_args(argv)
  options = PipelineOptions(beam_flags, **vars(ours))
  _check_flags(options)
  settings = validate(options)
  if 'dataflow' in (options.view_as(StandardOptions).runner or '').lower():
    _check_dataflow(options, settings)
  return options, settings


def _check_flags(options: PipelineOptions) -> None:
  """No flag Beam does not know either, and no label mode in Beam's own --labels (job labels)."""
  known = options.get_all_options()
  unknown = sorted(set(options.get_all_options(retain_unknown_options=True)) - set(known))
  if unknown:
    flag = '--' + unknown[0]
    close = difflib.get_close_matches(unknown[0], list(known), n=1)
    hint = f'; did you mean --{close[0]}?' if close else '; see --help'
    raise UsageError(f'unknown option {flag}{hint}')
  for label in options.view_as(GoogleCloudOptions).labels or []:
    if labels.is_label_mode(label):
      raise UsageError(f'--labels={label} sets a Dataflow job label; to take labels from {label}, '
                       f'use --label_source={label}')


def _check_dataflow(options: PipelineOptions, settings: Settings) -> None:
  """What DataflowRunner needs, checked here in one line each: Beam's own check of it
  would first try to create a default staging bucket."""
  cloud = options.view_as(GoogleCloudOptions)
  for flag, value, example in (('--project', cloud.project, 'my-project'), ('--region', cloud.region, 'us-central1')):
    if not value:
      raise UsageError(f'DataflowRunner needs {flag}, for example {flag}={example}')
  for flag, value in (('--temp_location', cloud.temp_location), ('--staging_location', cloud.staging_location)):
    if value and not value.startswith('gs://'):
      raise UsageError(f'{flag}={value}: DataflowRunner stages and keeps temporary files on Cloud Storage; '
                       f'give a gs:// path')
  if not cloud.temp_location and not cloud.staging_location:
    raise UsageError('DataflowRunner needs --temp_location=gs://BUCKET/tmp, for its staging and temporary files')
  for flag, value in (('--input', settings.input.path), ('--output', settings.output)):
    if not uris.is_remote(value):
      print(f'warning: {flag}={value} is a local path, which Dataflow workers cannot read or write; '
            f'use a gs:// path', file=sys.stderr)


def validate(options: PipelineOptions) -> Settings:
  """Checks every value and the input's existence; raises UsageError with one line."""
  opts = options.view_as(ConversionOptions)
  if not opts.output:
    raise UsageError('--output is required: the directory (local or gs://) to write the dataset to')
  if opts.schema not in schemas.SCHEMAS:
    raise UsageError(f'--schema={opts.schema} is not one of {", ".join(schemas.SCHEMAS)}')
  if opts.compression not in COMPRESSIONS:
    raise UsageError(f'--compression={opts.compression} is not one of {", ".join(COMPRESSIONS)}')
  target_mb = _number('--target_shard_mb', opts.target_shard_mb)
  max_pixels = int(_number('--max_pixels', opts.max_pixels))
  max_file_mb = _number('--max_file_mb', opts.max_file_mb)
  image_size = _number('--image_size', opts.image_size)
  if image_size != int(image_size):
    raise UsageError(f'--image_size={opts.image_size} must be a whole number of pixels')
  splits = splitting.parse_splits(opts.splits)
  read_threads = _number('--read_threads', opts.read_threads)
  max_error_fraction = _number('--max_error_fraction', opts.max_error_fraction, fraction=True)
  spec = inputs.resolve_input(opts.input or '')
  return Settings(
      input=spec,
      output=opts.output.rstrip('/') or '/',
      label_source=labels.parse_label_source(opts.label_source, spec.is_manifest),
      schema=opts.schema,
      target_shard_bytes=max(1, int(target_mb * 2**20)),
      compression=opts.compression,
      max_pixels=max_pixels,
      max_file_bytes=max(1, int(max_file_mb * 2**20)),
      splits=splits,
      dedupe=bool(opts.dedupe),
      image_size=int(image_size),
      skip_transform=bool(opts.skip_transform),
      read_threads=max(1, int(read_threads)),
      max_error_fraction=max_error_fraction,
  )


def _number(flag: str, value: Optional[str], fraction: bool = False) -> float:
  """``value`` as a positive, finite number; with ``fraction``, as one in [0, 1]."""
  try:
    number = float(value)
  except (TypeError, ValueError):
    raise UsageError(f'{flag}={value} is not a number') from None
  if fraction and not 0 <= number <= 1:
    raise UsageError(f'{flag}={value} must be between 0 and 1')
  if not fraction and not 0 < number < float('inf'):
    raise UsageError(f'{flag}={value} must be a positive number')
  return number
