"""One rule for every class name, whatever its source: stripped, and one line of text."""
import pytest

from beam_pipeline.core.inputs import class_names
from beam_pipeline.core.inputs.class_names import BadClassName


@pytest.mark.parametrize('text, name', [
    ('dog', 'dog'), (' dog', 'dog'), ('dog \t', 'dog'), ('\u00a0hot dog\u3000', 'hot dog'), ('été', 'été'),
    ('we,ird "label"', 'we,ird "label"'), ('3', '3'), ('a\u200db', 'a\u200db'),  # a zero-width joiner, as emoji hold
])
def test_a_class_name_is_its_text_stripped(text, name):
  assert class_names.class_name(text) == name


@pytest.mark.parametrize('text, why', [
    ('', 'is blank'), (' \t\n', 'is blank'),
    ('li\nne', 'holds a line break'), ('li\r\nne', 'holds a line break'), ('li\rne', 'holds a line break'),
    # What Python's splitlines() also breaks on: a labels.txt read with it would shift too.
    ('a\x0bb', 'holds a line break'), ('a\x0cb', 'holds a line break'), ('a\x1cb', 'holds a line break'),
    ('a\x85b', 'holds a line break'), ('a\u2028b', 'holds a line break'), ('a\u2029b', 'holds a line break'),
    ('a\tb', 'holds the control character U+0009'), ('a\x00b', 'holds the control character U+0000'),
    ('a\x7fb', 'holds the control character U+007F'), ('a\x9bb', 'holds the control character U+009B'),
    ('caf\udce9', 'is not valid UTF-8 text'),  # a Latin-1 folder name's byte, as os.fsdecode gives it
])
def test_a_text_that_is_not_one_line_names_no_class(text, why):
  with pytest.raises(BadClassName) as raised:
    class_names.class_name(text)
  assert str(raised.value).startswith(why)


def test_every_name_it_accepts_is_one_line_of_labels_txt():
  """Every code point from U+0000 to U+FFFF between two letters: accepted, the name reads back
  from labels.txt as one line, as splitlines() and a text file's lines give it."""
  for code in range(0x10000):
    text = f'a{chr(code)}b'
    try:
      name = class_names.class_name(text)
    except BadClassName:
      continue
    assert (name + '\n').splitlines() == [name], hex(code)
    assert name.encode('utf-8').decode('utf-8') == name


def test_a_name_composed_or_decomposed_in_unicode_is_one_class():
  """'café' with é as one code point (NFC), or as e and a combining acute accent (NFD, as folders
  copied from macOS name it): one class, written composed; and so is 'Å' as the letter or the sign."""
  composed, decomposed = 'caf\u00e9', 'cafe\u0301'
  assert composed != decomposed
  assert class_names.class_name(decomposed) == class_names.class_name(composed) == composed
  assert class_names.class_name('\u212b') == class_names.class_name('A\u030a') == '\u00c5'
