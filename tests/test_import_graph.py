"""The package's modules import each other without a circle: every import statement counts,
at the top of a module or inside a function, so a lazy import cannot hide one."""
import ast
import pathlib
from typing import Dict, Iterator, List, Set

import beam_pipeline

PACKAGE = pathlib.Path(beam_pipeline.__file__).parent


def _module_name(path: pathlib.Path) -> str:
  parts = path.relative_to(PACKAGE.parent).with_suffix('').parts
  return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def _imports(path: pathlib.Path, modules: Set[str]) -> Iterator[str]:
  """The package's modules that ``path`` imports (a name imported from a package counts as
  its module where it is one, else as the package)."""
  package = _module_name(path) if path.name == '__init__.py' else _module_name(path).rpartition('.')[0]
  for node in ast.walk(ast.parse(path.read_text(), str(path))):
    if isinstance(node, ast.Import):
      names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ''
      if node.level:
        base = '.'.join([*package.split('.')[:len(package.split('.')) - node.level + 1], *([base] if base else [])])
      names = [f'{base}.{alias.name}' if f'{base}.{alias.name}' in modules else base for alias in node.names]
    else:
      continue
    yield from (name for name in names if name in modules)


def graph() -> Dict[str, Set[str]]:
  paths = sorted(PACKAGE.rglob('*.py'))
  modules = {_module_name(path) for path in paths}
  return {_module_name(path): set(_imports(path, modules)) - {_module_name(path)} for path in paths}


def circles(edges: Dict[str, Set[str]]) -> List[List[str]]:
  """The strongly connected components of more than one module (Tarjan's algorithm)."""
  index: Dict[str, int] = {}
  low: Dict[str, int] = {}
  stack: List[str] = []
  found: List[List[str]] = []

  def visit(node: str) -> None:
    index[node] = low[node] = len(index)
    stack.append(node)
    for target in sorted(edges.get(node, ())):
      if target not in index:
        visit(target)
        low[node] = min(low[node], low[target])
      elif target in stack:
        low[node] = min(low[node], index[target])
    if low[node] == index[node]:
      component = []
      while True:
        member = stack.pop()
        component.append(member)
        if member == node:
          break
      if len(component) > 1:
        found.append(sorted(component))

  for node in sorted(edges):
    if node not in index:
      visit(node)
  return found


def test_the_finder_sees_a_circle_and_the_packages_imports():
  assert circles({'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}}) == [['a', 'b', 'c']]
  edges = graph()
  assert 'beam_pipeline.core.writing.shard_writer' in edges['beam_pipeline.core.steps']  # a function-level import
  assert 'beam_pipeline.pipeline.graph' in edges['beam_pipeline.cli.launch']


def test_no_modules_of_the_package_import_each_other_in_a_circle():
  assert circles(graph()) == []


# The core's stages, and what each may import besides the core's own modules (its values, steps
# and isolation): inputs, planning and output stand on the values alone; an image's checks use
# what inputs give (labels, annotations) and its order key (planning); writing uses all three.
CORE_STAGES = {
    'console': set(),
    'inputs': set(),
    'planning': set(),
    'output': set(),
    'images': {'console', 'inputs', 'planning'},
    'writing': {'console', 'images', 'inputs', 'output'},
}


def _stage(module: str) -> str:
  parts = module.split('.')
  return parts[2] if parts[:2] == ['beam_pipeline', 'core'] and len(parts) > 3 else ''


def test_the_cores_stages_import_only_the_stages_below_them():
  edges = graph()
  assert {_stage(module) for module in edges} - {''} == set(CORE_STAGES)
  crossing = sorted(f'{module} -> {target}' for module, targets in edges.items() for target in targets
                    if _stage(module) and _stage(target) and _stage(target) != _stage(module)
                    and _stage(target) not in CORE_STAGES[_stage(module)])
  assert crossing == []
  reaching_up = sorted(f'{module} -> {target}' for module, targets in edges.items() for target in targets
                       if _stage(module) and target == 'beam_pipeline.core.steps')
  assert reaching_up == []


def test_no_folder_of_the_package_holds_more_than_16_modules():
  """A folder of more is a room without hallways: split it by what its modules do."""
  crowded = {str(folder.relative_to(PACKAGE.parent)): count for folder in [PACKAGE, *PACKAGE.rglob('*/')]
             if folder.name != '__pycache__'
             and (count := len([path for path in folder.glob('*.py') if path.name != '__init__.py'])) > 16}
  assert crowded == {}
