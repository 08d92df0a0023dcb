"""One image's failure stays that image's: the boundary every per-image step runs behind.

An exception that escapes a DoFn fails its bundle; Dataflow retries the bundle
four times and then fails the job, so one odd file in ten million that trips any
code path would cost the whole run. Every step that handles images (listing a
row, reading, validation, re-encoding and resizing, grouping copies, embedding,
encoding a record) therefore runs behind ``run`` or ``each_alone``: a Rejected
stays the image's rejection, and any other exception becomes one too, reason
``internal_error``, naming the step, the exception's type and its first line. A
step that handles a batch and fails is run again image by image, so one image
cannot take the others with it.

Only a RunFailure passes: what no single input can be blamed for (storage that
keeps failing, an output that cannot be written). It fails the bundle, which
the runner retries, and then the run.

The test seam: with BEAM_PIPELINE_INJECT_FAULT=STEP:TEXT[,STEP:TEXT...] in the
environment of the command, a step's ``fault_point`` raises for every image whose
uri contains TEXT, in whatever process the step runs (the launcher, a local
worker, an SDK worker), so tests prove that each step is behind the boundary
without mocking a library. It is read once, when this module is imported: a
fault point runs for every image, and an environment lookup each time would cost
a measurable share of validating a photo.
"""
import os
import threading
from typing import Callable, List, Sequence, Tuple, TypeVar, Union

from beam_pipeline.core import rejections
from beam_pipeline.core.rejections import Rejected, RunFailure

T = TypeVar('T')
R = TypeVar('R')

LIST = 'list'
READ = 'read'
VALIDATE = 'validate'
REENCODE = 'reencode'
RESIZE = 'resize'
GROUP = 'group'
EMBED = 'embed'
WRITE = 'write'
STEPS = (LIST, READ, VALIDATE, REENCODE, RESIZE, GROUP, EMBED, WRITE)

INJECT_FAULT = 'BEAM_PIPELINE_INJECT_FAULT'
# The longest an exception's message is quoted in an internal_error's detail.
_DETAIL_CHARS = 300
# The uris of the images the steps running on this thread handle, innermost last.
_handling = threading.local()


class InjectedFault(RuntimeError):
  """What fault_point raises for the images BEAM_PIPELINE_INJECT_FAULT names."""


def run(step: str, uris: Sequence[str], function: Callable[..., R], *args) -> Union[R, Rejected]:
  """``function(*args)``, which handles the images ``uris``, or the Rejected it raises, or an
  internal_error Rejected for any other exception but a RunFailure."""
  stack = _stack()
  stack.append(uris)
  try:
    return function(*args)
  except Rejected as e:
    # A value from here on, without its traceback: its frames would keep the
    # caller's images alive in a reference cycle until the next full collection.
    return e.with_traceback(None)
  except RunFailure:
    raise
  except Exception as e:  # pylint: disable=broad-except  # the point of the boundary
    return internal_error(step, e)
  finally:
    stack.pop()


def each_alone(step: str, items: Sequence[T], uri_of: Callable[[T], str],
               function: Callable[[Sequence[T]], List[Union[R, Rejected]]]) -> List[Union[R, Rejected]]:
  """``function(items)``, a result or Rejected per item; if it raises anything but a
  RunFailure, ``function([item])`` for each item alone, each behind ``run``.

  Args:
    step: the step ``function`` is one of, which an internal_error names.
    items: the images to handle, together if they can be.
    uri_of: an item's uri: which images each call handles (fault_point).
    function: handles a batch of items, giving a result or a Rejected for each, in their order.
  """
  together = run(step, [uri_of(item) for item in items], function, items)
  if not isinstance(together, Rejected):
    return together
  return [_single(run(step, [uri_of(item)], function, [item])) for item in items]


def _single(result: Union[List[Union[R, Rejected]], Rejected]) -> Union[R, Rejected]:
  return result if isinstance(result, Rejected) else result[0]


def internal_error(step: str, error: BaseException) -> Rejected:
  """The rejection of an image that ``error`` stopped in ``step``."""
  return Rejected(rejections.INTERNAL_ERROR,
                  f'{step}: {type(error).__name__}: {rejections.first_line(error, _DETAIL_CHARS)}')


def faults(spec: str) -> Tuple[Tuple[str, str], ...]:
  """(step, text) pairs of a BEAM_PIPELINE_INJECT_FAULT value."""
  pairs = tuple(fault.partition(':')[::2] for fault in spec.split(',')) if spec else ()
  for step, text in pairs:
    if step not in STEPS or not text:
      raise ValueError(f'{INJECT_FAULT}={spec}: give STEP:TEXT[,STEP:TEXT...], STEP one of {", ".join(STEPS)}')
  return pairs


# What BEAM_PIPELINE_INJECT_FAULT asks for in this process (see the module docstring).
FAULTS = faults(os.environ.get(INJECT_FAULT, ''))


def fault_point(step: str) -> None:
  """Raises InjectedFault if BEAM_PIPELINE_INJECT_FAULT names ``step`` and an image that the
  innermost ``run`` on this thread handles."""
  if not FAULTS:
    return
  stack = _stack()
  handled = stack[-1] if stack else ()
  for name, text in FAULTS:
    if name == step and any(text in uri for uri in handled):
      raise InjectedFault(f'fault injected into {step} for uris containing {text!r} ({INJECT_FAULT})')


def _stack() -> List[Sequence[str]]:
  if not hasattr(_handling, 'stack'):
    _handling.stack = []
  return _handling.stack
