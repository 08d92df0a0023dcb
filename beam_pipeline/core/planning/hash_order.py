"""Running totals in a hash order, computed one bucket at a time.

Split assignment and shard planning both place each item where the midpoint of
its weight falls in a running total taken in a hash order: splits in content-hash
order within each class, shards in order-key order within each split. Sorting a
whole class or split for that would gather it on one worker, capping a job at one
machine's memory. Buckets (keyed by a hash prefix) are contiguous ranges of the
order, so their weights alone (one number per bucket of a class or split) give
every bucket the total before it; each bucket then places its own items, exactly
as the whole sort would.
"""
import collections
from typing import Callable, Dict, Iterable, Iterator, Mapping, NamedTuple, Sequence, Tuple, TypeVar

Item = TypeVar('Item')

# How many records a bucket holds on average at most: buckets are keyed by more hex digits
# of the hash as the input grows, so that no worker gathers more than about twice this
# (the largest of thousands of hash buckets is within a few percent of their mean).
RECORDS_PER_BUCKET = 25_000


def prefix_digits(count: int, minimum: int, records_per_bucket: int = RECORDS_PER_BUCKET) -> int:
  """How many hex digits of a hash key the buckets of ``count`` records: ``minimum`` for a
  small input (few buckets keep Beam's elements few), one more for every sixteenfold past
  ``records_per_bucket`` records a bucket. Buckets of any width are contiguous ranges of
  the hash order, so what is planned bucket by bucket does not depend on it."""
  digits = minimum
  while count > records_per_bucket * 16**digits:
    digits += 1
  return digits


class KeyOffsets(NamedTuple):
  """One key's (a class's or a split's) weight before each of its buckets, and its total."""
  before: Dict[str, int]
  total: int


# Per key. A Beam step sees them as a side input looked up key by key, so no worker holds
# every class's offsets (classes x buckets grows with the input).
Offsets = Mapping[str, KeyOffsets]


def key_offsets(weights: Mapping[str, int]) -> KeyOffsets:
  """One key's offsets from the weight of each of its buckets."""
  before, running = {}, 0
  for bucket in sorted(weights):  # equal-length hash prefixes sort in hash order
    before[bucket] = running
    running += weights[bucket]
  return KeyOffsets(before, running)


def offsets(weights: Iterable[Tuple[Tuple[str, str], int]]) -> Dict[str, KeyOffsets]:
  """Offsets from ((key, bucket), weight) pairs; a pair repeated for one bucket adds up."""
  by_key: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
  for (key, bucket), weight in weights:
    by_key[key][bucket] += weight
  return {key: key_offsets(buckets) for key, buckets in by_key.items()}


def midpoints(items: Sequence[Item], weight: Callable[[Item], int], bucket: str,
              placed: KeyOffsets) -> Iterator[Tuple[Item, float]]:
  """Each item of one bucket, given in hash order, with the midpoint of its weight in its key's running total.

  Args:
    items: the bucket's items of one key (a class or a split), in hash order.
    weight: an item's weight: its images, its estimated bytes, or 1.
    bucket: the bucket's hash prefix, whose offset ``placed`` gives.
    placed: the key's offsets: its weight before each of its buckets.
  """
  position = placed.before[bucket]
  for item in items:
    item_weight = weight(item)
    yield item, position + item_weight / 2
    position += item_weight
