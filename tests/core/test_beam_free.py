"""The core never imports Beam: it runs in worker processes that must not pay Beam's import (0.6 s)."""
import ast
import pathlib
import subprocess
import sys

import beam_pipeline.core

CORE = pathlib.Path(beam_pipeline.core.__file__).parent
FACES = ['beam_pipeline.cli', 'beam_pipeline.reader', 'beam_pipeline.sample_images', 'beam_pipeline.beam.workers']


def _imported_modules(path: pathlib.Path):
  for node in ast.walk(ast.parse(path.read_text(), str(path))):
    if isinstance(node, ast.Import):
      yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.level == 0:
      yield node.module


def test_no_core_module_names_beam_in_any_import():
  """Every import statement of the core, at the top of a module or inside a function."""
  found = {path.name: sorted(module for module in _imported_modules(path)
                             if module.split('.')[0] == 'apache_beam' or module.startswith('beam_pipeline.beam'))
           for path in sorted(CORE.glob('*.py'))}
  assert len(found) > 15
  assert {name: modules for name, modules in found.items() if modules} == {}


def test_importing_the_core_and_the_beam_free_faces_loads_no_beam():
  """What the imports really load, transitively, in a fresh interpreter."""
  modules = [f'beam_pipeline.core.{path.stem}' for path in sorted(CORE.glob('*.py')) if path.stem != '__init__']
  script = (f'import importlib, sys\n'
            f'for name in {modules + FACES!r}:\n'
            f'  importlib.import_module(name)\n'
            f'print(sorted(m for m in sys.modules if m.split(".")[0] == "apache_beam"))\n')
  done = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, timeout=120, check=True)
  assert done.stdout.splitlines()[-1] == '[]'


def test_value_modules_import_nothing_of_the_package():
  for name in ('records.py', 'settings.py', 'rejections.py', 'usage.py'):
    assert not [m for m in _imported_modules(CORE / name) if m.startswith('beam_pipeline')], name
