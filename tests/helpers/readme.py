"""The READMEs' runnable blocks, and the shell a reader runs them in: what the tests that run
README blocks as written share (test_readme_blocks.py runs each in turn; a few tests run one
block in a setting of its own)."""
import os
import re
import sys
import textwrap
from pathlib import Path
from typing import Dict, List, NamedTuple

from helpers.commands import ROOT, user_environment

VENV = Path(sys.executable).parents[1]  # the environment `make install` builds, .venv


# The pages whose blocks are run as written: the project's README, its guides in the order their
# blocks build on one another, then the deployment's.
GUIDES = ('usage', 'inspecting', 'embeddings', 'detection', 'reliability', 'splits', 'incremental', 'output')
DOCUMENTS = ('README.md', *(f'beam_pipeline/docs/{page}.md' for page in GUIDES), 'deploy/README.md')


class Block(NamedTuple):
  line: int  # of the opening fence
  language: str
  text: str
  document: str = 'README.md'

  def __str__(self) -> str:
    return f'{self.document}:{self.line}'


def blocks() -> List[Block]:
  """The READMEs' fenced blocks of shell or Python, list-indented ones too, in order."""
  found = []
  for document in DOCUMENTS:
    readme = (ROOT / document).read_text()
    for match in re.finditer(r'^( *)```(\w*)\n(.*?)^\1```$', readme, re.S | re.M):
      if match.group(2) in ('sh', 'python'):
        found.append(Block(readme.count('\n', 0, match.start()) + 1, match.group(2),
                           textwrap.dedent(match.group(3)), document))
  return found


def shell_environment(activates: bool = False) -> Dict[str, str]:
  """The user's environment with this environment's `python` first on the PATH, or, for a block
  that activates .venv itself (``activates``), with none on it, as in a new shell."""
  environment = user_environment()
  path = [entry for entry in environment['PATH'].split(os.pathsep) if entry != str(VENV / 'bin')]
  environment['PATH'] = os.pathsep.join(path if activates else [str(VENV / 'bin'), *path])
  environment.pop('VIRTUAL_ENV', None)
  return environment
