"""Whether a run may replace the output an earlier run made: silently from the same input (a rerun
is the retry path), only with --overwrite from another.

A mistyped --output, or a second dataset pointed at the first one's folder, would otherwise
replace a finished dataset without a word. The earlier run record says what it was made from.
"""
import os
from typing import Optional

from beam_pipeline.core import uris
from beam_pipeline.core.output.run_record import RunRecord
from beam_pipeline.core.settings import Settings
from beam_pipeline.core.user_errors import UsageError


def same_input(recorded: str, given: str) -> bool:
  """Whether two --input paths (as InputSpec.path holds them) name the same input: equal, or,
  for local paths, leading to the same place (relative or absolute, through links)."""
  if recorded == given:
    return True
  if uris.is_remote(recorded) or uris.is_remote(given):
    return recorded.rstrip('/') == given.rstrip('/')
  return os.path.realpath(recorded) == os.path.realpath(given)


def check(earlier: Optional[RunRecord], settings: Settings) -> None:
  """UsageError, in one line that says what would be replaced, if ``earlier`` (the output's run
  record, None for a new output) was made from another input and --overwrite is not given."""
  recorded = (earlier.options.get('input') if earlier else None) or None
  if recorded is None or settings.overwrite or same_input(recorded, settings.input.path):
    return
  raise UsageError(f'--output={settings.output} holds {earlier.num_examples:,} examples converted from '
                   f'--input={earlier.input_given()} ({earlier.created}), which this run from '
                   f'--input={settings.input.given} would replace: pass --overwrite to replace them, or give another '
                   '--output')
