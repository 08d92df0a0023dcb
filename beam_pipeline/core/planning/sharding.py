"""Plan which records go to which shard, in which order, before any bytes are written.

Planning on metadata lets every shard be written by one worker in one pass with a
size known in advance, which Beam's WriteToTFRecord cannot do: with num_shards>0
it assigns records to shards at random and ignores size caps, and with
num_shards=0 every bundle leaves its own small tail file.

Records are ordered, inside and across a split's shards, by their ``order_key``:
a salted hash of content and uri. Splits rank records by the content hash itself,
and each class has its own boundary there, so ordering by that hash would put a
run of one class at the ends of each split's range (tests/core/planning/test_sharding.py
measures it); the salted hash is independent of that ranking, so every shard's
class mix is its split's.
"""
import collections
import functools
import hashlib
import math
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Tuple

from beam_pipeline.core.planning import hash_order
from beam_pipeline.core.messages import CheckedImage, ShardPlan
from beam_pipeline.core.settings import Settings

# Serialized Example overhead beyond the image and embedding (keys, label, uri, hash, framing).
_RECORD_OVERHEAD_BYTES = 300
_ORDER_SALT = b'beam_pipeline shard order\0'
# Records are regrouped by the start of their order key, so each group is a contiguous
# range of the order; at least 16 groups, more for a large input (hash_order.prefix_digits):
# few keep Beam's elements few (a content bucket's records fall into at most 16 lists).
ORDER_BUCKET_DIGITS = 1


def order_key(source_sha256: str, uri: str) -> str:
  """A record's place in its split's shards: reproducible, pseudo-random, and independent of
  the content-hash ranking that chose its split; identical files under other names get
  places of their own."""
  return hashlib.sha256(_ORDER_SALT + source_sha256.encode('ascii') + b'\0' +
                        uri.encode('utf-8', 'surrogateescape')).hexdigest()[:32]


def _ordered(record: CheckedImage) -> Tuple[str, str]:
  return record.order_key, record.uri


def order_buckets(records: Iterable[CheckedImage], digits: int = ORDER_BUCKET_DIGITS) -> Dict[str, List[CheckedImage]]:
  """Records batched by the first ``digits`` hex digits of their order key: contiguous ranges
  of the shard order."""
  buckets = collections.defaultdict(list)
  for record in records:
    buckets[record.order_key[:digits]].append(record)
  return buckets


# With --embedding_model, a split has at least one shard per this many images: a shard
# is written whole by one worker thread, so the model's work spreads over as many
# threads as there are shards, and shards by size alone would be few (Dataflow would
# run the model on a handful of threads).
EMBEDDED_IMAGES_PER_SHARD = 1024


class RecordSizes(NamedTuple):
  """What a record holds besides metadata, for its estimated size: its image (not under
  --embedding_only) and an embedding of so many float32 values; the most images a shard may
  hold (0: no limit); and how many shards a split has (--num_shards; 0: by size)."""
  image: bool = True
  embedding_values: int = 0
  max_images: int = 0
  num_shards: int = 0


def record_sizes(settings: Settings) -> RecordSizes:
  embedding = settings.embedding
  if embedding is None:
    return RecordSizes(num_shards=settings.num_shards)
  return RecordSizes(not embedding.only, embedding.num_values, EMBEDDED_IMAGES_PER_SHARD, settings.num_shards)


def estimated_record_bytes(record: CheckedImage, sizes: RecordSizes = RecordSizes()) -> int:
  return ((record.num_bytes if sizes.image else 0) + 4 * sizes.embedding_values +
          len(record.uri.encode('utf-8', 'surrogateescape')) + _RECORD_OVERHEAD_BYTES)


def split_bytes(bucket: str, records: Iterable[CheckedImage],
                sizes: RecordSizes = RecordSizes()) -> Iterable[Tuple[Tuple[str, str], int]]:
  """((split, bucket), estimated bytes) of one order bucket, and with a limit of images per
  shard or a number of shards ((_images(split), bucket), images) as well."""
  totals = collections.Counter()
  for record in records:
    totals[record.split, bucket] += estimated_record_bytes(record, sizes)
    if sizes.max_images or sizes.num_shards:
      totals[_images(record.split), bucket] += 1
  return totals.items()


def _images(split: str) -> str:
  """The key that counts a split's images beside its bytes; no split's name holds a NUL."""
  return split + '\0images'


def shard_count(total_bytes: int, target_bytes: int) -> int:
  return max(1, math.ceil(total_bytes / target_bytes))


def assign_shards(bucket: str, records: Iterable[CheckedImage], target_bytes: int, placed: hash_order.Offsets,
                  sizes: RecordSizes = RecordSizes()) -> Dict[Tuple[str, int], List[CheckedImage]]:
  """The records of one order bucket by (split, planned shard).

  A split of total T bytes gets N = ceil(T / target) shards of about T/N bytes,
  which is at most the target and, for N >= 2, more than half of it; a record goes
  to the shard holding its midpoint, so no shard is off by more than one record.
  With ``sizes.max_images``, N is at least the split's images over it. With
  ``sizes.num_shards``, N is that, and records are weighed by count instead of bytes: a split
  of M records gets shards of M/N records, rounded either way (one record each if M < N).

  Args:
    bucket: the order bucket: a prefix of its records' order keys.
    records: the bucket's records, their splits assigned.
    target_bytes: the size a shard is to hold at most (--target_shard_mb).
    placed: every bucket's split_bytes, as offsets per split (and per split's images).
    sizes: what a record holds besides metadata, the most images a shard may hold, and the shards a split has.
  """
  by_split: Dict[str, List[CheckedImage]] = collections.defaultdict(list)
  for record in records:
    by_split[record.split].append(record)
  shards: Dict[Tuple[str, int], List[CheckedImage]] = collections.defaultdict(list)
  for split, split_records in by_split.items():
    split_records.sort(key=_ordered)
    if sizes.num_shards:
      count, offsets, weight = sizes.num_shards, placed[_images(split)], _one
    else:
      offsets, weight = placed[split], functools.partial(estimated_record_bytes, sizes=sizes)
      count = shard_count(offsets.total, target_bytes)
      if sizes.max_images:
        count = max(count, math.ceil(placed[_images(split)].total / sizes.max_images))
    for record, midpoint in hash_order.midpoints(split_records, weight, bucket, offsets):
      shards[split, min(count - 1, int(midpoint * count / offsets.total))].append(record)
  return shards


def _one(_: CheckedImage) -> int:
  """A record's weight where shards are of even record counts."""
  return 1


# Shards are numbered in chunks of this many planned shards: a chunk lists which of its
# shards hold records, and a split's running totals over its chunks (hash_order) give
# each chunk's first number, so no element lists every shard of a large run.
NUMBERING_CHUNK = 1024


def numbering_chunk(split: str, planned_index: int) -> Tuple[str, str]:
  """(split, chunk) of a planned shard; chunks are zero-padded so they sort in order."""
  return split, f'{planned_index // NUMBERING_CHUNK:012d}'


def chunk_weights(chunk: Tuple[str, str], in_use: Iterable[int]) -> Iterable[Tuple[Tuple[str, str], int]]:
  """((split, chunk), shards in use) of one chunk, for its split's running totals."""
  return [(chunk, len(set(in_use)))]


def number(planned_index: int, in_chunk: Iterable[int], placed: hash_order.KeyOffsets) -> Tuple[int, int]:
  """(index, count) in the file name of a planned shard that holds records, from the planned
  indexes in use in its chunk and its split's totals over chunks.

  A record larger than a shard can leave a planned neighbour empty; files are
  numbered without gaps, so a reader can trust the '-of-N' in their names.
  """
  _, chunk = numbering_chunk('', planned_index)
  return placed.before[chunk] + sorted(set(in_chunk)).index(planned_index), placed.total


def plan_shard(split: str, numbered: Tuple[int, int], records: Iterable[CheckedImage],
               numbering: Optional[Mapping[str, Any]] = None) -> ShardPlan:
  """One shard's plan: its records in shard order, under its gap-free (index, count); in an
  --incremental output, numbered as its split's incremental_update.Numbering says (after the
  earlier shards; a split with none has none), with no count.

  Args:
    split: the shard's split.
    numbered: its gap-free (index, count) among its split's shards (number).
    records: its records, in any order.
    numbering: with --incremental, each split's Numbering (incremental_update.Decision.numbered: none in a full
      conversion); None without it, whose file names hold the count.
  """
  index, count = numbered
  if numbering is not None:
    index, count = (numbering[split].index(index) if split in numbering else index), 0
  return ShardPlan(split, index, count, tuple(sorted(records, key=_ordered)))
