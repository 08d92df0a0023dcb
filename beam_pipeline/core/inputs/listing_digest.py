"""A digest of an input as listed: each item's uri and record fingerprint, and each file or row
the listing turned away, summed, so that the parts an input is listed in, and the workers that
list them, may come in any order. An --incremental run records it; the next one lists its input
again in the launcher and, finding the same digest, has nothing to do (cli/launch.py)."""
import hashlib
from typing import Iterable, NamedTuple, Optional, Union

from beam_pipeline.core.messages import InputItem, Rejection

_MODULUS = 1 << 128


class Digest(NamedTuple):
  """How many items and rejections were listed, and the sum of their values modulo 2^128;
  ``known`` is False once an item had no fingerprint (a listing that cannot tell a changed file
  from an unchanged one is never taken as unchanged)."""
  count: int = 0
  total: int = 0
  known: bool = True

  def merge(self, other: 'Digest') -> 'Digest':
    return Digest(self.count + other.count, (self.total + other.total) % _MODULUS, self.known and other.known)

  @property
  def text(self) -> Optional[str]:
    """32 hex digits, or None where an item's fingerprint was unknown."""
    return f'{self.total:032x}' if self.known else None


def of(values: Iterable[Union[InputItem, Rejection]]) -> Digest:
  """The digest of listed items (each with its record fingerprint, fingerprints.of_record) and
  of the listing's rejections (a file skipped as no image, a manifest row that names none)."""
  count, total, known = 0, 0, True
  for value in values:
    if isinstance(value, Rejection):
      text = f'rejected\0{value.uri}\0{value.reason}'
    else:
      known = known and bool(value.fingerprint)
      text = f'item\0{value.uri}\0{value.fingerprint}'
    count += 1
    total += int.from_bytes(hashlib.sha256(text.encode('utf-8', 'backslashreplace')).digest()[:16], 'big')
  return Digest(count, total % _MODULUS, known)
