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


def named(word: str) -> str:
  """The name of the split ``word`` gives: a usual split's own name, any other word as it is."""
  return usual(word) or word
