"""Apache Beam internals: the in-process runner the DirectRunner falls back to, the period
of its step-time samplers, the size of its state cache, the base of a fast coder, the storage
client of its gcsio, the step of its stager that builds --setup_file's package, the views of
its pipeline options and its look at each DoFn's methods.

Checked with apache-beam 2.77.0 (requirements.txt pins it).
"""
import contextlib
import weakref
from typing import Any, Callable, Iterator, Optional

from apache_beam.coders import coder_impl
from apache_beam.coders.coders import FastCoder
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.runner import PipelineRunner

CHECKED_WITH = 'apache-beam 2.77.0'


class OptionsViewedOnce(PipelineOptions):
  """PipelineOptions whose view of each options class (view_as) is made once and kept.

  While a graph is built, Beam's type checks read TypeOptions from the pipeline's options at
  every check (typehints.is_consistent_with), and each view_as builds an argparse parser of
  all its class's options and parses the flags again: some 1,400 times for an update's graph,
  more than the rest of its building. A view holds no values of its own (they live in the
  options' ``_all_options``, which every view shares), so one view per class reads and writes
  what one per call would.
  """

  def view_as(self, cls):
    views = self.__dict__.setdefault('_views', {})  # not by attribute: __setattr__ takes option names only
    if cls not in views:
      views[cls] = super().view_as(cls)
    return views[cls]

  def __getstate__(self):
    state = dict(super().__getstate__())
    state.pop('_views', None)  # made again where unpickled
    return state


def fn_api_runner(options: PipelineOptions) -> Optional[PipelineRunner]:
  """Beam's FnApiRunner set up as DirectRunner sets it up (its options reach multi-process SDK
  workers), its step-time samplers sleeping at most SAMPLING_PERIOD_MS while it runs; None
  (Beam picks the DirectRunner itself, Prism first) if Beam no longer has these names.

  DirectRunner offers no public way to skip its Prism attempt (local_runner.py says why
  it is skipped); its own fallback builds the runner with FnApiRunner's
  ``ExtendedProvisionInfo`` and the job service's ``encode_pipeline_options``.
  """
  try:
    from apache_beam.portability.api import beam_provision_api_pb2  # pylint: disable=import-outside-toplevel
    from apache_beam.runners.portability.fn_api_runner import fn_runner  # pylint: disable=import-outside-toplevel
    from apache_beam.runners.portability import portable_runner  # pylint: disable=import-outside-toplevel
    encoded = portable_runner.JobServiceHandle.encode_pipeline_options(options.get_all_options())
    provision_info = fn_runner.ExtendedProvisionInfo(beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded))
  except (ImportError, AttributeError):
    return None

  class _PromptRunner(fn_runner.FnApiRunner):
    """The FnApiRunner, its samplers prompt and its side inputs unweighed for as long as it runs a pipeline."""

    def run_pipeline(self, pipeline, options):
      with sampling_period(SAMPLING_PERIOD_MS), no_state_cache():
        return super().run_pipeline(pipeline, options)

  return _PromptRunner(provision_info=provision_info)


# The longest a step-time sampler of the in-process runner sleeps (Beam's default: 200).
SAMPLING_PERIOD_MS = 10


@contextlib.contextmanager
def sampling_period(period_ms: int) -> Iterator[None]:
  """Makes the step-time samplers made meanwhile in this process sleep ``period_ms`` at most;
  Beam's default is back on the way out.

  Each bundle's StateSampler measures its steps on a thread whose sleeps grow to the
  sampling period, and the bundle's end joins that thread, waiting out its sleep: after
  a long bundle the runner would sit idle for up to 200 ms, and the local workers with
  it. Beam has no option for the period (bundle_processor makes each sampler with the
  default argument of ``StateSampler.__init__``), so this sets that default. Left as
  it is, and the run only slower, if the default is no longer Beam's.
  """
  from apache_beam.runners.worker import statesampler  # pylint: disable=import-outside-toplevel
  init = statesampler.StateSampler.__init__
  defaults = init.__defaults__ or ()
  default = getattr(statesampler, 'DEFAULT_SAMPLING_PERIOD_MS', None)
  init.__defaults__ = tuple(period_ms if value == default else value for value in defaults)
  try:
    yield
  finally:
    init.__defaults__ = defaults


@contextlib.contextmanager
def dofn_specs_kept() -> Iterator[None]:
  """Makes Beam look at each DoFn's methods once while the block runs, not at every step that
  asks; Beam's own look is back on the way out.

  ``userstate.get_dofn_specs`` (a DoFn's state and timer parameters) wraps every method of
  the DoFn and takes its signature, and Beam asks it several times for each ParDo: as it is
  made, translated and made a runner for. An update's graph asked some 800 times, 25,000
  signatures, about 0.2 s of its start. A DoFn's methods do not change once it is made, so
  what one look found is kept for as long as the DoFn lives. Left as it is, and the start
  only slower, if Beam no longer has the name.
  """
  from apache_beam.transforms import userstate  # pylint: disable=import-outside-toplevel
  looked = getattr(userstate, 'get_dofn_specs', None)
  if looked is None:
    yield
    return
  found = weakref.WeakKeyDictionary()

  def kept(dofn):
    try:
      return found[dofn]
    except (KeyError, TypeError):  # TypeError: a DoFn that cannot be weakly referenced
      specs = looked(dofn)
      with contextlib.suppress(TypeError):
        found[dofn] = specs
      return specs

  userstate.get_dofn_specs = kept
  try:
    yield
  finally:
    userstate.get_dofn_specs = looked


@contextlib.contextmanager
def no_state_cache() -> Iterator[None]:
  """Makes the in-process runner's embedded worker made meanwhile keep no state cache; Beam's
  size is back on the way out.

  The cache keeps each side input a bundle reads, and weighs it first, object by object
  (``statecache.get_deep_size``): for the in-memory planner's side input of every validated
  record, a walk through every field of every record while the pool's workers wait, the
  longer the larger the input, for a cache of 100 MB that a large input outgrows anyway.
  Without it, a bundle reads each side input from the runner's own buffers, as Beam does
  whenever caching is off. The embedded worker reads the module's ``STATE_CACHE_SIZE_MB`` when
  it is made (Beam's options size only other workers' caches). Left as it is, and the run
  only slower, if Beam no longer has the name.
  """
  from apache_beam.runners.portability.fn_api_runner import worker_handlers  # pylint: disable=import-outside-toplevel
  size = getattr(worker_handlers, 'STATE_CACHE_SIZE_MB', None)
  if size is None:
    yield
    return
  worker_handlers.STATE_CACHE_SIZE_MB = 0
  try:
    yield
  finally:
    worker_handlers.STATE_CACHE_SIZE_MB = size


class StreamCoder(FastCoder):
  """A Beam coder whose subclasses say how to encode a value to bytes, decode it, and estimate
  its encoded size, each in one call.

  Beam's public ``Coder`` base encodes through several Python calls per value and measures
  sizes by encoding a second time; its fast path is a ``StreamCoderImpl`` that a
  ``FastCoder`` returns from the internal ``_create_impl``, as Beam's own coders do.
  """

  def encode_bytes(self, value: Any) -> bytes:
    raise NotImplementedError

  def decode_bytes(self, data: bytes) -> Any:
    raise NotImplementedError

  def estimated_bytes(self, value: Any) -> int:
    raise NotImplementedError

  def _create_impl(self) -> coder_impl.CoderImpl:
    return _StreamImpl(self.encode_bytes, self.decode_bytes, self.estimated_bytes)


class _StreamImpl(coder_impl.StreamCoderImpl):

  def __init__(self, encode: Callable[[Any], bytes], decode: Callable[[bytes], Any], estimate: Callable[[Any], int]):
    self._encode, self._decode, self._estimate = encode, decode, estimate

  def encode_to_stream(self, value: Any, stream, nested: bool) -> None:
    stream.write(self._encode(value), nested)

  def decode_from_stream(self, stream, nested: bool) -> Any:
    return self._decode(stream.read_all(nested))

  def estimate_size(self, value: Any, nested: bool = False) -> int:
    return self._estimate(value)


def storage_client() -> Any:
  """The google-cloud-storage Client that Beam's gcsio makes, with the pipeline's credentials
  and endpoint, for listings FileSystems does not offer (pipeline/listing/object_listing.py). gcsio
  documents no accessor; ``GcsIO().client`` is the attribute its own methods use. Without
  it, a client of google-cloud-storage's own, with the default credentials."""
  from apache_beam.io.gcp import gcsio  # pylint: disable=import-outside-toplevel  # only gs:// needs Google's clients
  client = getattr(gcsio.GcsIO(), 'client', None)
  if client is None:
    from google.cloud import storage  # pylint: disable=import-outside-toplevel
    client = storage.Client()
  return client


@contextlib.contextmanager
def package_build_around(around: Callable[[Callable[[], str]], str]) -> Iterator[None]:
  """Makes Beam's stager build --setup_file's package through ``around(build)`` while the block
  runs (``build()`` builds it and returns the file's path), as before on the way out.

  The stager (``Stager._build_setup_package``, a staticmethod) runs ``python -m build
  --no-isolation --sdist``, or, failing that, ``setup.py sdist``, with the command's own
  standard error: what they print (build's "* Building sdist...", or "No module named
  build") lands among the command's lines. Beam has no option for it. Left as it is if
  Beam no longer has the method.
  """
  try:
    from apache_beam.runners.portability.stager import Stager  # pylint: disable=import-outside-toplevel
    original = Stager.__dict__['_build_setup_package']
  except (ImportError, KeyError):
    yield
    return

  def build_around(*args, **kwargs) -> str:
    return around(lambda: original.__func__(*args, **kwargs))

  Stager._build_setup_package = staticmethod(build_around)  # pylint: disable=protected-access
  try:
    yield
  finally:
    Stager._build_setup_package = original  # pylint: disable=protected-access
