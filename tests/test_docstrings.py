"""Every function of the package that takes more than three parameters says what each one means
in an Args: section of its docstring (the code's style; README.md, Development)."""
import ast
import pathlib
from typing import Iterator, List

import beam_pipeline

PACKAGE = pathlib.Path(beam_pipeline.__file__).parent
MOST_WITHOUT_ARGS = 3


def _parameters(function: ast.FunctionDef) -> List[str]:
  arguments = function.args
  return [argument.arg for argument in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)
          if argument.arg not in ('self', 'cls')]


def _args_section(docstring: str) -> List[str]:
  """The names an Args: section lists: its lines indented one step deeper than the heading."""
  lines = docstring.splitlines()
  if 'Args:' not in (line.strip() for line in lines):
    return []
  start = next(index for index, line in enumerate(lines) if line.strip() == 'Args:')
  heading = len(lines[start]) - len(lines[start].lstrip())
  names = []
  for line in lines[start + 1:]:
    if line.strip() and len(line) - len(line.lstrip()) <= heading:
      break
    if len(line) - len(line.lstrip()) == heading + 2 and ':' in line:
      names.append(line.strip().split(':')[0].lstrip('*'))
  return names


def _undocumented() -> Iterator[str]:
  for path in sorted(PACKAGE.rglob('*.py')):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and len(_parameters(node)) > MOST_WITHOUT_ARGS:
        missing = sorted(set(_parameters(node)) - set(_args_section(ast.get_docstring(node) or '')))
        if missing:
          yield f'{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}: {", ".join(missing)}'


def test_the_finder_reads_an_args_section():
  docstring = 'Summary.\n\nArgs:\n  first: one.\n  second: two,\n    on two lines.\n\nReturns:\n  x: not a name.'
  assert _args_section(docstring) == ['first', 'second']
  assert _args_section('Summary naming ``first``.') == []


def test_every_function_of_more_than_three_parameters_names_each_in_an_args_section():
  assert list(_undocumented()) == []
