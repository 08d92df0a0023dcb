"""``beam_pipeline.convert(input=..., output=..., **options)``: the command's conversion as a
Python function, for a notebook or an Airflow PythonOperator.

The keywords are the command's options (``splits='train=0.8,validation=0.2'``,
``dedupe=True``) and Beam's (``runner='DataflowRunner'``, ``project=...``), checked as the
command checks them; whatever the command would end with ``error: ...`` and an exit code
raises ConversionError with that line and code. Beam and TensorFlow are imported by the
call, not by ``import beam_pipeline``.
"""
import contextlib
import os
import sys
import tempfile
import time
from typing import Any, Iterator, Mapping, Union

from beam_pipeline.core import option_keywords
from beam_pipeline.core import uris
from beam_pipeline.core.inputs import dataframe_manifest
from beam_pipeline.core.output.conversion_summary import ConversionSummary, Submission
from beam_pipeline.core.user_errors import ConversionError, UsageError


def convert(input: Any, output: str, **options: Any) -> Union[ConversionSummary, Submission]:  # pylint: disable=redefined-builtin
  """Converts ``input`` (a glob, a folder or a manifest, local or gs://; or a pandas DataFrame with
  ``uri``, ``label`` and optionally ``split`` columns) into TFRecords in ``output``, as
  ``python -m beam_pipeline --input=... --output=... --name=value ...`` does.

  Returns the summary of what the run wrote (ConversionSummary), or, for a run that ends at
  submission (a dry run, a classic template, ``no_wait=True``), its last line (Submission).
  Raises ConversionError (``message``, ``exit_code``, ``details``) where the command fails.
  A DataFrame is written as a JSONL manifest named by its content, to ``temp_location`` if
  given (where Dataflow's workers read it), else to the system's temporary folder.
  """
  started = time.monotonic()
  try:
    flags, beam_options = option_keywords.split(options)
    with _manifest(input, beam_options) as path:
      from beam_pipeline.cli import commands, launch  # pylint: disable=import-outside-toplevel  # imports Beam
      commands.quiet_libraries()
      outcome = launch.run([f'--input={path}', f'--output={os.fspath(output)}', *flags], started, beam_options)
  except UsageError as e:
    raise ConversionError(str(e), 2) from None
  if outcome.summary is None:
    return Submission(outcome.said)
  from beam_pipeline.inspection import summary  # pylint: disable=import-outside-toplevel
  if outcome.interrupted_during_commit:
    raise launch.interrupted_during_commit(outcome.summary['output'])
  return ConversionSummary.of(outcome.summary, '\n'.join(summary.lines(outcome.summary)))


@contextlib.contextmanager
def _manifest(given: Any, beam_options: Mapping[str, Any]) -> Iterator[str]:
  """The --input of ``given``: itself, or the manifest a DataFrame is written to."""
  pandas = sys.modules.get('pandas')  # a DataFrame's module is imported already; never import it here
  if pandas is None or not isinstance(given, pandas.DataFrame):
    yield os.fspath(given) if isinstance(given, os.PathLike) else str(given)
    return
  text = dataframe_manifest.jsonl(given)
  name = dataframe_manifest.file_name(text)
  folder = beam_options.get('temp_location')
  if folder:
    from apache_beam.io.filesystems import FileSystems  # pylint: disable=import-outside-toplevel
    path = uris.join(uris.join(str(folder), 'beam_pipeline-dataframes'), name)
    with FileSystems.create(path) as f:
      f.write(text.encode('utf-8'))
  else:
    folder = os.path.join(tempfile.gettempdir(), 'beam_pipeline-dataframes')
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    with open(path, 'w', encoding='utf-8') as f:
      f.write(text)
  yield path
