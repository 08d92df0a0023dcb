"""Command-line options, as a Beam PipelineOptions subclass, and their validation.

Values are parsed as text and checked here rather than by argparse ``type=``/
``choices=``, so that every mistake, including an unknown flag that Beam would
only warn about, ends the launch with one line that says what to do.
"""
import difflib
from typing import List, Optional, Tuple

from apache_beam.options.pipeline_options import PipelineOptions

from beam_pipeline import inputs, labels, schemas, splitting
from beam_pipeline.settings import Settings
from beam_pipeline.usage import UsageError

COMPRESSIONS = ('none', 'gzip')


class ConversionOptions(PipelineOptions):

  @classmethod
  def _add_argparse_args(cls, parser):
    parser.add_argument('--input', help='Images to convert: a glob (gs://b/imgs/**/*.jpg), a directory '
                        '(walked recursively) or a manifest (.csv in AutoML layout [set,]uri,label, '
                        'or .jsonl with uri/label/split and extra fields).')
    parser.add_argument('--output', help='Directory for shards, labels.txt, errors-*.jsonl and '
                        'dataset_info.json (written last: its presence means the run completed).')
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
    parser.add_argument('--dedupe', action='store_true', default=False, help='Keep one copy of identical '
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
    parser.add_argument('--skip_transform', action='store_true', default=False, help='Do not write the '
                        'tf.Transform graph (transform_fn/, transformed_metadata/).')


LABELS_HELP = ('--labels: parent_dir (default for globs and directories), none, regex:<pattern with '
               'one group> applied to the file name, or manifest (default for manifests). Other '
               '--labels=key=value flags stay Dataflow job labels.')


def split_label_flag(argv: List[str]) -> Tuple[Optional[str], List[str]]:
  """Takes our --labels=<mode> out of argv; Beam's own --labels (job labels) stays.

  Beam's GoogleCloudOptions already defines --labels (key=value job labels), so a
  subclass cannot redefine it; values naming a label mode are ours, the rest Beam's.
  """
  mode, rest, args = None, [], list(argv)
  while args:
    arg = args.pop(0)
    if arg == '--labels' and args and labels.is_label_mode(args[0]):
      mode = args.pop(0)
    elif arg.startswith('--labels=') and labels.is_label_mode(arg[len('--labels='):]):
      mode = arg[len('--labels='):]
    else:
      rest.append(arg)
  return mode, rest


def check_no_unknown_flags(options: PipelineOptions) -> None:
  known = options.get_all_options()
  unknown = sorted(set(options.get_all_options(retain_unknown_options=True)) - set(known))
  if unknown:
    flag = '--' + unknown[0]
    close = difflib.get_close_matches(unknown[0], list(known), n=1)
    hint = f'; did you mean --{close[0]}?' if close else '; see --help'
    raise UsageError(f'unknown option {flag}{hint}')


def validate(options: PipelineOptions, label_mode: Optional[str] = None) -> Settings:
  """Checks every value and the input's existence; raises UsageError with one line.

  ``label_mode`` is the --labels value taken out of argv by split_label_flag.
  """
  check_no_unknown_flags(options)
  opts = options.view_as(ConversionOptions)
  if not opts.output:
    raise UsageError('--output is required: the directory (local or gs://) to write the dataset to')
  if opts.schema not in schemas.SCHEMAS:
    raise UsageError(f'--schema={opts.schema} is not one of {", ".join(schemas.SCHEMAS)}')
  if opts.compression not in COMPRESSIONS:
    raise UsageError(f'--compression={opts.compression} is not one of {", ".join(COMPRESSIONS)}')
  target_mb = _positive_number('--target_shard_mb', opts.target_shard_mb)
  max_pixels = int(_positive_number('--max_pixels', opts.max_pixels))
  max_file_mb = _positive_number('--max_file_mb', opts.max_file_mb)
  image_size = _positive_number('--image_size', opts.image_size)
  if image_size != int(image_size):
    raise UsageError(f'--image_size={opts.image_size} must be a whole number of pixels')
  splits = splitting.parse_splits(opts.splits)
  read_threads = _positive_number('--read_threads', opts.read_threads)
  max_error_fraction = _fraction('--max_error_fraction', opts.max_error_fraction)
  spec = inputs.resolve_input(opts.input or '')
  return Settings(
      input=spec,
      output=opts.output.rstrip('/') or '/',
      label_source=labels.parse_label_source(label_mode, spec.is_manifest),
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


def _fraction(flag: str, value: Optional[str]) -> float:
  try:
    number = float(value)
  except (TypeError, ValueError):
    raise UsageError(f'{flag}={value} is not a number') from None
  if not 0 <= number <= 1:
    raise UsageError(f'{flag}={value} must be between 0 and 1')
  return number


def _positive_number(flag: str, value: Optional[str]) -> float:
  try:
    number = float(value)
  except (TypeError, ValueError):
    raise UsageError(f'{flag}={value} is not a number') from None
  if not number > 0 or number == float('inf'):
    raise UsageError(f'{flag}={value} must be a positive number')
  return number
