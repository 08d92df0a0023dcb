"""Every option of a conversion, written once: its flag, group, kind of value, default, help, Flex
Template parameter, whether it changes what the output holds, and how beam_pipeline.json records it.

The command line's parser (cli/arguments.py), the checks of its values (cli/options.py),
the run record's options (Settings.as_dict), the Flex Template's metadata.json and the
options guide's table are all made from this table (cli/option_docs.py writes the last
two; a test holds them to it). Checks that involve several options, the input or the
storage stay in cli/options.py.
"""
import dataclasses
import math
import re
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

from beam_pipeline.core.user_errors import UsageError

# Where a Flex Template's paths are: Dataflow's workers read and write Cloud Storage.
_GCS_PATH = r'^gs:\/\/[^\n\r]+$'
_INT64_MAX = 2**63 - 1


@dataclasses.dataclass(frozen=True)
class Kind:
  """A kind of value: how its text is checked and parsed, and the Flex Template's regex for it."""
  regex: Optional[str] = None

  def parse(self, flag: str, text: Optional[str]) -> Any:  # pylint: disable=unused-argument
    return text


@dataclasses.dataclass(frozen=True)
class Text(Kind):
  """Any text, checked elsewhere (a path, a pattern) or by the template's regex only."""


@dataclasses.dataclass(frozen=True)
class Switch(Kind):
  """On or off: ``--flag``, ``--flag=true`` or ``--flag=false`` (the form a Flex Template launcher passes)."""
  regex: Optional[str] = '^(true|false)$'
  WORDS = {'true': True, 'yes': True, '1': True, 'false': False, 'no': False, '0': False}

  def parse(self, flag: str, text: Any) -> bool:
    if isinstance(text, bool) or text is None:
      return bool(text)
    if text.lower() not in self.WORDS:
      raise UsageError(f'{flag}={text} is not true or false')
    return self.WORDS[text.lower()]


@dataclasses.dataclass(frozen=True)
class Choice(Kind):
  values: Tuple[str, ...] = ()

  @property
  def template_regex(self) -> str:
    return f'^({"|".join(map(re.escape, self.values))})$'

  def parse(self, flag: str, text: Optional[str]) -> str:
    if text not in self.values:
      raise UsageError(f'{flag}={text} is not one of {", ".join(self.values)}')
    return text


@dataclasses.dataclass(frozen=True)
class Number(Kind):
  """A positive, finite number, at least ``minimum`` where one is given."""
  regex: Optional[str] = r'^([0-9]*[1-9][0-9]*(\.[0-9]*)?|[0-9]*\.[0-9]*[1-9][0-9]*)$'
  minimum: Optional[float] = None

  def parse(self, flag: str, text: Optional[str]) -> float:
    number = _float(flag, text)
    if not 0 < number < math.inf:
      raise UsageError(f'{flag}={text} must be a positive number')
    if self.minimum is not None and number < self.minimum:
      raise UsageError(f'{flag}={text} is less than {self.minimum:g}: give {self.minimum:g} or more')
    return number


@dataclasses.dataclass(frozen=True)
class Fraction(Kind):
  """A number from 0 to 1."""
  regex: Optional[str] = r'^(0(\.[0-9]*)?|1(\.0*)?|\.[0-9]+)$'

  def parse(self, flag: str, text: Optional[str]) -> float:
    number = _float(flag, text)
    if not 0 <= number <= 1:
      raise UsageError(f'{flag}={text} must be between 0 and 1')
    return number


@dataclasses.dataclass(frozen=True)
class Whole(Kind):
  """A positive whole number that fits TensorFlow's int64 (a limit or a size reaches its ops);
  0 too if ``zero`` (where it means the option's default)."""
  regex: Optional[str] = '^[0-9]*[1-9][0-9]*$'
  maximum: int = _INT64_MAX
  zero: bool = False

  def parse(self, flag: str, text: Optional[str]) -> int:
    if self.zero and _float(flag, text) == 0:
      return 0
    number = Number().parse(flag, text)
    if number != int(number):
      raise UsageError(f'{flag}={text} must be a whole number')
    if int(number) > self.maximum:
      raise UsageError(f'{flag}={text} is too large: at most {self.maximum}' if self.maximum == _INT64_MAX else
                       f'{flag}={text} must be at most {self.maximum}')
    return int(number)


@dataclasses.dataclass(frozen=True)
class Names(Kind):
  """Some of ``values``, comma-separated, each once: parsed into a sorted tuple."""
  values: Tuple[str, ...] = ()

  @property
  def template_regex(self) -> str:
    name = f'({"|".join(map(re.escape, self.values))})'
    return f'^{name}(,{name})*$'

  def parse(self, flag: str, text: Optional[str]) -> Tuple[str, ...]:
    names = [name.strip() for name in (text or '').split(',')]
    unknown = [name for name in names if name not in self.values]
    if unknown or len(set(names)) < len(names):
      raise UsageError(f'{flag}={text}: give some of {", ".join(self.values)}, comma-separated, each once')
    return tuple(sorted(names))


def _float(flag: str, text: Optional[str]) -> float:
  try:
    return float(text)
  except (TypeError, ValueError):
    raise UsageError(f'{flag}={text} is not a number') from None


@dataclasses.dataclass(frozen=True)
class Option:
  """One option of a conversion."""
  name: str
  group: str
  kind: Kind
  help: str  # what it does; --help, the Flex Template and the options guide say the same
  default: Optional[str] = None  # as the command line would give it; None: not given
  shown_default: Optional[str] = None  # what 'Default:' says, where not the default itself
  example: Optional[str] = None  # a value for 'E.g. --name=...'
  required: bool = False
  template: Optional[str] = None  # the Flex Template parameter's label; None: not a parameter
  template_regex: Optional[str] = None  # the parameter's check, where not its kind's
  changes_output: bool = True  # whether a different value gives a different dataset
  # How beam_pipeline.json's options record it, from the Settings; None: not recorded.
  recorded_as: Optional[Callable[[Any], Any]] = None
  recorded_if: Optional[Callable[[Any], bool]] = None  # recorded only when this holds of the Settings

  @property
  def flag(self) -> str:
    return f'--{self.name}'

  def parse(self, text: Any) -> Any:
    """The value of ``text`` (the default if None), checked; UsageError naming the flag."""
    if text is None and self.default is None:
      return False if isinstance(self.kind, Switch) else None
    return self.kind.parse(self.flag, self.default if text is None else text)

  @property
  def default_text(self) -> str:
    if self.shown_default:
      return self.shown_default
    if isinstance(self.kind, Switch):
      return 'false'
    return self.default if self.default is not None else 'none'

  @property
  def help_text(self) -> str:
    """The help as --help and the Flex Template give it: what it does, its default, an example."""
    text = self.help + ('. Required.' if self.required else f'. Default: {self.default_text}.')
    return text + (f' E.g. {self.flag}={self.example}' if self.example else '')

  @property
  def parameter_regex(self) -> Optional[str]:
    if self.template_regex:
      return self.template_regex
    return self.kind.template_regex if isinstance(self.kind, (Choice, Names)) else self.kind.regex


# The data-quality flags an image may raise (core/images/image_quality.py names them; a test holds
# the two to each other): this module imports no image code.
QUALITY_FLAGS = ('dark', 'light', 'blurry', 'low_information', 'extreme_aspect', 'grayscale_as_rgb')
_ANNOTATED = lambda settings: bool(settings.annotations)  # noqa: E731  pylint: disable=unnecessary-lambda-assignment

OPTIONS: Tuple[Option, ...] = (
    # input
    Option('input', 'input', Text(regex=_GCS_PATH), 'Images to convert: a glob (quoted, so the shell leaves it: '
           "'photos/**/*.jpg'), a directory (walked recursively; both skip hidden, system and clearly non-image "
           'files, .DS_Store or notes.txt) or a manifest (.csv in AutoML layout '
           '[set,]uri,label, or .jsonl with uri, label, split and extra fields)',
           example='gs://my-bucket/PetImages', required=True, template='Images',
           recorded_as=lambda settings: settings.input.path),
    Option('annotations', 'input', Text(), 'Object-detection boxes for the images of --input (a directory): a COCO '
           'instances .json, or a folder of Pascal VOC .xml files; image names are relative to --input',
           example='coco/annotations/instances_train2017.json', template='Object-detection annotations',
           template_regex='^gs://[^/]+/.+$', recorded_as=lambda settings: settings.annotations, recorded_if=_ANNOTATED),
    Option('input_root', 'input', Text(), 'Refuse input files outside this folder (local or gs://), as '
           "outside_input_root: a manifest may otherwise name any file the process can read (an absolute path, "
           "'../'). Local paths are resolved, links followed, before they are compared",
           example='gs://my-bucket/images', template='Input root',
           template_regex=r'^gs:\/\/[^\/\n\r]+(\/[^\n\r]*)?$', recorded_as=lambda settings: settings.input_root,
           recorded_if=lambda settings: bool(settings.input_root)),
    # labels and splits
    Option('label_source', 'labels and splits', Text(regex='^(parent_dir|none|manifest|regex:.+)$'),
           'Where labels come from: parent_dir (PetImages/Cat/1.jpg -> Cat), none, regex:<pattern with one group> '
           "on the file name ('regex:^([a-z]+)\\.' gives cat.12.jpg -> cat), or manifest",
           shown_default='manifest for manifests, none with --annotations, else parent_dir', template='Label source',
           recorded_as=lambda settings: str(settings.label_source)),
    Option('splits', 'labels and splits', Text(regex=r'^[a-z][a-z0-9_]*=[0-9.]+(,[a-z][a-z0-9_]*=[0-9.]+)*$'),
           'Split fractions, stratified per class by content hash (val, valid and dev name validation, training '
           'train, testing test, as everywhere); a manifest split column or top-level train/validation/test folders '
           'take precedence', shown_default='all train',
           example='train=0.8,validation=0.1,test=0.1', template='Splits',
           recorded_as=lambda settings: dict(zip(settings.splits.names, settings.splits.fractions))),
    Option('dedupe', 'labels and splits', Switch(), 'Keep one copy of identical files, with the label most copies '
           'give (the others are listed in the errors file as duplicate, no error; copies that give no one label '
           'most are all rejected as label_conflict); without it copies are kept, always in one split',
           template='Drop duplicates', recorded_as=lambda settings: settings.dedupe),
    Option('near_copies', 'labels and splits', Choice(values=('group', 'drop', 'off')), 'Near copies (the same '
           'photo re-saved, downscaled, converted, brightened, mirrored, cropped by a few percent, watermarked in a '
           'corner or straightened; their perceptual hashes near one picture\'s, their colours not apart): group '
           'keeps each group in one split, as identical files are, unless it holds more than a hundredth of the '
           'smallest split (a set of look-alikes, split image by image); drop keeps the best image of each group '
           '(undamaged, then the most pixels, then the most bytes; the others are listed in the errors file as '
           'near_duplicate, no error); off leaves them to the splits by content hash', default='group',
           template='Near copies',
           recorded_as=lambda settings: settings.near_copies),
    Option('near_distance', 'labels and splits', Whole(regex='^([1-9]|1[0-9]|20)$', maximum=20),
           'How many of the 64 bits of two perceptual hashes\' blocks halves may differ for near copies, their DCT '
           'halves differing in at most 2 more (beam_pipeline/docs/splits.md shows what each distance finds)',
           shown_default='10, made smaller for large inputs so that chance groups at most one '
           'image in a thousand: 8 past 100,000 images, 6 past 3 million', example='8',
           template='Near-copy distance', recorded_as=lambda settings: settings.near_distance,
           recorded_if=lambda settings: bool(settings.near_distance)),
    Option('multi_label', 'labels and splits', Switch(), 'Multi-label classification: a manifest row may name several '
           'labels (CSV: [set,]uri,label1,label2,...; JSONL: a list as "label" or "labels"); records hold every '
           'class id and text, and splits are stratified by the first', template='Multi-label classification',
           recorded_as=lambda settings: settings.multi_label, recorded_if=lambda settings: settings.multi_label),
    Option('drop_unannotated', 'labels and splits', Switch(), 'With --annotations: reject images no annotation '
           'gives a box (reason unannotated) instead of keeping them as negatives', template='Drop unannotated images',
           recorded_as=lambda settings: settings.drop_unannotated, recorded_if=_ANNOTATED),
    Option('include_masks', 'labels and splits', Switch(), "With a COCO --annotations: write each object's "
           'segmentation as a PNG mask of the stored image (image/object/mask); an object without one is an error',
           template='Instance masks', recorded_as=lambda settings: settings.include_masks, recorded_if=_ANNOTATED),
    # output
    Option('output', 'output', Text(regex=_GCS_PATH), 'Directory for the dataset (local or gs://): empty, new or an '
           'earlier output of this tool; one run writes it at a time', example='gs://my-bucket/tfrecords/pets',
           required=True, template='Output directory', changes_output=False,
           recorded_as=lambda settings: settings.output),
    Option('overwrite', 'output', Switch(), 'Replace an output of this tool that an earlier run converted from '
           'another --input (without it the run is refused, saying what it would replace); a rerun from the same '
           'input, a retry, replaces its output without it', template='Replace an output of another input',
           changes_output=False),
    Option('incremental', 'output', Switch(), 'Convert only what changed since the last run into --output (new, '
           'changed and deleted files, found by size, times and inode or a Cloud Storage generation), leaving its '
           'other shards as they are; the first run, or one with other options, converts everything',
           template='Incremental update', changes_output=False, recorded_as=lambda settings: settings.incremental,
           recorded_if=lambda settings: settings.incremental),
    Option('rebuild', 'output', Switch(), 'With --incremental: convert everything again, as if the output held '
           'nothing (its dataset stays readable until the new one is committed)', template='Full rebuild',
           changes_output=False),
    Option('schema', 'output', Choice(values=('default', 'simple')), 'Example keys: default (image/encoded, '
           'image/class/label, ...) or simple (image_raw, label, id)', default='default', template='Example keys',
           recorded_as=lambda settings: settings.schema),
    Option('target_shard_mb', 'output', Number(), 'Target size of a shard, in MiB', default='150', example='200',
           template='Target shard size (MiB)', recorded_as=lambda settings: settings.target_shard_bytes / 2**20),
    Option('num_shards', 'output', Whole(regex='^[0-9]+$', zero=True), 'Shards per split, in place of '
           "--target_shard_mb's sizes, with as many records each as can be (one apart; a split of fewer records gets "
           'one shard per record), for readers that read shards in parallel; 0: by size',
           shown_default='0, by size', example='8', template='Shards per split',
           recorded_as=lambda settings: settings.num_shards, recorded_if=lambda settings: bool(settings.num_shards)),
    Option('compression', 'output', Choice(values=('none', 'gzip')), 'Compression of the shards: none or gzip '
           '(.tfrecord.gz)', default='none', template='Compression', recorded_as=lambda settings: settings.compression),
    Option('index_files', 'output', Switch(), 'Write beside each shard its index (SHARD.idx: one "offset length" '
           'line per record), which NVIDIA DALI and the PyTorch tfrecord package read; uncompressed shards only',
           template='Index files', recorded_as=lambda settings: settings.index_files),
    Option('image_size', 'output', Whole(), 'Side of the square images the tf.Transform graph resizes to',
           default='224', template='tf.Transform image size', recorded_as=lambda settings: settings.image_size),
    Option('skip_transform', 'output', Switch(), 'Write no tf.Transform graph', template='Skip the tf.Transform graph',
           recorded_as=lambda settings: settings.skip_transform),
    Option('max_error_fraction', 'output', Fraction(), 'Fail the run, committing nothing (an earlier output stays as '
           "it was; the errors file is left in the run's staging folder), if a larger fraction of the input is "
           'rejected', default='0.05', example='0.2', template='Error budget', changes_output=False,
           recorded_as=lambda settings: settings.max_error_fraction),
    # images
    Option('image_format', 'images', Choice(values=('original', 'jpeg', 'png')), 'What records store: original '
           '(JPEG and PNG as they are, every other format as PNG, losslessly), jpeg (JPEG as it is, the rest as RGB '
           'JPEG) or png (everything as PNG). Every record decodes with tf.io.decode_jpeg and tf.io.decode_image, '
           'checked during the run, and with Pillow', default='original', template='Stored image format',
           recorded_as=lambda settings: settings.stored.format),
    Option('jpeg_quality', 'images', Whole(regex='^([1-9][0-9]?|100)$', maximum=100), 'Quality of the JPEGs '
           '--image_format=jpeg, --exif_orientation=apply or --max_side encode', default='95',
           template='JPEG quality', recorded_as=lambda settings: settings.stored.jpeg_quality),
    Option('exif_orientation', 'images', Choice(values=('apply', 'ignore')), 'apply: store every image upright, its '
           'Exif orientation applied and the tag removed (re-encoded; a JPEG at --jpeg_quality), so TensorFlow, DALI '
           'and Pillow see one picture of the recorded size; ignore: keep the bytes as they are', default='apply',
           template='Exif orientation', recorded_as=lambda settings: settings.stored.exif_orientation),
    Option('max_side', 'images', Whole(), 'Downscale images whose longer side is longer than this (aspect ratio '
           'kept, never enlarged), storing the source size as image/original_height and image/original_width',
           shown_default='keep every size', example='512', template='Longest side (pixels)',
           recorded_as=lambda settings: settings.stored.max_side or None),
    Option('strict_jpeg', 'images', Switch(), 'Reject JPEGs that decode only with libjpeg warnings (damaged data: '
           'a scan cut short, extraneous bytes), as damaged_jpeg; stricter decoders (NVIDIA DALI, nvJPEG) refuse '
           'them. Without it they are stored and counted', template='Reject damaged JPEGs',
           recorded_as=lambda settings: settings.strict_jpeg),
    Option('reject_quality', 'images', Names(values=QUALITY_FLAGS), 'Reject images that raise these data-quality '
           'flags, as poor_quality (beam_pipeline/docs/inspecting.md says how each is measured). Without it they are '
           "stored, and beam_pipeline.json and inspect count them per class and split", shown_default='reject none',
           example='dark,blurry', template='Reject by data quality',
           recorded_as=lambda settings: list(settings.reject_quality), recorded_if=lambda settings: bool(
               settings.reject_quality)),
    Option('min_side', 'images', Whole(), 'Reject images whose shorter side (as stored, after --max_side) is '
           "shorter, as too_small: readers that crop (Model Garden's classification parser) fail on them",
           default='1', shown_default='1, every size', template='Shortest side (pixels)',
           recorded_as=lambda settings: settings.min_side),
    Option('max_pixels', 'images', Whole(), 'Reject images with more pixels, from their header (decompression '
           "bombs); a limit above Pillow's own lifts it for the run", default='100000000', template='Maximum pixels',
           recorded_as=lambda settings: settings.max_pixels),
    Option('max_file_mb', 'images', Number(), 'Reject larger files (MiB), unread', default='100',
           template='Maximum file size (MiB)', recorded_as=lambda settings: settings.max_file_bytes / 2**20),
    Option('read_threads', 'images', Whole(), 'Cloud Storage reads in flight per worker (they are latency-bound); '
           'local files are read one at a time', default='32', template='Reads in flight per worker',
           changes_output=False, recorded_as=lambda settings: settings.read_threads),
    # embeddings
    Option('embedding_model', 'embeddings', Text(regex=_GCS_PATH), 'A Keras .keras file or a TensorFlow SavedModel '
           'directory (local or gs://) that takes a batch of float32 RGB images with values 0-255 and normalizes '
           'them itself, as Keras applications do', example='gs://my-bucket/models/efficientnet_b0.keras',
           template='Embedding model', recorded_as=lambda settings: settings.embedding and settings.embedding.model),
    Option('embedding_image_size', 'embeddings', Whole(), 'Side of the square the stored images are resized to '
           '(tf.image.resize, bilinear) for the model', default='224', template='Embedding input size (pixels)',
           recorded_as=lambda settings: settings.embedding and settings.embedding.image_size),
    Option('embedding_only', 'embeddings', Switch(), 'Store the embedding instead of the image (image/encoded is '
           'left out; every image is still validated)', template='Embeddings only',
           recorded_as=lambda settings: bool(settings.embedding and settings.embedding.only)),
    Option('embedding_batch_size', 'embeddings', Whole(), 'Images per model call; larger suits a GPU', default='16',
           template='Embedding batch size', changes_output=False,
           recorded_as=lambda settings: settings.embedding and settings.embedding.batch_size),
    # cloud
    Option('no_wait', 'cloud', Switch(), 'With DataflowRunner: return once the job is submitted (its id and console '
           'link printed)', changes_output=False),
    # console: the command's own, not the pipeline's
    Option('verbose', 'console', Switch(), "Show Beam's INFO log lines", changes_output=False),
    Option('json', 'console', Switch(), 'Print the summary as JSON on standard output', changes_output=False),
    Option('progress_interval', 'console', Number(minimum=0.1), 'Seconds between progress lines when standard '
           'error is not a terminal (Airflow and CI logs); 0.1 or more', default='10', changes_output=False),
)

# The groups of --help, in order, and what a group says of itself.
GROUPS: Dict[str, Optional[str]] = {
    'input': None, 'labels and splits': None, 'output': None, 'images': None,
    'embeddings': "A pretrained network's features beside (or instead of) the pixels, as image/embedding "
                  '(flattened) and image/embedding/shape.',
    'cloud': 'Beam options; every other Beam option works as well.',
    'console': None,
}
CONSOLE = 'console'

BY_NAME: Dict[str, Option] = {option.name: option for option in OPTIONS}


def pipeline_options() -> Iterator[Option]:
  """The options that reach the pipeline (Beam's PipelineOptions): all but the console's."""
  return (option for option in OPTIONS if option.group != CONSOLE)


def default(name: str) -> Any:
  """An option's default value, parsed: the one place a default is written."""
  return BY_NAME[name].parse(None)


def recorded(settings: Any) -> Dict[str, Any]:
  """The options as beam_pipeline.json records them, from the run's Settings, in the table's order."""
  return {option.name: option.recorded_as(settings) for option in OPTIONS
          if option.recorded_as and (option.recorded_if is None or option.recorded_if(settings))}
