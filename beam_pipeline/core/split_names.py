"""The names of the usual splits and the words people use for them, read the same wherever a split
is named: --splits, a manifest's split column and the top-level folders of an input.

So ``val`` in a manifest, ``val/`` as a folder and ``--splits=train=0.8,val=0.2`` all name the
split ``validation``, and an output never holds one split under two names.
"""
from typing import Optional

TRAIN = 'train'
VALIDATION = 'validation'
TEST = 'test'
ALIASES = {'train': TRAIN, 'training': TRAIN,
           'validation': VALIDATION, 'valid': VALIDATION, 'val': VALIDATION, 'dev': VALIDATION,
           'test': TEST, 'testing': TEST}
# AutoML Vision's set value that leaves an image's split to --splits.
UNASSIGNED = 'unassigned'
# How an error lists the words a split may be given as.
ACCEPTED = 'train (training), validation (valid, val, dev), test (testing)'


def usual(word: str) -> Optional[str]:
  """The usual split ``word`` names, whatever its case ('VAL', 'Training'); None for another word."""
  return ALIASES.get(word.strip().lower())


def mistyped(word: str) -> Optional[str]:
  """The usual split a word that names none is one typo away from (a letter left out, added,
  changed, or two swapped: 'validaton', 'trian'), or None. Letters only, so that 'val2' or
  'test_hard' stay names of their own, and only words of four letters or more, which a typo
  rarely turns into another word ('eval' is no 'val')."""
  word = word.strip().lower()
  if not word.isalpha() or word in ALIASES:
    return None
  return next((ALIASES[alias] for alias in ALIASES if len(alias) >= 4 and _one_typo(word, alias)), None)


def _one_typo(a: str, b: str) -> bool:
  if a == b or abs(len(a) - len(b)) > 1:
    return False
  if len(a) == len(b):
    differ = [index for index, (x, y) in enumerate(zip(a, b)) if x != y]
    return len(differ) == 1 or (len(differ) == 2 and differ[1] == differ[0] + 1 and a[differ[0]] == b[differ[1]]
                                and a[differ[1]] == b[differ[0]])
  shorter, longer = sorted((a, b), key=len)
  return any(longer[:index] + longer[index + 1:] == shorter for index in range(len(longer)))


def named(word: str) -> str:
  """The name of the split ``word`` gives: a usual split's own name, any other word as it is."""
  return usual(word) or word
