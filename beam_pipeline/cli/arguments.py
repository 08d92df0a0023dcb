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

from beam_pipeline.core import settings
from beam_pipeline.core.user_errors import UsageError

SUBCOMMANDS = ('convert', 'inspect', 'verify')
# Beam's own flags that --help lists under Cloud; every other Beam flag works as well.
BEAM_FLAGS = {'runner': ('DirectRunner', 'DataflowRunner'), 'project': ('my-project',), 'region': ('us-central1',),
              'temp_location': ('gs://my-bucket/tmp',), 'setup_file': ('./setup.py',),
              'sdk_container_image': ('us-central1-docker.pkg.dev/my-project/tfrecords/images-to-tfrecords:0.1.0',)}
# Options of the command itself, not of the pipeline: they never reach Beam.
CONSOLE_OPTIONS = ('verbose', 'json', 'progress_interval')


def _boolean(value: str) -> bool:
  """A switch's value, as a Flex Template launcher passes it (--dedupe=true) or a user writes it."""
  known = {'true': True, 'yes': True, '1': True, 'false': False, 'no': False, '0': False}
  if value.lower() not in known:
    raise argparse.ArgumentTypeError(f'{value!r} is not true or false')
  return known[value.lower()]


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


# An on/off option: --dedupe, --dedupe=true or --dedupe=false.
_SWITCH = dict(nargs='?', const=True, default=False, type=_boolean, metavar='true|false')


def add_conversion_options(parser: argparse.ArgumentParser) -> Any:
  """A conversion's own options, in groups: on the command line's parser and on Beam's.
  Returns the group 'cloud', where the command line lists Beam's own flags."""
  group = parser.add_argument_group('input')
  group.add_argument('--input', help='Images to convert: a glob, a directory (walked recursively) or a '
                     'manifest (.csv in AutoML layout [set,]uri,label, or .jsonl with uri, label, split and '
                     'extra fields). Required. E.g. --input=gs://my-bucket/PetImages or '
                     "--input='photos/**/*.jpg'")
  group.add_argument('--annotations', default=None, help='Object-detection boxes for the images of --input (a '
                     'directory): a COCO instances .json, or a folder of Pascal VOC .xml files; image names are '
                     'relative to --input. E.g. --annotations=coco/annotations/instances_train2017.json')
  group.add_argument('--input_root', default=None, help='Refuse input files outside this folder (local or '
                     'gs://), as outside_input_root: a manifest may otherwise name any file the process can read '
                     "(an absolute path, '../'). Local paths are resolved, links followed, before they are "
                     'compared. Default: none. E.g. --input_root=gs://my-bucket/images')
  group = parser.add_argument_group('labels and splits')
  group.add_argument('--label_source', default=None, help='Where labels come from: parent_dir '
                     '(PetImages/Cat/1.jpg -> Cat), none, regex:<pattern with one group> on the file name, or '
                     'manifest. Default: manifest for manifests, none with --annotations, else parent_dir. E.g. '
                     "--label_source='regex:^([a-z]+)\\.' gives cat.12.jpg -> cat")
  group.add_argument('--splits', default=None, help='Split fractions, stratified per class by content hash; '
                     'a manifest split column or top-level train/validation/test folders take precedence. '
                     'Default: all train. E.g. --splits=train=0.8,validation=0.1,test=0.1')
  group.add_argument('--dedupe', **_SWITCH, help='Keep one copy of identical files (the others are listed in '
                     'the errors file as duplicate, no error); without it copies are kept, always in one split. '
                     'Default: false')
  group.add_argument('--multi_label', **_SWITCH, help='Multi-label classification: a manifest row may name '
                     'several labels (CSV: [set,]uri,label1,label2,...; JSONL: a list as "label" or "labels"); '
                     'records hold every class id and text, and splits are stratified by the first. Default: false')
  group.add_argument('--drop_unannotated', **_SWITCH, help='With --annotations: reject images no annotation '
                     'gives a box (reason unannotated) instead of keeping them as negatives. Default: false')
  group.add_argument('--include_masks', **_SWITCH, help='With a COCO --annotations: write each object\'s '
                     'segmentation as a PNG mask of the stored image (image/object/mask); an object without one '
                     'is an error. Default: false')
  group = parser.add_argument_group('output')
  group.add_argument('--output', help='Directory for the dataset (local or gs://): empty, new or an earlier '
                     'output of this tool. Required. E.g. --output=gs://my-bucket/tfrecords/pets')
  group.add_argument('--schema', default='default', help='Example keys: default (image/encoded, '
                     'image/class/label, ...) or simple (image_raw, label, id). Default: %(default)s')
  group.add_argument('--target_shard_mb', default='150', help='Target size of a shard, in MiB. Default: '
                     '%(default)s. E.g. --target_shard_mb=200')
  group.add_argument('--compression', default='none', help='none or gzip. Default: %(default)s')
  group.add_argument('--index_files', **_SWITCH, help='Write beside each shard its index (SHARD.idx: one '
                     '"offset length" line per record), which NVIDIA DALI and the PyTorch tfrecord package read; '
                     'uncompressed shards only. Default: false')
  group.add_argument('--image_size', default=str(settings.IMAGE_SIZE),
                     help='Side of the square images the tf.Transform graph resizes to. Default: %(default)s')
  group.add_argument('--skip_transform', **_SWITCH, help='Write no tf.Transform graph. Default: false')
  group.add_argument('--max_error_fraction', default='0.05', help='Fail the run, committing nothing (an '
                     'earlier output stays as it was; the errors file is left in its temporary directory), if a '
                     'larger fraction of the input is rejected. Default: %(default)s. E.g. --max_error_fraction=0.2')
  group = parser.add_argument_group('images')
  group.add_argument('--image_format', default=settings.IMAGE_FORMAT, help='What records store: original (JPEG and PNG '
                     'as they are, every other format as PNG, losslessly), jpeg (JPEG as it is, the rest as RGB '
                     'JPEG) or png (everything as PNG). Every record decodes with tf.io.decode_jpeg and '
                     'tf.io.decode_image, checked during the run, and with Pillow (README: What is validated). '
                     'Default: %(default)s')
  group.add_argument('--jpeg_quality', default=str(settings.JPEG_QUALITY),
                     help='Quality of the JPEGs --image_format=jpeg or --max_side encode. Default: %(default)s')
  group.add_argument('--exif_orientation', default=settings.EXIF_ORIENTATION,
                     help='apply: store every image upright, its Exif orientation applied and the tag removed '
                     '(re-encoded; a JPEG at --jpeg_quality), so TensorFlow, DALI and Pillow see one picture of the '
                     'recorded size; ignore: keep the bytes as they are. Default: %(default)s')
  group.add_argument('--max_side', default=None, help='Downscale images whose longer side is longer than this '
                     '(aspect ratio kept, never enlarged), storing the source size as image/original_height '
                     'and image/original_width. Default: keep every size. E.g. --max_side=512')
  group.add_argument('--strict_jpeg', **_SWITCH, help='Reject JPEGs that decode only with libjpeg warnings '
                     '(damaged data: a scan cut short, extraneous bytes), as damaged_jpeg; stricter decoders '
                     '(NVIDIA DALI, nvJPEG) refuse them. Without it they are stored and counted. Default: false')
  group.add_argument('--min_side', default=str(settings.MIN_SIDE),
                     help='Reject images whose shorter side (as stored, after --max_side) is shorter, as '
                     'too_small: readers that crop (Model Garden\'s classification parser) fail on them. '
                     'Default: %(default)s, every size')
  group.add_argument('--max_pixels', default='100000000', help='Reject images with more pixels, from their '
                     'header (decompression bombs). Default: %(default)s')
  group.add_argument('--max_file_mb', default='100', help='Reject larger files (MiB), unread. Default: '
                     '%(default)s')
  group.add_argument('--read_threads', default='32', help='Cloud Storage reads in flight per worker. '
                     'Default: %(default)s')
  group = parser.add_argument_group('embeddings', "A pretrained network's features beside (or instead of) "
                                    'the pixels, as image/embedding (flattened) and image/embedding/shape.')
  group.add_argument('--embedding_model', default=None, help='A Keras .keras file or a TensorFlow SavedModel '
                     'directory (local or gs://) that takes a batch of float32 RGB images with values 0-255 and '
                     'normalizes them itself, as Keras applications do. E.g. '
                     '--embedding_model=gs://my-bucket/models/efficientnet_b0.keras')
  group.add_argument('--embedding_image_size', default=str(settings.EMBEDDING_IMAGE_SIZE),
                     help='Side of the square the stored images are '
                     'resized to (tf.image.resize, bilinear) for the model. Default: %(default)s')
  group.add_argument('--embedding_only', **_SWITCH, help='Store the embedding instead of the image '
                     '(image/encoded is left out; every image is still validated). Default: false')
  group.add_argument('--embedding_batch_size', default=str(settings.EMBEDDING_BATCH_SIZE),
                     help='Images per model call. Default: '
                     '%(default)s; larger suits a GPU')
  group = parser.add_argument_group('cloud', 'Beam options; every other Beam option works as well.')
  group.add_argument('--no_wait', **_SWITCH, help='With DataflowRunner: return once the job is submitted '
                     '(its id and console link printed). Default: false')
  return group


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
  _add_beam_flags(add_conversion_options(convert))
  console = convert.add_argument_group('console')
  console.add_argument('--verbose', action='store_true', help="Show Beam's INFO log lines.")
  console.add_argument('--json', action='store_true', help='Print the summary as JSON on standard output.')
  console.add_argument('--progress_interval', default='10', help='Seconds between progress lines when standard '
                       'error is not a terminal (Airflow and CI logs); a positive number. Default: %(default)s')

  inspect = commands.add_parser('inspect', prog='python -m beam_pipeline inspect', allow_abbrev=False,
                                description='The dataset a completed conversion wrote, at a glance.')
  inspect.add_argument('output', metavar='OUTPUT', help='A completed output directory (local or gs://).')
  inspect.add_argument('--errors', action='store_true', help='List the rejected files, grouped by reason.')
  inspect.add_argument('--contact_sheet', metavar='PATH.png', help='Draw sample images of every class, with '
                       'label and split, into this PNG.')
  inspect.add_argument('--plots', metavar='PATH.png', help='Plot the class balance per split and the '
                       'image sizes into this PNG.')
  inspect.add_argument('--samples', type=_positive_whole_number, default=8, help='Images per class on the contact sheet. '
                       'Default: %(default)s')

  verify = commands.add_parser('verify', prog='python -m beam_pipeline verify', allow_abbrev=False,
                               description='Check every record of a completed output: framing, parsing, '
                               'decoding to its recorded size, and its hash.')
  verify.add_argument('output', metavar='OUTPUT', help='A completed output directory (local or gs://).')
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
  return namespace, rest
