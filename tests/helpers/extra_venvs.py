"""The environments of their own that some tests run readers in (.venv-dali, .venv-models).

Such a test skips where its environment is missing, so that a quick run needs neither; `make
test` builds both first and sets REQUIRED, and there a test that would skip for want of one
fails instead (tests/conftest.py): CI never passes without having run them.
"""
import os

VARIABLE = 'BEAM_PIPELINE_EXTRA_VENVS'
REQUIRED = 'required'
# In every such skip's reason, which is how conftest.py tells them from other skips.
BUILT_BY_MAKE_TEST = '(make test builds it)'


def missing(what: str, target: str) -> str:
  """The reason a test skips for want of ``what``, which `make ``target``` builds."""
  return f'{what} is missing: make {target} {BUILT_BY_MAKE_TEST}'


def required() -> bool:
  return os.environ.get(VARIABLE) == REQUIRED
