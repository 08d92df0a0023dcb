"""``python -m beam_pipeline``: convert (the default), ``inspect OUTPUT`` or ``verify OUTPUT``.

The command line is parsed once, by arguments.py. This module imports no Beam: a
conversion's own module (launch.py) does, once the command line asks for one;
inspect and verify never do.
"""
import os
import select
import signal
import sys
import time
from typing import List, Optional

from beam_pipeline.cli import arguments, progress
from beam_pipeline.core.console import progress_counts, quiet_import
from beam_pipeline.core.output.run_record import RunRecord
from beam_pipeline.core.user_errors import UsageError
from beam_pipeline.core.console.quantities import counted


def quiet_libraries(command: str = '') -> None:
  """Keeps TensorFlow's C++ log off the console: its CUDA probing reads like a failure on a
  machine without a GPU, and its decoders' per-image warnings are about files the run
  either writes anyway or rejects with the decoder's error in their errors line. Set
  before TensorFlow is imported, in this process and the workers it forks. ``verify`` keeps
  its warnings (libpng's reach standard error only through that log, libjpeg's directly): it
  catches and counts them (verify.py), as training will print them; its import stays quiet
  all the same (quiet_import)."""
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '1' if command == 'verify' else '3')


def main(argv: Optional[List[str]] = None, started: Optional[float] = None) -> int:
  """Runs the command ``argv`` asks for; ``started`` (time.monotonic(), default now) is when it
  started, for the wall time a conversion's summary reports."""
  try:
    code = _main(argv, started)
    sys.stdout.flush()  # so that a reader who left (inspect | head) is found here, not at the interpreter's exit
    return code
  except KeyboardInterrupt:  # Ctrl-C where the conversion does not handle it (its start, inspect, verify)
    print('error: interrupted (Ctrl-C); nothing was written', file=sys.stderr)
    return 130
  except BrokenPipeError:
    if not _reader_left(sys.stdout):
      raise
    return _end_quietly()


def _reader_left(stream) -> bool:
  """Whether ``stream`` is a pipe whose reading end was closed (POLLERR): the BrokenPipeError was
  the command's output, not some other pipe of its work, which must still be reported."""
  try:
    poller = select.poll()
    poller.register(stream.fileno(), select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))
  except (AttributeError, OSError, ValueError):  # no file descriptor: a test's captured output
    return False


def _end_quietly() -> int:
  """The exit of a command whose reader left (inspect | head), as Unix tools end, without a
  traceback: what is left to write goes nowhere, and the code is a SIGPIPE's (141 in a shell)."""
  devnull = os.open(os.devnull, os.O_WRONLY)
  os.dup2(devnull, sys.stdout.fileno())
  os.close(devnull)
  return 128 + signal.SIGPIPE


def _main(argv: Optional[List[str]], started: Optional[float]) -> int:
  started = time.monotonic() if started is None else started
  argv = sys.argv[1:] if argv is None else list(argv)
  command = arguments.command_of(argv)
  quiet_libraries(command)
  if command == 'convert':
    from beam_pipeline.cli import launch  # pylint: disable=import-outside-toplevel
    return launch.convert(argv, started)
  try:
    namespace, _ = arguments.parse(argv)
  except UsageError as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  except SystemExit as e:  # --help, printed
    return e.code or 0
  from beam_pipeline.inspection import files  # pylint: disable=import-outside-toplevel
  try:
    info = files.info(namespace.output)
  except FileNotFoundError as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  return (inspect if command == 'inspect' else verify)(namespace, info)


def inspect(namespace, info: RunRecord) -> int:
  """The dataset at a glance, and what --errors, --duplicates, --contact_sheet, --quality_sheet, --near_duplicates
  and --plots ask for."""
  from beam_pipeline.inspection import overview  # pylint: disable=import-outside-toplevel
  output = namespace.output
  print('\n'.join(overview.glance(info, output)))
  if namespace.errors:
    print('\n'.join(overview.errors(info, output)))
  if namespace.duplicates:
    print('\n'.join(overview.duplicates(info)))
  title = f'{output}: {counted(info.num_examples, "example")}, {counted(info.num_classes, "class", "classes")}'
  sheets = [name for name in ('contact_sheet', 'quality_sheet') if getattr(namespace, name)]
  if sheets and info.embedding and not info.embedding.images_stored:
    print(f'error: {output} stores embeddings instead of images (--embedding_only): there are no images to draw; '
          f'leave out --{sheets[0]}', file=sys.stderr)
    return 2
  if namespace.quality_sheet and not any(split.quality for split in info.splits.values()):
    print(f'error: {output} counts no images with a data-quality flag (none raised one, or it was converted by a '
          'version before they were counted): there are none to draw; leave out --quality_sheet', file=sys.stderr)
    return 2
  if namespace.near_duplicates and info.near_duplicates is None:
    print(f'error: {output} lists no near copies (converted with --near_copies=off, or by a version before they were '
          'found): there are none to draw; leave out --near_duplicates', file=sys.stderr)
    return 2
  if namespace.contact_sheet:
    quiet_import.tensorflow()
    from beam_pipeline.inspection import contact_sheet  # pylint: disable=import-outside-toplevel
    found = contact_sheet.samples(info, output, namespace.samples)
    contact_sheet.draw(found, title, namespace.samples, contact_sheet.captions(info)).save(namespace.contact_sheet)
    print(f'Contact sheet: {namespace.contact_sheet}')
  if namespace.quality_sheet:
    quiet_import.tensorflow()
    from beam_pipeline.inspection import quality_sheet  # pylint: disable=import-outside-toplevel
    examples = quality_sheet.examples(info, output, namespace.samples)
    heading = quality_sheet.title(output, info, examples, namespace.samples)
    quality_sheet.draw(heading, examples, quality_sheet.counts(info)).save(namespace.quality_sheet)
    print(f'Quality sheet: {namespace.quality_sheet}')
  if namespace.near_duplicates:
    from beam_pipeline.inspection import near_copy_sheet  # pylint: disable=import-outside-toplevel
    near = info.near_duplicates
    drawn = []
    for page in range(1, near_copy_sheet.pages(near) + 1):
      path = near_copy_sheet.page_path(namespace.near_duplicates, page)
      start = (page - 1) * near_copy_sheet.ROWS
      near_copy_sheet.draw(near_copy_sheet.title(output, near, page), near.groups[start:start + near_copy_sheet.ROWS],
                           first=start + 1).save(path)
      drawn.append(path)
    print(f'Near copies: {drawn[0]}' + (f' ... {drawn[-1]} ({len(drawn)} pages of {near_copy_sheet.ROWS} groups)'
                                        if len(drawn) > 1 else ''))
  if namespace.plots:
    from beam_pipeline.inspection import plots  # pylint: disable=import-outside-toplevel
    plots.draw(info, namespace.plots, title)
    print(f'Plots: {namespace.plots}')
  return 0


def verify(namespace, info: RunRecord) -> int:
  """Exit 0 if every record checks out; else 1, naming the first problems."""
  quiet_import.tensorflow()
  from beam_pipeline.inspection import verify as verification  # pylint: disable=import-outside-toplevel
  reading = verification.to_read(info, namespace.everything)
  total = info.num_examples if reading is None else sum(
      shard.num_examples for split in info.splits.values() for shard in split.shards if shard.file in reading)
  tally = progress_counts.Tally('verifying', total, 'records', 'failed')
  # The check catches what the decoders print on standard error; progress is shown on a copy of it.
  with progress.console() as console, progress.shown(console, counter=tally):
    report = verification.verify(namespace.output, info, tally, namespace.everything)
  if report.problems:
    shown = report.problems[:20]
    print(f'{len(report.problems)} problem(s) in {namespace.output}:', file=sys.stderr)
    for problem in shown:
      print(f'  {problem}', file=sys.stderr)
    if len(report.problems) > len(shown):
      print(f'  ... and {len(report.problems) - len(shown)} more', file=sys.stderr)
  elif report.unread:
    print(f'Verified {counted(report.records, "record")} in the {counted(report.shards - report.unread, "shard")} '
          f'the update of {info.created} wrote, of {namespace.output}: all intact; its other '
          f'{counted(report.unread, "shard")} are there, each of its recorded size (verify --all reads them too).')
  else:
    print(f'Verified {counted(report.records, "record")} in {counted(report.shards, "shard")} of {namespace.output}: '
          'all intact.')
  if report.decoder_warnings:
    print(f'The image decoders printed {len(report.decoder_warnings):,} warning(s), the first: '
          f'"{report.decoder_warnings[0]}". An image that warns but decodes to its recorded size is intact; '
          'TensorFlow prints the same when training reads it.')
  return 1 if report.problems else 0
