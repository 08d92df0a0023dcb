import pytest
from apache_beam.options.pipeline_options import GoogleCloudOptions, StandardOptions

from beam_pipeline.cli import arguments, options
from beam_pipeline.cli.options import ConversionOptions
from beam_pipeline.core.user_errors import UsageError


@pytest.fixture
def images(tmp_path):
  (tmp_path / 'cat').mkdir()
  (tmp_path / 'cat' / '1.jpg').write_bytes(b'x')
  return tmp_path


def test_defaults(images, tmp_path):
  settings = options.parse([f'--input={images}', f'--output={tmp_path}/out']).settings
  assert settings.target_shard_bytes == 150 * 2**20 and settings.compression == 'none'
  assert settings.schema == 'default' and settings.label_source.kind == 'parent_dir'


def test_ours_and_beams_flags_are_parsed_once_into_one_pipeline_options(images, tmp_path):
  """Our flags by argparse, the rest by Beam: both end up in the PipelineOptions the job
  is built with (and that Dataflow would serialize)."""
  beam_options, settings, *_ = options.parse([
      '--runner', 'DataflowRunner', f'--input={images}', '--output', f'{tmp_path}/out', '--label_source=none',
      '--labels=team=ml', '--labels', 'airflow-version=3', '--dedupe', '--project=p', '--region=r',
      '--temp_location=gs://b/tmp'])
  assert beam_options.view_as(StandardOptions).runner == 'DataflowRunner'
  assert beam_options.view_as(GoogleCloudOptions).labels == ['team=ml', 'airflow-version=3']
  assert beam_options.view_as(ConversionOptions).label_source == 'none'
  assert beam_options.get_all_options(drop_default=True)['dedupe'] is True
  assert settings.label_source.kind == 'none' and settings.dedupe and settings.output == f'{tmp_path}/out'


@pytest.mark.parametrize('rest, strays', [
    (['photos/cat/2.jpg', 'photos/dog/3.jpg'], ['photos/cat/2.jpg', 'photos/dog/3.jpg']),  # after --input's value
    (['--direct_num_workers', '2', '--labels', 'team=ml'], []),  # Beam's flags and their values
    (['--direct_num_workers=2', 'photos/cat/2.jpg'], ['photos/cat/2.jpg']),
    (['--experiments', 'a', 'b'], ['b']),
    (['--', 'after'], []),
])
def test_a_word_no_flag_takes_is_a_stray(rest, strays):
  assert arguments.stray_arguments(rest) == strays


def test_a_label_mode_given_to_beams_labels_flag_says_where_it_went(images, tmp_path):
  with pytest.raises(UsageError, match='--labels=parent_dir sets a Dataflow job label.*--label_source=parent_dir'):
    options.parse([f'--input={images}', f'--output={tmp_path}/out', '--labels=parent_dir'])


@pytest.mark.parametrize('flag, message', [
    ('--schema=tfds', '--schema=tfds is not one of'),
    ('--compression=zstd', '--compression=zstd is not one of'),
    ('--target_shard_mb=abc', 'is not a number'),
    ('--target_shard_mb=-1', 'must be a positive number'),
    ('--num_shards=-1', '--num_shards=-1 must be a positive number'),
    ('--num_shards=2.5', '--num_shards=2.5 must be a whole number'),
    ('--num_shards=many', '--num_shards=many is not a number'),
    ('--max_pixels=0', 'must be a positive number'),
    ('--max_pixels=0.5', 'must be a whole number'),
    ('--max_pixels=1e19', 'is too large'),
    ('--read_threads=0.5', 'must be a whole number'),
    ('--progress_interval=0', '--progress_interval=0 must be a positive number'),
    ('--progress_interval=-1', 'must be a positive number'),
    ('--max_error_fraction=1.5', 'must be between 0 and 1'),
    ('--max_error_fraction=x', 'is not a number'),
    ('--image_size=2.5', 'must be a whole number'),
    ('--image_format=webp', '--image_format=webp is not one of original, jpeg, png'),
    ('--jpeg_quality=101', 'must be at most 100'),
    ('--max_side=0', 'must be a positive number'),
    ('--min_side=0', 'must be a positive number'),
    ('--index_files --compression=gzip', '--index_files needs --compression=none'),
    ('--min_side=600 --max_side=512', '--min_side=600 is larger than --max_side=512'),
    ('--target_shard_mbb=10', 'unknown option --target_shard_mbb; did you mean --target_shard_mb?'),
    ('--inp=x', 'unknown option --inp'),
    ('--label_source=regex:nogroup', 'exactly one capture group'),
    ('--output', 'expected one argument'),
])
def test_bad_values_fail_with_one_line(images, tmp_path, flag, message):
  with pytest.raises(UsageError) as raised:
    options.parse([f'--input={images}', f'--output={tmp_path}/out', *flag.split()])
  assert message in str(raised.value) and '\n' not in str(raised.value)


def test_num_shards_zero_or_absent_plans_by_size(images, tmp_path):
  for given, expected in (([], 0), (['--num_shards=0'], 0), (['--num_shards=12'], 12)):
    settings = options.parse([f'--input={images}', f'--output={tmp_path}/out', *given]).settings
    assert settings.num_shards == expected
    assert settings.as_dict().get('num_shards') == (expected or None)


def test_output_is_required(images):
  with pytest.raises(UsageError, match='--output is required'):
    options.parse([f'--input={images}'])


def test_help_lists_our_options(capsys):
  with pytest.raises(SystemExit) as exited:
    options.parse(['--help'])
  assert exited.value.code == 0
  text = capsys.readouterr().out
  for flag in ('--input', '--output', '--label_source', '--target_shard_mb', '--schema', '--compression'):
    assert flag in text


def test_a_build_folder_beside_the_setup_file_is_refused_before_beam_runs_into_it(images, tmp_path):
  """Beam packages --setup_file's code with `python -m build`, run in the setup file's folder,
  where a build/ folder is imported instead ('No module named build.__main__')."""
  project = tmp_path / 'project'
  (project / 'build').mkdir(parents=True)
  (project / 'setup.py').write_text('')
  argv = [f'--input={images}', f'--output={tmp_path}/out', f'--setup_file={project}/setup.py']
  with pytest.raises(UsageError, match=rf'^--setup_file={project}/setup.py: the folder build/ beside it would be run'):
    options.parse(argv)
  (project / 'build').rmdir()
  assert options.parse(argv).settings.output == f'{tmp_path}/out'
