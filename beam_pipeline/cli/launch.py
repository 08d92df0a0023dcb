"""``python -m beam_pipeline [options]``: check everything, run the pipeline, say what was written."""
import contextlib
import gc
import json
import logging
import sys
import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, NamedTuple, Optional

from beam_pipeline.core.console import quiet_import

# Beam's type hints import pandas if they can, only to register DataFrame batch
# converters. Nothing here uses DataFrames, and pandas is a quarter of Beam's
# import, paid at start while the workers' forkserver imports TensorFlow on the
# other core. So the command's first import of Beam leaves pandas out; it imports
# as usual afterwards.
with quiet_import.left_out(('pandas',)):
  import apache_beam as beam  # pylint: disable=wrong-import-position
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions, StandardOptions, TestOptions
from apache_beam.runners.runner import PipelineResult, PipelineState

from beam_pipeline.pipeline import dry_run, graph, incremental, local_runner, model_files
from beam_pipeline.pipeline.output import output_dir
from beam_pipeline.pipeline.listing import inputs, parts
from beam_pipeline.cli import failures, interrupts, options as options_lib, progress
from beam_pipeline.compat import beam_internals
from beam_pipeline.core import steps
from beam_pipeline.core.console import native_output, progress_counts
from beam_pipeline.core.console.quantities import counted
from beam_pipeline.core.images import perceptual_hash
from beam_pipeline.core.output import catalog_lookup, earlier_input, incremental_update, run_lock
from beam_pipeline.core.output.run_record import RunRecord
from beam_pipeline.inspection import summary
from beam_pipeline.core.settings import Settings
from beam_pipeline.core.rejections import DamagedOutput
from beam_pipeline.core.user_errors import ConversionError, ModelError, UsageError
from beam_pipeline.local import workers

# What Beam's Dataflow client logs at INFO that a user must see, and Airflow's Beam
# operator reads the job id from; its other INFO lines (staging, the whole job
# request) are chatter.
_SUBMISSION_LINES = ('Created job with id:', 'Submitted job:', 'To access the Dataflow monitoring console',
                     'A template was just created')


class Outcome(NamedTuple):
  """How a conversion that did not fail ended: with what it wrote (``summary``, as
  inspection/summary.of gives it), or at submission, with the line that says so (``said``)."""
  summary: Optional[Dict[str, Any]]
  said: Optional[str]
  json: bool  # --json: the command prints the summary as JSON
  interrupted_during_commit: bool  # Ctrl-C came during the commit, which was let finish


def convert(argv: List[str], started: float) -> int:
  """Runs the conversion the command line asks for and says what it wrote; returns the exit code
  (2: a bad option). ``started`` (time.monotonic()) is when the command started, for the
  summary's wall time."""
  try:
    outcome = run(argv, started)
  except ConversionError as e:
    print('\n'.join(e.lines()), file=sys.stderr)
    return e.exit_code
  except SystemExit as e:  # --help, printed
    return e.code or 0
  if outcome.summary is None:
    print(outcome.said)
    return 0
  print(json.dumps(outcome.summary, indent=2) if outcome.json else '\n'.join(summary.lines(outcome.summary)))
  if outcome.interrupted_during_commit:
    print('\n'.join(interrupted_during_commit(outcome.summary['output']).lines()), file=sys.stderr)
    return interrupts.EXIT_CODE
  return 0


def run(argv: List[str], started: float, beam_options: Optional[Mapping[str, Any]] = None) -> Outcome:
  """Runs the conversion ``argv`` asks for (``beam_options``: more of Beam's options, as Python
  values); raises ConversionError with what the command says for a bad option, a failed or
  interrupted run, and SystemExit after printing the help for --help."""
  # ``held``: the output's lock, a local copy of a remote --embedding_model, for the run.
  with interrupts.handled(output_dir.COMMIT_GATE) as ctrl_c, contextlib.ExitStack() as held:
    try:
      return _convert(argv, started, held, ctrl_c, beam_options or {})
    except KeyboardInterrupt:
      workers.shutdown()
      workers.stop_forkserver()
      raise ConversionError('interrupted (Ctrl-C) before the run started; nothing was written',
                            interrupts.EXIT_CODE) from None


def interrupted_during_commit(output: str) -> ConversionError:
  """What the command says after the summary when Ctrl-C came during the commit."""
  return ConversionError(f'interrupted (Ctrl-C) during the commit, which was let finish: --output={output} holds '
                         'the new complete dataset', interrupts.EXIT_CODE)


def _convert(argv: List[str], started: float, held: contextlib.ExitStack, ctrl_c: interrupts.Interrupts,
             beam_options: Mapping[str, Any]) -> Outcome:
  """The conversion of ``run``, inside its Ctrl-C handling: options checked, output claimed, pipeline run and read back.

  Args:
    argv: the command line, without the program's name.
    started: when the command started (time.monotonic()), for the summary's wall time.
    held: takes what must last as long as the run: the output's lock, a remote model's local copy.
    ctrl_c: what Ctrl-C did: a failure it caused is reported as an interrupt, and one during the commit after the
      summary.
    beam_options: more of Beam's options, as Python values (beam_pipeline.convert's).
  """
  try:
    conversion = options_lib.parse(argv, beam_options)
    options, settings = conversion.options, conversion.settings
    in_process = local_runner.runs_in_process(options)
    if not in_process:  # the workers' forkserver would import TensorFlow for nothing (and beside the model check)
      workers.stop_forkserver()
    _say_which_splits_win(options, settings)
    earlier = None
    if not _translates_only(options):  # a dry run or a template leaves the output as it is
      lock = held.enter_context(output_dir.claim(
          settings.output, settings.run_id, run_lock.LAUNCHER if local_runner.is_direct(options) else run_lock.JOB))
      earlier = output_dir.earlier_record(settings.output)
      earlier_input.check(earlier, settings)  # under the lock
    if settings.embedding:
      settings = _check_model(settings, in_process, held)
    decision = _incremental(earlier, settings)
    unchanged = _nothing_changed(earlier, settings, options, decision, in_process)
  except UsageError as e:
    workers.shutdown()
    workers.stop_forkserver()  # a bad option: no run, no workers
    raise ConversionError(str(e), 2) from None
  except SystemExit:  # --help, printed
    workers.stop_forkserver()
    raise
  if unchanged:
    parts.forget_listing(settings.run_id)
    workers.stop_forkserver()
    return Outcome(None, unchanged, conversion.json, False)
  if in_process:
    workers.start()
  if conversion.verbose:
    logging.getLogger('apache_beam').setLevel(logging.INFO)
  elif not local_runner.is_direct(options):
    _show_job_submission()
  runner = options.view_as(StandardOptions).runner or 'DirectRunner'
  shown = _progress_shown(options, in_process, conversion.progress_interval, conversion.json)
  log = None if conversion.verbose else failures.RunLog()
  state = None
  try:
    held.enter_context(beam_internals.dofn_specs_kept())  # as the graph is built, translated and run
    with _long_lived_objects():
      pipeline = beam.Pipeline(runner=local_runner.runner_for(options), options=options)
      graph.build(pipeline, settings, runner, pooled=in_process, decision=decision)
    with shown, failures.kept(log) if log else contextlib.nullcontext(), \
        beam_internals.package_build_around(_quiet_package_build):
      result = pipeline.run()
      done = _submitted(result, options)
      if done is not None:
        if not _translates_only(options):  # submitted without waiting: the job holds the lock now
          lock.hand_over(getattr(result, 'job_id', lambda: None)())
        return Outcome(None, done, conversion.json, False)
      state = result.wait_until_finish()
  except (Exception, KeyboardInterrupt) as e:  # pylint: disable=broad-except  # runners wrap worker errors
    if ctrl_c.seen:  # however the runner wrapped it
      raise failures.interrupted(settings.output, options) from None
    if isinstance(e, KeyboardInterrupt):
      raise
    raise failures.explain(e, settings.output, settings.run_id, log) from None
  finally:
    gc.unfreeze()
    parts.forget_listing(settings.run_id)
    if state == PipelineState.DONE:
      workers.release()  # for the next run of this process, if any
    else:
      workers.shutdown()
  if state != PipelineState.DONE:
    raise ConversionError(f'the pipeline ended in state {state}', 1)
  info = RunRecord.read(settings.output, FileSystems.exists, FileSystems.open)
  if decision.updates and info == earlier:  # the update found nothing changed and committed nothing
    return Outcome(None, _unchanged_line(earlier, settings), conversion.json, False)
  wrote = summary.of(info, settings.output, time.monotonic() - started)
  return Outcome(wrote, None, conversion.json, ctrl_c.during_commit)


@contextlib.contextmanager
def _progress_shown(options: PipelineOptions, in_process: bool, interval: float, json_summary: bool) -> Iterator[None]:
  """Shows a local run's progress while the block runs: counted in this process, or summed
  from Beam's SDK worker processes; a Dataflow run shows none.

  Args:
    options: the run's pipeline options, which tell a local run in Beam's SDK worker processes from a Dataflow job.
    in_process: whether the DoFns run in this process, which then keeps the counts itself.
    interval: --progress_interval: seconds between progress lines where standard error is no terminal.
    json_summary: --json: standard output holds the JSON summary alone, so progress goes to standard error.
  """
  with contextlib.ExitStack() as stack:
    if in_process:
      counter = None
    elif local_runner.runs_in_sdk_workers(options):
      counter = stack.enter_context(progress_counts.gathered())
    else:
      yield
      return
    console = stack.enter_context(progress.console(json_summary))
    stack.enter_context(progress.shown(console, interval, counter))
    yield


def _incremental(earlier: Optional[RunRecord], settings: Settings) -> incremental_update.Decision:
  """What an --incremental run does with the output's dataset (``earlier``'s); one line when it
  converts everything where an update was asked for."""
  if not settings.incremental:
    return incremental_update.Decision()
  decision = incremental_update.decide(earlier, settings, perceptual_hash.NAME)
  if decision.full_conversion and earlier is not None:
    print(f'--incremental: converting everything, since {decision.full_conversion}', file=sys.stderr)
  return decision


def _nothing_changed(earlier: Optional[RunRecord], settings: Settings, options: PipelineOptions,
                     decision: incremental_update.Decision, in_process: bool) -> Optional[str]:
  """What the command says where an --incremental update finds its input listed as the run that
  wrote ``earlier`` listed it (the same digest, parts.digest_of_listing): nothing to do, and no
  pipeline is built; else None. Only a local run lists here (a Dataflow job lists on its
  workers, and finds so there: commit.commit), and only an input whose listing gives every
  fingerprint (--annotations' boxes come from files of their own).

  Args:
    earlier: the output's record, with the digest of the listing of the run that wrote it.
    settings: the run's settings: the input to list, the output, and whether --annotations is given.
    options: the run's pipeline options, which tell a local run from a Dataflow job.
    decision: what --incremental decided; only an update, not a full conversion, can find nothing changed.
    in_process: the pipeline's steps run in this process, whose listing then takes what was listed here
      (parts.digest_of_listing's ``kept_for``).
  """
  if not decision.updates or earlier.listing is None or settings.annotations or not local_runner.is_direct(options):
    return None
  digest = parts.digest_of_listing(settings.input, settings.output, settings.run_id if in_process else None)
  if (digest.count, digest.text) != (earlier.listing.num_listed, earlier.listing.digest):
    return None
  try:  # the output as its record says, or the pipeline says what is damaged (incremental.FindChanges)
    for split in earlier.splits.values():
      for shard in split.shards:
        incremental.checked_catalog(shard, settings.output)
    lookup = earlier.catalog_lookup
    for found in lookup.files + lookup.content_files if lookup else ():
      catalog_lookup.check(found, output_dir.read_listed(settings.output, found.file))
      if found.delta_entries is not None:
        catalog_lookup.check_delta(found, output_dir.read_listed(settings.output, found.files[1]))
  except DamagedOutput:
    return None
  return _unchanged_line(earlier, settings, digest.count)


def _unchanged_line(earlier: RunRecord, settings: Settings, listed: Optional[int] = None) -> str:
  inputs_listed = f' ({counted(listed, "input")} listed as then)' if listed is not None else ''
  return (f'--incremental: nothing changed since the run of {earlier.created}{inputs_listed}; '
          f'--output={settings.output} is left as it is.')


def _say_which_splits_win(options: PipelineOptions, settings: Settings) -> None:
  """One line when --splits meets an input whose top-level folders name splits: those folders'
  images keep their folder's split, and --splits assigns only the rest."""
  given = options.view_as(options_lib.ConversionOptions).splits
  folders = inputs.split_folders(settings.input) if given else []
  if folders:
    print(f'note: the folders {", ".join(folder + "/" for folder in folders)} of --input set their images\' '
          f'splits; --splits={given} assigns only the images outside them', file=sys.stderr)


def _check_model(settings: Settings, in_process: bool, held: contextlib.ExitStack) -> Settings:
  """The settings with --embedding_model's sha256 and output shape, once the model is
  loaded and has embedded one image: here, or on a local run (this process never
  imports TensorFlow there) in the worker processes, a check each, so that every
  worker loads the model now, side by side, rather than in its first shard. A remote
  model's local copy is ``held`` for the run. UsageError if the model cannot embed images."""
  spec = settings.embedding
  try:
    spec = spec._replace(sha256=model_files.fingerprint(spec.model))
    path = held.enter_context(model_files.local_copy(spec.model))
    if in_process:
      pool = workers.start()
      checks = [pool.submit(steps.check_model, spec, path) for _ in range(workers.count())]
      shape = [check.result() for check in checks][0]
    else:
      shape = steps.check_model(spec, path)
  except ModelError as e:
    raise UsageError(f'--embedding_model={spec.model} {e}') from None
  return settings._replace(embedding=spec._replace(output_shape=shape))


def _submitted(result: PipelineResult, options: PipelineOptions):
  """What to say, and end with, when the run ends at submission: a dry run, a classic
  template, or --no_wait; None when the command waits for the job. Prints a submitted
  Dataflow job's id and console link either way."""
  cloud = options.view_as(GoogleCloudOptions)
  if _translates_only(options):
    if cloud.template_location:
      return f'Wrote a classic template to {cloud.template_location}; nothing was submitted.'
    written = dry_run.write(result, options)
    return ('Dry run: the job was translated and checked, and nothing was submitted' +
            (f'; the job is in {written}' if written else '') + '.')
  if not getattr(result, 'has_job', False):
    return None
  job = result.job_id()
  print(f'Dataflow job {job}: https://console.cloud.google.com/dataflow/jobs/{cloud.region}/{job}'
        f'?project={cloud.project}', flush=True)
  if options.view_as(options_lib.ConversionOptions).no_wait:
    return 'Submitted; not waiting for the job (--no_wait). beam_pipeline.json appears in the output once it completes.'
  return None


def _quiet_package_build(build: Callable[[], str]) -> str:
  """Builds --setup_file's package (Beam's stager: ``python -m build``) with what the build prints
  on standard error caught: chatter when it works, part of the error when it fails."""
  with native_output.captured(exclusive=True) as capture:
    mark = capture.mark()
    try:
      return build()
    except Exception as e:
      printed = capture.since(mark)
      raise RuntimeError(f'building the package of --setup_file failed: {e}' +
                         (f'\n{printed}' if printed else '')) from e


def _translates_only(options: PipelineOptions) -> bool:
  """Whether the runner only translates the job: a dry run, or a classic template."""
  return bool(options.view_as(TestOptions).dry_run or options.view_as(GoogleCloudOptions).template_location)


def _show_job_submission() -> None:
  """Lets Beam's job-submission lines (_SUBMISSION_LINES) through to standard error, with
  its warnings and errors; the rest of its Dataflow client's INFO lines stay out."""
  logger = logging.getLogger('apache_beam.runners.dataflow.internal.apiclient')
  if any(getattr(handler, 'shows_job_submission', False) for handler in logger.handlers):
    return
  handler = logging.StreamHandler(sys.stderr)
  handler.shows_job_submission = True
  handler.addFilter(lambda record: record.levelno >= logging.WARNING or
                    record.getMessage().startswith(_SUBMISSION_LINES))
  handler.setFormatter(logging.Formatter('%(levelname)s:%(name)s:%(message)s'))
  logger.addHandler(handler)
  logger.setLevel(logging.INFO)
  logger.propagate = False


@contextlib.contextmanager
def _long_lived_objects() -> Iterator[None]:
  """Builds what lives as long as the run without collecting garbage, then freezes it.

  Beam's modules and the pipeline graph are some 200,000 objects, which every
  full collection during the run would rescan.
  """
  gc.disable()
  try:
    yield
  finally:
    gc.freeze()
    gc.enable()
