"""A conversion's options, as a Beam PipelineOptions subclass, parsed once and checked before any work.

The command line's parser (arguments.py) reads our options and leaves every other
flag to Beam's PipelineOptions, which gets our values as keyword arguments: each
flag is parsed once, and every standard Beam flag (--runner, --project, --labels,
...) works unchanged. Values are checked here rather than by argparse ``type=``/
``choices=``, so that every mistake, including an unknown flag that Beam would
only warn about, ends the launch with one line that says what to do.
"""
import contextlib
import difflib
import logging
import os
import re
import sys
import time
from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Optional

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import (GoogleCloudOptions, PipelineOptions, SetupOptions, StandardOptions,
                                                  TestOptions)

from beam_pipeline.cli import arguments
from beam_pipeline.compat import beam_internals
from beam_pipeline.pipeline.listing import annotation_inputs, inputs
from beam_pipeline.core import option_table, uris
from beam_pipeline.core.inputs import annotations as annotations_format, input_root, labels
from beam_pipeline.core.output import run_lock
from beam_pipeline.core.planning import splitting
from beam_pipeline.core.settings import (DIRECTORY, EmbeddingSpec,
                                         InputSpec, LabelSource, Settings, StoredImages)
from beam_pipeline.core.user_errors import UsageError


class ConversionOptions(PipelineOptions):
  """This tool's options, beside Beam's own."""

  @classmethod
  def _add_argparse_args(cls, parser):
    arguments.add_conversion_options(parser)


class Conversion(NamedTuple):
  """A conversion's command line, parsed and checked."""
  options: PipelineOptions  # Beam's and ours, as the job is built with them
  settings: Settings
  verbose: bool
  json: bool
  progress_interval: float


def parse(argv: List[str], beam_options: Optional[Mapping[str, Any]] = None) -> Conversion:
  """The command line's options, Beam's included, and the checked values of ours; ``beam_options``
  adds Beam's options as Python values (the API's keywords), as PipelineOptions takes them.

  Raises UsageError with one line for anything wrong, and SystemExit(0) after
  printing the help for -h/--help.
  """
  namespace, beam_flags = arguments.parse(argv)
  progress_interval = option_table.BY_NAME['progress_interval'].parse(namespace.progress_interval)
  ours = {name: value for name, value in vars(namespace).items()
          if name != 'command' and name not in arguments.CONSOLE_OPTIONS}
  options = beam_internals.OptionsViewedOnce(beam_flags, **(beam_options or {}), **ours)
  _check_flags(options)
  _check_setup_file(options.view_as(SetupOptions).setup_file)
  _check_credentials(options)
  settings = validate(options)
  if 'dataflow' in (options.view_as(StandardOptions).runner or '').lower():
    _check_dataflow(options, settings)
  return Conversion(options, settings, namespace.verbose, namespace.json, progress_interval)


def _check_flags(options: PipelineOptions) -> None:
  """No flag Beam does not know either, and no label mode in Beam's own --labels (job labels)."""
  # Beam would log 'Discarding unparseable args: [...]' ahead of the one line that names the flag.
  with _warnings_off('apache_beam.options.pipeline_options'):
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


def _check_credentials(options: PipelineOptions) -> None:
  """Google credentials, if any path is on Cloud Storage. Without them Beam's storage client
  retries its credential lookup for minutes, and then says the input does not exist. A dry run
  reads only what the launch checks (the input, the model) and stages or writes nothing, so
  it needs none for --output or Dataflow's locations: it can be tried offline."""
  ours, cloud = options.view_as(ConversionOptions), options.view_as(GoogleCloudOptions)
  flags = (('--input', ours.input), ('--embedding_model', ours.embedding_model))
  if not options.view_as(TestOptions).dry_run:
    flags += (('--output', ours.output), ('--temp_location', cloud.temp_location),
              ('--staging_location', cloud.staging_location))
  remote = [(flag, value) for flag, value in flags if value and value.startswith('gs://')]
  if not remote:
    return
  import google.auth  # pylint: disable=import-outside-toplevel  # only gs:// paths need Google's auth library
  from google.auth import exceptions  # pylint: disable=import-outside-toplevel
  try:
    with _warnings_off('google.auth._default'):  # of a project it cannot tell: not this check's business
      google.auth.default()
  except exceptions.DefaultCredentialsError:
    flag, value = remote[0]
    raise UsageError(f'{flag}={value} is on Cloud Storage, and no Google credentials were found: run '
                     '`gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS to a '
                     'service account key file') from None


@contextlib.contextmanager
def _warnings_off(logger_name: str) -> Iterator[None]:
  """A library logger's warnings kept off the console while the block runs."""
  logger = logging.getLogger(logger_name)
  level = logger.level
  logger.setLevel(logging.ERROR)
  try:
    yield
  finally:
    logger.setLevel(level)


def _check_setup_file(setup_file: Optional[str]) -> None:
  """Beam builds the package of --setup_file with ``python -m build`` run in its folder, where a
  folder named build/ (what setuptools and many Makefiles leave behind) would be imported instead."""
  if not setup_file:
    return
  build = os.path.join(os.path.dirname(os.path.abspath(setup_file)), 'build')
  if os.path.isdir(build) and not os.path.exists(os.path.join(build, '__main__.py')):
    raise UsageError(f'--setup_file={setup_file}: the folder build/ beside it would be run in place of the '
                     "'build' package Beam packages the code with; remove or rename that folder")


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
  """Checks every value (each with its option: core/option_table.py), then what involves several
  options, the input's existence and its kind; raises UsageError with one line."""
  opts = options.view_as(ConversionOptions)
  if not opts.output:
    raise UsageError('--output is required: the directory (local or gs://) to write the dataset to')
  value = {option.name: option.parse(getattr(opts, option.name)) for option in option_table.pipeline_options()}
  if value['index_files'] and value['compression'] != 'none':
    raise UsageError('--index_files needs --compression=none: DALI and the tfrecord package index only '
                     'uncompressed shards')
  if value['rebuild'] and not value['incremental']:
    raise UsageError('--rebuild is for --incremental runs (a run without --incremental converts everything anyway)')
  if value['incremental'] and value['num_shards']:
    raise UsageError('--incremental adds shards as the input grows, so it cannot keep --num_shards; give one of them')
  max_side = value['max_side'] or 0
  if max_side and value['min_side'] > max_side:
    raise UsageError(f'--min_side={value["min_side"]} is larger than --max_side={max_side}: every image would be '
                     'rejected')
  spec = _multi_label(opts, inputs.resolve_input(opts.input or ''))
  annotations = _annotations(opts, spec)
  return Settings(
      input=spec,
      output=opts.output.rstrip('/') or '/',
      label_source=_label_source(opts, spec, annotations),
      schema=value['schema'],
      target_shard_bytes=max(1, int(value['target_shard_mb'] * 2**20)),
      num_shards=value['num_shards'] or 0,
      overwrite=value['overwrite'],
      incremental=value['incremental'],
      rebuild=value['rebuild'],
      compression=value['compression'],
      max_pixels=value['max_pixels'],
      max_file_bytes=max(1, int(value['max_file_mb'] * 2**20)),
      splits=splitting.parse_splits(opts.splits),
      dedupe=value['dedupe'],
      near_copies=value['near_copies'],
      near_distance=value['near_distance'] or 0,
      image_size=value['image_size'],
      skip_transform=value['skip_transform'],
      read_threads=value['read_threads'],
      max_error_fraction=value['max_error_fraction'],
      stored=StoredImages(value['image_format'], value['jpeg_quality'], max_side, value['exif_orientation']),
      embedding=_embedding(value),
      strict_jpeg=value['strict_jpeg'],
      reject_quality=value['reject_quality'] or (),
      min_side=value['min_side'],
      index_files=value['index_files'],
      annotations=annotations,
      drop_unannotated=value['drop_unannotated'],
      include_masks=value['include_masks'],
      run_id=run_lock.new_run_id(time.time()),
      input_root=_input_root(opts.input_root, spec),
  )


def _input_root(value: Optional[str], spec: InputSpec) -> Optional[str]:
  """--input_root, a local folder that exists or a gs:// prefix; a folder or glob --input must lie in
  it (each file is checked again as it is read, links followed: input_root.check)."""
  if not value:
    return None
  root = value.rstrip('/') or '/'
  if not uris.is_remote(root) and not os.path.isdir(root):
    raise UsageError(f'--input_root={value} is not a folder; give the folder every input file must lie in')
  folder = _listed_folder(spec)
  if folder is not None and not input_root.contains(root, folder):
    raise UsageError(f'--input_root={value}: --input={folder} is not in it, so every image would be refused')
  return root


def _listed_folder(spec: InputSpec) -> Optional[str]:
  """The folder a directory or glob --input lists files under (a glob's part before its first
  wildcard); None for a manifest, whose rows may name files anywhere."""
  if spec.is_manifest:
    return None
  if spec.kind == DIRECTORY:  # 'Photos [2023]/**' is a folder, brackets and all
    return spec.path[:-len('/**')] or '/'
  wildcard = re.search(r'[*?[]', spec.path)
  folder = spec.path[:spec.path.rfind('/', 0, wildcard.start()) + 1] if wildcard else spec.path
  return folder.rstrip('/') or ('/' if folder.startswith('/') else '.')


def _multi_label(opts: ConversionOptions, spec: InputSpec) -> InputSpec:
  """The input, reading several labels a row under --multi_label, which only a manifest's rows
  give, in the default schema (its label text is a list beside the ids)."""
  if not opts.multi_label:
    return spec
  if not spec.is_manifest:
    raise UsageError('--multi_label reads several labels per row of a CSV or JSONL manifest; give one as --input')
  if opts.schema != 'default':
    raise UsageError('--multi_label writes its labels in --schema=default\'s keys (image/class/label and /text)')
  return spec._replace(multi_label=True)


def _label_source(opts: ConversionOptions, spec: InputSpec, annotations: Optional[str]) -> LabelSource:
  """--label_source; with --annotations images have no label of their own unless it says so:
  their objects are labelled, and a folder's name would be one more class."""
  if annotations and opts.label_source is None:
    return LabelSource(labels.NONE)
  return labels.parse_label_source(opts.label_source, spec.is_manifest)


def _check_detection_schema(opts: ConversionOptions) -> None:
  if opts.schema != 'default':
    raise UsageError('boxes are written in the Object Detection API\'s keys, which only --schema=default has')


def _annotations(opts: ConversionOptions, spec: InputSpec) -> Optional[str]:
  """Where the boxes come from: --annotations, checked (it exists, is COCO or VOC, and --input is
  the folder its names are relative to), or an AutoML object-detection CSV as --input."""
  if inputs.is_detection_csv(spec):
    if opts.include_masks:
      raise UsageError('--include_masks draws COCO segmentations; an AutoML detection CSV has none')
    if opts.annotations:
      raise UsageError(f'--input={spec.path} is an AutoML object-detection CSV, which holds the boxes itself; '
                       f'leave out --annotations')
    _check_detection_schema(opts)
    return spec.path
  if not opts.annotations:
    for flag, value in (('--drop_unannotated', opts.drop_unannotated), ('--include_masks', opts.include_masks)):
      if value:
        raise UsageError(f'{flag} needs --annotations, the COCO or Pascal VOC file(s) that give the images\' objects')
    return None
  path = opts.annotations.rstrip('/') or '/'
  if spec.kind != DIRECTORY:
    raise UsageError(f'--annotations names images relative to a folder: give that folder as --input (not a '
                     f'{spec.kind})')
  _check_detection_schema(opts)
  if not (FileSystems.exists(path) or FileSystems.match([path + '/*'], limits=[1])[0].metadata_list):
    raise UsageError(f'--annotations={path} does not exist; give a COCO .json file or a folder of VOC .xml files')
  try:
    kind = annotation_inputs.annotation_format(path)
  except ValueError as e:
    raise UsageError(f'--annotations={path}: {e}') from None
  if opts.include_masks and kind != annotations_format.COCO:
    raise UsageError(f'--include_masks draws COCO segmentations; --annotations={path} is Pascal VOC, which has none')
  if kind == annotations_format.COCO:
    annotation_inputs.check_coco(path)
  return path


def _embedding(value: Dict[str, Any]) -> Optional[EmbeddingSpec]:
  """The embedding options; the model itself is checked by the launcher (launch._check_model), which loads it."""
  if not value['embedding_model']:
    if value['embedding_only']:
      raise UsageError('--embedding_only needs --embedding_model, the model whose embeddings to store')
    return None
  return EmbeddingSpec(value['embedding_model'].rstrip('/') or '/', value['embedding_image_size'],
                       value['embedding_only'], value['embedding_batch_size'])
