"""What a failed run says: its cause and what to do, in a few lines; the whole story in a log file.

Runners wrap a worker's exception (Beam adds "[while running 'Step']", Dataflow its
own text around it), and Beam logs every failed bundle with its traceback. So Beam's
log records are kept off the console while a run goes (RunLog); if it fails, they
and the traceback go to a log file in the output's temporary directory (or the
system's, if the output cannot be written), and the console gets the cause, what
became of the output, and that file's path.
"""
import collections
import contextlib
import logging
import re
import sys
import tempfile
import traceback
from concurrent.futures.process import BrokenProcessPool
from typing import Iterator, List, Optional

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from beam_pipeline.pipeline.output import output_dir
from beam_pipeline.cli import interrupts
from beam_pipeline.core import rejections
from beam_pipeline.core.output import output_layout
from beam_pipeline.core.output.run_totals import ErrorBudgetExceeded
from beam_pipeline.core.inputs.reading import TransientReadError
from beam_pipeline.core.rejections import DamagedOutput, InputFileError, LockLost, OutputError
from beam_pipeline.core.user_errors import ConversionError

_STEP = re.compile(r"\[while running '([^']+)'\]")
# How a full disk or a spent quota reads, from Python (OSError), TensorFlow or Cloud Storage.
_FULL = re.compile(r'No space left on device|Disk quota exceeded')


class RunLog(logging.Handler):
  """Log records of a run, the last MAX_RECORDS of them, kept instead of shown."""

  MAX_RECORDS = 5000

  def __init__(self):
    super().__init__(logging.DEBUG)
    self.lines = collections.deque(maxlen=self.MAX_RECORDS)
    self.setFormatter(logging.Formatter('%(asctime)s %(levelname)s %(name)s: %(message)s'))

  def emit(self, record: logging.LogRecord) -> None:
    self.lines.append(self.format(record))


@contextlib.contextmanager
def kept(log: RunLog, logger: str = 'apache_beam') -> Iterator[RunLog]:
  """Beam's log records go to ``log`` instead of the console while the block runs (loggers
  that show records of their own, such as Dataflow's job submission, still do)."""
  beam_logger = logging.getLogger(logger)
  propagate = beam_logger.propagate
  beam_logger.addHandler(log)
  beam_logger.propagate = False
  try:
    yield log
  finally:
    beam_logger.removeHandler(log)
    beam_logger.propagate = propagate


def report(error: BaseException, output: str, run: str, log: Optional[RunLog]) -> int:
  """Says why the run failed (explain), on standard error; returns the exit code.

  Args:
    error: what the run raised, perhaps a worker's exception in the text a runner wrapped it in.
    output: --output, whose state the lines give and whose temporary directory takes the log file.
    run: the run's id, which names its temporary directory in the output.
    log: Beam's log records, kept off the console during the run; None where they were shown (--verbose).
  """
  failed = explain(error, output, run, log)
  print('\n'.join(failed.lines()), file=sys.stderr)
  return failed.exit_code


def explain(error: BaseException, output: str, run: str, log: Optional[RunLog]) -> ConversionError:
  """Why the run failed, in a few lines, with the traceback and ``log`` written to a log file whose
  path the lines give.

  Args:
    error: what the run raised, perhaps a worker's exception in the text a runner wrapped it in.
    output: --output, whose state the lines give and whose temporary directory takes the log file.
    run: the run's id, which names its temporary directory in the output.
    log: Beam's log records, kept off the console during the run; None where they were shown (--verbose).
  """
  text = str(error)
  budget = re.search(re.escape(ErrorBudgetExceeded.PREFIX) + r'[^\n]*', text)
  if budget:  # the message says it all, and names the errors file
    return ConversionError(_STEP.sub('', budget.group(0)).strip(), 1, [_output_state(output)])
  full = _FULL.search(text)
  if full:  # the user's to fix, as a bad option is: exit code 2
    return ConversionError(f'the storage of --output={output} is full ({full.group(0)}): free space there or choose '
                           'another output, then rerun', 2, [_output_state(output)])
  unusable = _input_file_error(error)
  if unusable:  # the user's input, not a bug: its message names the file, the cause and the fix
    return ConversionError(unusable, 2, [_output_state(output)])
  cause, advice = _cause(error, output)
  step = _STEP.search(text)
  written = _write_log(error, output, run, log)
  return ConversionError(cause + (f' (in step {step.group(1)})' if step else ''), 1, [
      _output_state(output, lock_lost=isinstance(error, LockLost) or LockLost.__name__ in text), advice,
      f'Details (the traceback and the log of the run): {written}' if written else
      'Details could not be written to a log file; rerun with --verbose to see them.'])


def interrupted(output: str, options: PipelineOptions) -> ConversionError:
  """That Ctrl-C stopped the run before its commit, and what became of the output."""
  details = [_output_state(output)]
  runner = options.view_as(StandardOptions).runner or ''
  if 'dataflow' in runner.lower():
    details.append('A submitted Dataflow job goes on without this command: cancel it in the Dataflow console if it '
                   'should stop.')
  return ConversionError('interrupted (Ctrl-C) before the commit', interrupts.EXIT_CODE, details)


def _cause(error: BaseException, output: str):
  """(what went wrong, what to do), from the error or the text a runner wrapped it in."""
  text = str(error)
  first = rejections.first_line(_STEP.sub('', text).strip() or type(error).__name__, 300)
  if isinstance(error, BrokenProcessPool):
    return ('a worker process ended abruptly (killed by the system, perhaps for memory), again when its task '
            'ran a second time, and the run stopped',
            'Rerun to complete it; if it happens again, give the machine more memory.')
  if isinstance(error, TransientReadError) or TransientReadError.__name__ in text:
    return (f'storage kept failing, so the run stopped (no image was rejected for it): {first}',
            'Rerun when it recovers.')
  if isinstance(error, LockLost) or LockLost.__name__ in text:
    return (first, 'The other run\'s output stands; rerun once it has ended if this run\'s is the one you want.')
  if isinstance(error, DamagedOutput) or DamagedOutput.__name__ in text:
    return (f'the output is damaged: {first}',
            f'Convert again with --incremental --rebuild: it converts the input whole into --output={output}.')
  if isinstance(error, OutputError) or OutputError.__name__ in text:
    return (f'the output could not be written: {first}',
            f'Check that --output={output} is writable and has room, then rerun.')
  return (f'the run failed: {type(error).__name__}: {first}',
          'No single image can be blamed (those are rejected, not fatal), so this is likely a bug in '
          'beam_pipeline: rerun, and if it fails again, report it with the details below.')


def _input_file_error(error: BaseException) -> Optional[str]:
  """An InputFileError's message, from the error or the text a runner wrapped it in; else None."""
  if isinstance(error, InputFileError):
    return rejections.first_line(_STEP.sub('', str(error)).strip())
  found = re.search(re.escape(InputFileError.__name__) + r': ([^\n]*)', str(error))
  return _STEP.sub('', found.group(1)).strip() if found else None


def _output_state(output: str, lock_lost: bool = False) -> str:
  """What the output holds now that the run failed. A run that lost its lock names the other
  run instead: what the output holds is that run's doing, and may change while it commits."""
  if lock_lost:
    return (f'Nothing of this run was committed: another run took --output={output} over, and what it holds is '
            'that run\'s to commit.')
  try:
    committed = FileSystems.exists(output_dir.path(output, output_layout.RUN_RECORD))
  except Exception:  # pylint: disable=broad-except  # the output may be what failed
    return f'--output={output} could not be checked.'
  if committed:
    return f'Nothing was committed: --output={output} still holds its earlier complete dataset, unchanged.'
  return f'Nothing was committed: --output={output} holds no complete dataset.'


def _write_log(error: BaseException, output: str, run: str, log: Optional[RunLog]) -> Optional[str]:
  """Writes the traceback and ``log`` to the run's temporary directory in the output, or the system's;
  returns the path, or None if neither could be written.

  Args:
    error: the exception whose traceback the file starts with.
    output: --output, whose temporary directory is tried first.
    run: the run's id, which names its temporary directory in the output.
    log: Beam's log records of the run (its last ones), written after the traceback; None writes the traceback alone.
  """
  lines: List[str] = traceback.format_exception(error)
  if log is not None and log.lines:
    lines += ['\nThe log of the run (its last records):\n'] + [line + '\n' for line in log.lines]
  data = ''.join(lines).encode('utf-8', 'backslashreplace')
  path = output_dir.temp_path(output, run, output_layout.FAILED_RUN_LOG)
  try:
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
      f.write(data)
    return path
  except Exception:  # pylint: disable=broad-except  # the output may be what failed
    pass
  try:
    with tempfile.NamedTemporaryFile('wb', prefix='beam_pipeline-', suffix='-' + output_layout.FAILED_RUN_LOG,
                                     delete=False) as f:
      f.write(data)
    return f.name
  except OSError:
    return None
