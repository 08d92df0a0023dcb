"""Plan which records go to which shard, in which order, before any bytes are written.

Planning on metadata lets every shard be written by one worker in one pass with a
size known in advance, which Beam's WriteToTFRecord cannot do: with num_shards>0
it assigns records to shards at random and ignores size caps, and with
num_shards=0 every bundle leaves its own small tail file.
"""
import collections
import math
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Tuple

from beam_pipeline import hash_order
from beam_pipeline.records import ImageRecord
from beam_pipeline.rejections import Rejection

# Serialized Example overhead beyond the image bytes (keys, label, uri, hash, framing).
_RECORD_OVERHEAD_BYTES = 300


class ShardPlan(NamedTuple):
  split: str
  index: int
  count: int
  records: Tuple[ImageRecord, ...]

  def file_name(self, compression: str) -> str:
    return shard_file_name(self.split, self.index, self.count, compression)


class OutputUnit(NamedTuple):
  """A piece of the output that one worker writes whole: a planned shard, or, without
  a plan, the tf.Transform graph (written beside the shards)."""
  plan: Optional[ShardPlan] = None


class ShardWritten(NamedTuple):
  """What writing a shard gives: its line of dataset_info.json, and the records it could not write."""
  shard: Dict[str, Any]  # split, file, num_examples, num_bytes
  rejections: List[Rejection]


def shard_file_name(split: str, index: int, count: int, compression: str) -> str:
  suffix = '.tfrecord.gz' if compression == 'gzip' else '.tfrecord'
  return f'{split}-{index:05d}-of-{count:05d}{suffix}'


def estimated_record_bytes(record: ImageRecord) -> int:
  return record.num_bytes + len(record.uri.encode('utf-8', 'surrogateescape')) + _RECORD_OVERHEAD_BYTES


def record_order_key(record: ImageRecord) -> Tuple[str, str]:
  """A pseudo-random but reproducible order: by content hash, then uri for identical files."""
  return record.source_sha256, record.uri


def split_bytes(bucket: str, records: Iterable[ImageRecord]) -> Iterable[Tuple[Tuple[str, str], int]]:
  """((split, bucket), estimated bytes) of one content bucket."""
  sizes = collections.Counter()
  for record in records:
    sizes[record.split, bucket] += estimated_record_bytes(record)
  return sizes.items()


def shard_count(total_bytes: int, target_bytes: int) -> int:
  return max(1, math.ceil(total_bytes / target_bytes))


def assign_shards(bucket: str, records: Iterable[ImageRecord], target_bytes: int,
                  placed: hash_order.Offsets) -> Dict[Tuple[str, int], List[ImageRecord]]:
  """The records of one content bucket by (split, planned shard); ``placed`` holds every bucket's split_bytes.

  A split of total T bytes gets N = ceil(T / target) shards of about T/N bytes,
  which is at most the target and, for N >= 2, more than half of it; a record goes
  to the shard holding its midpoint, so no shard is off by more than one record.
  """
  by_split: Dict[str, List[ImageRecord]] = collections.defaultdict(list)
  for record in records:
    by_split[record.split].append(record)
  shards: Dict[Tuple[str, int], List[ImageRecord]] = collections.defaultdict(list)
  for split, split_records in by_split.items():
    split_records.sort(key=record_order_key)
    total = placed.totals[split]
    count = shard_count(total, target_bytes)
    for record, midpoint in hash_order.midpoints(split_records, estimated_record_bytes, split, bucket, placed):
      shards[split, min(count - 1, int(midpoint * count / total))].append(record)
  return shards


def numbering(planned: Iterable[Tuple[str, int]]) -> Dict[Tuple[str, int], Tuple[int, int]]:
  """(index, count) in the file name of each planned shard that holds records.

  A record larger than a shard can leave a planned neighbour empty; files are
  numbered without gaps, so a reader can trust the '-of-N' in their names.
  """
  in_use: Dict[str, List[int]] = collections.defaultdict(list)
  for split, index in set(planned):
    in_use[split].append(index)
  return {(split, planned_index): (index, len(indexes))
          for split, indexes in in_use.items() for index, planned_index in enumerate(sorted(indexes))}


def plan_shard(split: str, planned_index: int, records: Iterable[ImageRecord],
               numbered: Dict[Tuple[str, int], Tuple[int, int]]) -> ShardPlan:
  """One shard's plan: its records in content order, under its gap-free number."""
  index, count = numbered[split, planned_index]
  return ShardPlan(split, index, count, tuple(sorted(records, key=record_order_key)))
