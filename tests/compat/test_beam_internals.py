"""Beam's internals as compat/beam_internals.py uses them: each fails here, loudly, when an
upgrade of Beam moves it, and the fallbacks are Beam's public behaviour."""
import inspect
import os
import pickle

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import worker_handlers
from apache_beam.runners.portability.fn_api_runner.fn_runner import FnApiRunner
from apache_beam.runners.worker import statecache, statesampler
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.utils import counters
from google.protobuf import json_format

from beam_pipeline.compat import beam_internals

from helpers import gcs_emulator


def test_the_runner_is_the_fn_api_runner_with_the_options():
  """The options reach the runner's SDK workers as DirectRunner sends them."""
  runner = beam_internals.fn_api_runner(PipelineOptions(['--direct_running_mode=multi_processing']))
  assert isinstance(runner, FnApiRunner)
  provision_info = runner._provision_info  # pylint: disable=protected-access
  sent = json_format.MessageToDict(provision_info.provision_info.pipeline_options)
  assert sent['beam:option:direct_running_mode:v1'] == 'multi_processing'


def _sampler() -> statesampler.StateSampler:
  return statesampler.StateSampler('step', counters.CounterFactory())


def test_samplers_sleep_briefly_while_the_runner_runs_and_as_beam_says_after():
  """A bundle's end waits out its sampler's sleep, so the in-process runner keeps it short
  while it runs; fails if Beam stops making samplers with its default period."""
  assert list(inspect.signature(statesampler.StateSampler).parameters) == [
      'prefix', 'counter_factory', 'sampling_period_ms']
  default = statesampler.DEFAULT_SAMPLING_PERIOD_MS
  with beam_internals.sampling_period(beam_internals.SAMPLING_PERIOD_MS):
    sampler = _sampler()
    assert sampler.sampling_period_ms == beam_internals.SAMPLING_PERIOD_MS < default
    sampler.start()
    with sampler.scoped_state('step', 'process'):
      pass
    sampler.stop()
    assert sampler.finished
  assert _sampler().sampling_period_ms == default


def test_the_runner_sets_the_period_for_its_run_only():
  with beam.Pipeline(runner=beam_internals.fn_api_runner(PipelineOptions([]))) as p:
    periods = p | beam.Create([0]) | beam.Map(lambda _: _sampler().sampling_period_ms)
    assert_that(periods, equal_to([beam_internals.SAMPLING_PERIOD_MS]))
  assert _sampler().sampling_period_ms == statesampler.DEFAULT_SAMPLING_PERIOD_MS


def test_the_runner_weighs_no_side_input_and_beam_s_cache_size_is_back_after(monkeypatch):
  """The embedded worker's state cache weighs what it keeps object by object: every record of
  the in-memory planner's side input. Fails if Beam's runner starts caching again."""
  weighed = []
  monkeypatch.setattr(statecache, 'get_deep_size', lambda *values: weighed.append(values) or 8)
  with beam.Pipeline(runner=beam_internals.fn_api_runner(PipelineOptions([]))) as p:
    values = p | 'Values' >> beam.Create(range(100))
    sums = p | beam.Create([0]) | beam.Map(lambda _, every: sum(every), beam.pvalue.AsList(values))
    assert_that(sums, equal_to([4950]))
  assert not weighed
  assert worker_handlers.STATE_CACHE_SIZE_MB == 100
  with beam.Pipeline(runner=FnApiRunner()) as p:  # Beam's own, its cache as Beam sizes it
    values = p | 'Values' >> beam.Create(range(100))
    _ = p | beam.Create([0]) | beam.Map(lambda _, every: sum(every), beam.pvalue.AsList(values))
  assert weighed, 'Beam no longer weighs side inputs: no_state_cache can go'


class _Text(beam_internals.StreamCoder):

  def encode_bytes(self, value):
    return value.encode('utf-8')

  def decode_bytes(self, data):
    return data.decode('utf-8')

  def estimated_bytes(self, value):
    return 7


def test_a_stream_coder_encodes_nested_and_unnested_and_estimates_without_encoding():
  coder = pickle.loads(pickle.dumps(_Text()))
  assert coder.decode(coder.encode('héllo')) == 'héllo'
  impl = coder.get_impl()
  assert impl.decode_nested(impl.encode_nested('a') + b'rest') == 'a'
  assert coder.estimate_size('anything at all') == 7
  kv = beam.coders.TupleCoder([coder, coder])
  assert kv.decode(kv.encode(('x', 'yz'))) == ('x', 'yz')


def test_the_storage_client_is_gcsios_own(tmp_path):
  from google.cloud import storage  # pylint: disable=import-outside-toplevel
  with gcs_emulator.serving(str(tmp_path), ('bucket',)):
    gcs_emulator.upload('bucket', {'a/1.jpg': b'1'})
    client = beam_internals.storage_client()
    assert isinstance(client, storage.Client)
    assert [blob.name for blob in client.list_blobs('bucket')] == ['a/1.jpg']


def test_the_stagers_package_build_goes_through_the_given_function_while_the_block_runs(tmp_path):
  from apache_beam.runners.portability.stager import Stager  # pylint: disable=import-outside-toplevel
  (tmp_path / 'setup.py').write_text("import setuptools\nsetuptools.setup(name='tiny', version='1.0', py_modules=[])\n")
  calls = []

  def around(build):
    calls.append('before')
    path = build()
    calls.append(os.path.basename(path))
    return path

  original = Stager._build_setup_package  # pylint: disable=protected-access
  with beam_internals.package_build_around(around):
    Stager._build_setup_package(str(tmp_path / 'setup.py'), str(tmp_path / 'dist'))  # pylint: disable=protected-access
  assert calls == ['before', 'tiny-1.0.tar.gz']
  assert Stager._build_setup_package is original  # pylint: disable=protected-access


def test_options_viewed_once_keep_one_view_per_class_and_read_as_beams():
  """The views are kept, share the values with every other view, and leave the options' pickle
  and every value as Beam's own options would have them."""
  from apache_beam.options.pipeline_options import StandardOptions, TypeOptions  # pylint: disable=import-outside-toplevel
  flags = ['--runner=DirectRunner', '--direct_num_workers=2']
  options = beam_internals.OptionsViewedOnce(flags, job_name='kept')
  plain = PipelineOptions(flags, job_name='kept')
  assert options.view_as(TypeOptions) is options.view_as(TypeOptions)
  assert options.get_all_options() == plain.get_all_options()
  options.view_as(StandardOptions).runner = 'FnApiRunner'
  assert options.view_as(StandardOptions).runner == 'FnApiRunner'
  assert options.get_all_options()['runner'] == 'FnApiRunner'
  again = pickle.loads(pickle.dumps(options))
  assert '_views' not in again.__dict__
  assert again.get_all_options() == options.get_all_options()


def test_a_graph_is_built_with_one_view_of_the_type_options():
  """Beam's type checks ask the pipeline's options for TypeOptions at each check; with
  OptionsViewedOnce they are made once, however many transforms the graph has."""
  from apache_beam.options.pipeline_options import TypeOptions  # pylint: disable=import-outside-toplevel
  options = beam_internals.OptionsViewedOnce([])
  made = []
  original = TypeOptions.__init__

  def counted(self, *args, **kwargs):
    made.append(1)
    original(self, *args, **kwargs)
  TypeOptions.__init__ = counted
  try:
    pipeline = beam.Pipeline(options=options)
    numbers = pipeline | beam.Create([1, 2, 3])
    for step in range(20):
      numbers = numbers | f'Add{step}' >> beam.Map(lambda n: n + 1).with_output_types(int)
  finally:
    TypeOptions.__init__ = original
  assert len(made) <= 1


def test_each_dofn_is_looked_at_once_while_specs_are_kept():
  """Beam asks for a DoFn's state and timer specs as each ParDo is made and translated; inside
  dofn_specs_kept each DoFn's methods are looked at once, with the same answer, and Beam's own
  look is back afterwards."""
  from apache_beam.transforms import userstate  # pylint: disable=import-outside-toplevel
  original = userstate.get_dofn_specs
  looked = []

  def counted(dofn):
    looked.append(dofn)
    return original(dofn)

  def build_and_translate() -> None:
    pipeline = beam.Pipeline()
    numbers = pipeline | beam.Create([1, 2, 3])
    for step in range(10):
      numbers = numbers | f'Add{step}' >> beam.Map(lambda n: n + 1)
    pipeline.to_runner_api()

  userstate.get_dofn_specs = counted
  try:
    build_and_translate()
    asked = len(looked)
    looked.clear()
    with beam_internals.dofn_specs_kept():
      build_and_translate()
      assert userstate.get_dofn_specs is not counted
    assert userstate.get_dofn_specs is counted
  finally:
    userstate.get_dofn_specs = original
  assert asked > len(looked) == len({id(dofn) for dofn in looked})
  dofn = beam.Map(lambda n: n).fn
  with beam_internals.dofn_specs_kept():
    assert userstate.get_dofn_specs(dofn) == original(dofn) == userstate.get_dofn_specs(dofn)
