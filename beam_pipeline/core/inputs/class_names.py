"""What text may name a class, whatever it comes from: a folder, a regex group, a manifest's
label, a COCO category, a VOC <name>, an AutoML detection row.

labels.txt is one class a line, line N naming class id N - 1 (label_map.pbtxt's N), so a
name that holds a line break would shift every class after it; readers split lines on
more than '\\n' (Python's splitlines() on \\x0b, \\x1c, \\x85, U+2028 too), so any control
character or line separator is refused. TensorFlow Datasets strips the whitespace around
class names, so ' dog' and 'dog' would read alike there: a name is stripped here, at its
source, and they are one class everywhere.
"""
import functools
import unicodedata

# Unicode categories a class name must not hold: control characters (line breaks, tab, NUL,
# DEL, the C1 controls), line and paragraph separators, and surrogates (bytes that were not UTF-8).
_REFUSED = {'Cc', 'Zl', 'Zp', 'Cs'}


class BadClassName(ValueError):
  """Why a text cannot name a class, worded to follow the text: "'a\\nb' holds a line break"."""


@functools.lru_cache(maxsize=4096)
def class_name(text: str) -> str:
  """The class ``text`` names: stripped of the whitespace around it, in Unicode's composed form
  (NFC), so that 'café' written as one code point for é or as e and a combining accent (as a
  folder copied from macOS has it) is one class, not two that print alike. Raises BadClassName
  for a text that cannot be one line of labels.txt. Cached: a run's images share a few classes."""
  name = unicodedata.normalize('NFC', text.strip())
  if not name:
    raise BadClassName('is blank')
  if name.isprintable():  # the common case: nothing below can be in it
    return name
  if name.splitlines() != [name]:
    raise BadClassName('holds a line break (labels.txt is one class a line)')
  for character in name:
    category = unicodedata.category(character)
    if category == 'Cs':
      raise BadClassName('is not valid UTF-8 text (a file or folder name\'s raw bytes?)')
    if category in _REFUSED:
      raise BadClassName(f'holds the control character U+{ord(character):04X} (labels.txt is one class a line '
                         'of text)')
  return name
