"""Why an input was not written: short reason codes, and the exception that carries one.

Every input ends either as a written record or as exactly one rejection, so the
codes are part of the output contract (errors-*.jsonl, beam_pipeline.json,
Beam counters) and must stay stable.
"""
from typing import Optional

EMPTY = 'empty'
NOT_IMAGE = 'not_image'
TRUNCATED = 'truncated'
CORRUPT = 'corrupt'
TOO_MANY_PIXELS = 'too_many_pixels'
TOO_SMALL = 'too_small'  # a side shorter than --min_side
FILE_TOO_LARGE = 'file_too_large'
UNSUPPORTED_PIXELS = 'unsupported_pixels'
UNREADABLE = 'unreadable'
NO_LABEL = 'no_label'
BAD_MANIFEST_ROW = 'bad_manifest_row'
DUPLICATE_ROW = 'duplicate_row'  # a manifest row naming an image an earlier row names: the image is written once
CHANGED_DURING_RUN = 'changed_during_run'
DUPLICATE = 'duplicate'  # dropped by --dedupe: listed with the rejections, but not an error
# Under --dedupe, identical files whose labels give no one label most: the picture's class cannot be told.
LABEL_CONFLICT = 'label_conflict'
NEAR_DUPLICATE = 'near_duplicate'  # dropped by --near_copies=drop, as DUPLICATE is by --dedupe
# No image, by where or what it is (.DS_Store, notes.txt, .git/: core/inputs/skipped_files.py): listed
# with the rejections, but not an error, and not one of the inputs the error budget counts.
SKIPPED = 'skipped'
UNANNOTATED = 'unannotated'  # dropped by --drop_unannotated: an error, but not one of the error budget
BAD_ANNOTATION = 'bad_annotation'  # an annotation that cannot be used; its uri is the annotation file
DAMAGED_JPEG = 'damaged_jpeg'
POOR_QUALITY = 'poor_quality'  # raises a data-quality flag --reject_quality names (image_quality.py)
OUTSIDE_INPUT_ROOT = 'outside_input_root'  # a file outside --input_root (a manifest's row)
INTERNAL_ERROR = 'internal_error'  # an unexpected exception in a step, for this input alone (isolation.py)


def first_line(error: BaseException, limit: Optional[int] = None) -> str:
  """What a one-line message says of ``error``: its first line (at most ``limit`` characters),
  or its type's name if it has no message."""
  line = (str(error) or type(error).__name__).splitlines()[0]
  return line[:limit] if limit else line


def innermost(error: BaseException) -> BaseException:
  """The storage's own error inside Beam's BeamIOErrors (their ``exception_details``), or
  ``error`` itself: what went wrong, rather than which of Beam's calls it went wrong in."""
  details = getattr(error, 'exception_details', None)
  while isinstance(details, dict) and details:
    error = next(iter(details.values()))
    details = getattr(error, 'exception_details', None)
  return error


def cause(error: BaseException) -> str:
  """What a one-line message says went wrong in a storage call: the innermost error's type and
  first line."""
  inner = innermost(error)
  return f'{type(inner).__name__}: {first_line(inner, 300)}'


class Rejected(Exception):
  """Raised by the plain functions when an input cannot become a record."""

  def __init__(self, reason: str, detail: str):
    super().__init__(f'{reason}: {detail}')
    self.reason = reason
    self.detail = detail


class RunFailure(Exception):
  """Raised for what no single input can be blamed for (storage that keeps failing, an
  output that cannot be written): it fails the bundle, which the runner retries, and
  then the run, where a Rejected would only reject an image."""


class OutputError(RunFailure):
  """The output cannot be listed, written or committed: the run stops, whatever the images."""


class DamagedOutput(OutputError):
  """The output's own files are not what its run record says (a shard or a catalog damaged, cut
  short or deleted since it was written): an update cannot build on them; a rebuild can."""


class LockLost(OutputError):
  """The run no longer holds its output's lock when it comes to commit: another run's work is
  there, or soon will be, and this run's must not mix with it."""


class InputFileError(RunFailure):
  """An input file the run cannot read through (a compressed manifest cut short or damaged, an
  --annotations COCO file that is not COCO as a whole): the user's to fix, not one input's
  rejection and no bug, so the run stops before its commit and the command says so in the
  message's one line, with exit code 2."""
