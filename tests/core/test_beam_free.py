"""The core never imports Beam: it runs in worker processes that must not pay Beam's import (0.6 s).
Nor do the command line, inspect and verify, whose start would pay it."""
import ast
import pathlib
import subprocess
import sys

import beam_pipeline.core

CORE = pathlib.Path(beam_pipeline.core.__file__).parent
PACKAGE = CORE.parent
# Beam-free beyond the core: the command line, inspect and verify, and what runs before Beam's import.
BEAM_FREE = [*sorted(CORE.rglob('*.py')), *sorted((PACKAGE / 'inspection').glob('*.py')),
             *sorted((PACKAGE / 'local').glob('*.py')),
             *(PACKAGE / name for name in ('cli/__init__.py', 'cli/commands.py', 'cli/arguments.py', 'cli/progress.py',
                                           'cli/option_docs.py',
                                           'reader.py', '__main__.py', 'compat/__init__.py',
                                           'compat/multiprocessing_internals.py', 'compat/tft_internals.py'))]
# The command line's modules that import Beam, for a conversion only.
_CONVERSION = ('beam_pipeline.cli.launch', 'beam_pipeline.cli.options', 'beam_pipeline.cli.failures')
# Beam's file layer, imported by inspect and verify within a function, for a remote output only.
_REMOTE_FILES = {'inspection/files.py': ['apache_beam.io.filesystem.CompressionTypes',
                                         'apache_beam.io.filesystems.FileSystems']}


def _imported_modules(path: pathlib.Path):
  for node in ast.walk(ast.parse(path.read_text(), str(path))):
    if isinstance(node, ast.Import):
      yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.level == 0:
      yield from (f'{node.module}.{alias.name}' for alias in node.names)


def test_no_beam_free_module_names_beam_in_any_import():
  """Every import statement of them, at the top of a module or inside a function; only the
  command line may reach the Beam side, to launch a conversion."""
  found = {str(path.relative_to(PACKAGE)): sorted(
      module for module in _imported_modules(path)
      if module.split('.')[0] == 'apache_beam' or module.startswith('beam_pipeline.pipeline')
      or (module.startswith(_CONVERSION) and path.name != 'commands.py'))
           for path in BEAM_FREE}
  assert len(found) > 25
  assert {name: modules for name, modules in found.items() if modules} == _REMOTE_FILES


def test_importing_every_beam_free_module_loads_no_beam():
  """What the imports really load, transitively, in a fresh interpreter."""
  modules = ['.'.join(('beam_pipeline', *path.relative_to(PACKAGE).with_suffix('').parts)) for path in BEAM_FREE
             if path.stem not in ('__init__', '__main__')]
  script = (f'import importlib, sys\n'
            f'for name in {modules!r}:\n'
            f'  importlib.import_module(name)\n'
            f'print(sorted(m for m in sys.modules if m.split(".")[0] == "apache_beam"))\n')
  done = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, timeout=120, check=True)
  assert done.stdout.splitlines()[-1] == '[]'


VALUE_MODULES = ('messages', 'settings', 'rejections', 'user_errors', 'option_table')


def test_value_modules_import_nothing_of_the_package_but_each_other():
  for name in VALUE_MODULES:
    imported = [m for m in _imported_modules(CORE / f'{name}.py') if m.startswith('beam_pipeline')]
    assert not [m for m in imported if m.split('.')[:2] != ['beam_pipeline', 'core'] or
                m.split('.')[2] not in VALUE_MODULES], name
