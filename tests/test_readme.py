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
