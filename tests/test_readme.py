"""The README's table of contents is its headings, so it cannot drift from them."""
import re

from helpers.commands import ROOT


def _anchor(title: str) -> str:
  """GitHub's anchor of a heading: lowercased, punctuation dropped, spaces as hyphens."""
  return re.sub(r'[^\w\- ]', '', title.strip().lower()).replace(' ', '-')


def test_the_contents_list_every_section_in_order():
  text = (ROOT / 'README.md').read_text()
  contents = text[text.index('## Contents\n'):text.index('\n## ', text.index('## Contents\n'))]
  listed = re.findall(r'^( *)- \[(.+)\]\(#(.+)\)$', contents, re.M)
  headings = [(len(level), title) for level, title in re.findall(r'^(###?) (.+)$', text, re.M) if title != 'Contents']
  assert [(2 if not indent else 3, title) for indent, title, _ in listed] == headings
  assert all(anchor == _anchor(title) for _, title, anchor in listed)


# Every page of the project's documentation: the README is the front door, the guides hold the detail.
PAGES = ('README.md', 'deploy/README.md', 'benchmarks/README.md', 'beam_pipeline/README.md',
         *sorted(str(path.relative_to(ROOT)) for path in (ROOT / 'beam_pipeline' / 'docs').glob('*.md')))


def _anchors(path) -> set:
  return {_anchor(title) for title in re.findall(r'^#+ (.+)$', path.read_text(), re.M)}


def test_every_link_between_the_pages_reaches_a_file_and_a_heading():
  broken = []
  for page in PAGES:
    text = re.sub(r'^( *)```.*?^\1```$', '', (ROOT / page).read_text(), flags=re.S | re.M)
    for target in re.findall(r'\]\(([^)\s]+)\)', text):
      if re.match(r'[a-z]+:', target):
        continue
      file, _, anchor = target.partition('#')
      path = ((ROOT / page).parent / file).resolve() if file else ROOT / page
      if not path.exists() or (anchor and anchor not in _anchors(path)):
        broken.append(f'{page}: {target}')
  assert not broken, broken


def test_the_readme_is_a_front_door():
  assert len((ROOT / 'README.md').read_text().splitlines()) <= 500


def test_every_name_the_glossary_gives_is_in_the_code():
  """The glossary's right-hand column names the code each word means: a module by its path, or a
  name the package's code spells; a renamed one fails here until the glossary follows."""
  glossary = (ROOT / 'beam_pipeline' / 'docs' / 'glossary.md').read_text()
  rows = re.findall(r'^\| ([^|]+) \| [^|]+ \| (.+) \|$', glossary, re.M)
  code = '\n'.join(path.read_text() for path in (ROOT / 'beam_pipeline').rglob('*.py'))
  modules = {str(path.relative_to(ROOT / 'beam_pipeline')) for path in (ROOT / 'beam_pipeline').rglob('*.py')}
  missing = []
  for word, names in rows[1:]:
    for name in re.findall(r'`([^`]+)`', names):
      found = (any(module == name or module.endswith('/' + name) for module in modules) if name.endswith('.py')
               else re.search(rf'(?<![\w/]){re.escape(name)}(?![\w/])', code) is not None)
      if not found:
        missing.append(f'{word.strip()}: {name}')
  assert len(rows) > 20
  assert not missing, missing
