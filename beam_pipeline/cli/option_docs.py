"""The option table's other faces, made from core/option_table.py: the Flex Template's
metadata.json (a checked-in file, since Dataflow reads it) and the table of options of the options guide
(beam_pipeline/docs/usage.md).

``make options`` (``python -m beam_pipeline.cli.option_docs [ROOT]``) writes both; a test
holds the checked-in files to what this module makes, so neither drifts from the table.
"""
import json
import os
import sys
from typing import Any, Dict, List

from beam_pipeline.core import option_table

METADATA_FILE = os.path.join('deploy', 'dataflow', 'metadata.json')
README_FILE = 'beam_pipeline/docs/usage.md'
TEMPLATE_NAME = 'Images to TFRecords'
TEMPLATE_DESCRIPTION = ('Validates every image of a collection on Cloud Storage and writes it as sharded, '
                        'training-ready TFRecord files of tf.train.Example, with labels.txt, an errors file for '
                        'rejected images, a tf.Transform graph and beam_pipeline.json (written last).')
# The guide's table lies between these lines.
TABLE_START = '<!-- The option table: made by `make options` from beam_pipeline/core/option_table.py. -->'
TABLE_END = '<!-- End of the option table. -->'


def metadata() -> Dict[str, Any]:
  """The Flex Template's metadata: a parameter for each option a template's user sets, the
  required ones first."""
  parameters = []
  for option in sorted(option_table.OPTIONS, key=lambda option: not option.required):
    if option.template is None:
      continue
    parameter: Dict[str, Any] = {'name': option.name, 'label': option.template, 'helpText': option.help_text}
    if not option.required:
      parameter['isOptional'] = True
    parameter['regexes'] = [option.parameter_regex]
    parameters.append(parameter)
  return {'name': TEMPLATE_NAME, 'description': TEMPLATE_DESCRIPTION, 'parameters': parameters}


def metadata_text() -> str:
  return json.dumps(metadata(), indent=2, ensure_ascii=False) + '\n'


def readme_table() -> List[str]:
  """The options guide's table of the pipeline's options (the console's are --help's), in the table's order."""
  rows = ['| option | default | meaning |', '| --- | --- | --- |']
  for option in option_table.pipeline_options():
    default = 'required' if option.required else _code_or_words(option)
    meaning = option.help + (f'; e.g. `{option.flag}={option.example}`' if option.example else '')
    rows.append(f'| `{option.flag}` | {default} | {meaning.replace("|", "&#124;")} |')
  return rows


def _code_or_words(option: option_table.Option) -> str:
  """A default as code where it is a value, as words where it describes one."""
  return option.shown_default if option.shown_default else f'`{option.default_text}`'


def readme_with_table(readme: str) -> str:
  """``readme`` with the table between TABLE_START and TABLE_END made anew."""
  start, end = readme.index(TABLE_START) + len(TABLE_START), readme.index(TABLE_END)
  return readme[:start] + '\n' + '\n'.join(readme_table()) + '\n' + readme[end:]


def main(root: str) -> None:
  with open(os.path.join(root, METADATA_FILE), 'w', encoding='utf-8') as f:
    f.write(metadata_text())
  path = os.path.join(root, README_FILE)
  with open(path, encoding='utf-8') as f:
    readme = f.read()
  with open(path, 'w', encoding='utf-8') as f:
    f.write(readme_with_table(readme))


if __name__ == '__main__':
  main(sys.argv[1] if len(sys.argv) > 1 else '.')
