"""The core's values for tests of planning, steps and coders, without a command line or images."""
import collections
import hashlib
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from beam_pipeline.core import option_table
from beam_pipeline.core.planning import hash_order, sharding
from beam_pipeline.core.messages import CheckedImage, ShardPlan
from beam_pipeline.core.settings import InputSpec, LabelSource, Settings, SplitSpec


def image_record(uri: str, label: Optional[str] = 'cat', split: Optional[str] = None, sha256: Optional[str] = None,
                 num_bytes: int = 100, **fields: Any) -> CheckedImage:
  """A record as validation makes it; ``sha256`` (of the content) defaults to one of the uri."""
  sha256 = sha256 or hashlib.sha256(uri.encode('utf-8', 'surrogateescape')).hexdigest()
  values = dict(uri=uri, label=label, split=split, extras=(), source_sha256=sha256, sha256=sha256,
                num_bytes=num_bytes, format='jpeg', height=1, width=1, channels=3, reencoded=False,
                order_key=sharding.order_key(sha256, uri))
  values.update(fields)
  return CheckedImage(**values)


def settings(**changes: Any) -> Settings:
  """The default options' Settings, for a directory input; ``changes`` replace fields."""
  default = option_table.default
  values = dict(input=InputSpec('directory', '/in/**'), output='/out', label_source=LabelSource('parent_dir'),
                schema=default('schema'), target_shard_bytes=int(default('target_shard_mb') * 2**20),
                compression=default('compression'), max_pixels=default('max_pixels'),
                max_file_bytes=int(default('max_file_mb') * 2**20), splits=SplitSpec(('train',), (1.0,)),
                dedupe=False, image_size=default('image_size'), skip_transform=False,
                read_threads=default('read_threads'), max_error_fraction=default('max_error_fraction'))
  return Settings(**{**values, **changes})


def plan_shards(records: Sequence[CheckedImage], target: int, buckets: Optional[Dict[str, List[CheckedImage]]] = None,
                sizes: sharding.RecordSizes = sharding.RecordSizes()) -> List[ShardPlan]:
  """The pipeline's planning steps as plain calls: bucket totals, then each order bucket
  places its records; the plans in split and index order."""
  buckets = sharding.order_buckets(records) if buckets is None else buckets
  placed = hash_order.offsets(pair for key, batch in buckets.items()
                              for pair in sharding.split_bytes(key, batch, sizes))
  shards = collections.defaultdict(list)
  for key, batch in buckets.items():
    for shard, shard_records in sharding.assign_shards(key, batch, target, placed, sizes).items():
      shards[shard].extend(shard_records)
  numbered = gap_free_numbers(shards)
  return sorted((sharding.plan_shard(split, numbered[split, index], shard_records)
                 for (split, index), shard_records in shards.items()), key=lambda plan: (plan.split, plan.index))


def chunked_numbers(planned: Iterable[Tuple[str, int]]) -> Dict[Tuple[str, int], Tuple[int, int]]:
  """sharding.number() of every planned shard that holds records, its chunks counted and their
  running totals taken in one place, as the pipeline's planning steps do across workers."""
  chunks: Dict[Tuple[str, str], List[int]] = collections.defaultdict(list)
  for split, index in set(planned):
    chunks[sharding.numbering_chunk(split, index)].append(index)
  placed = hash_order.offsets(pair for chunk, in_use in chunks.items()
                              for pair in sharding.chunk_weights(chunk, in_use))
  return {(split, index): sharding.number(index, in_use, placed[split])
          for (split, _), in_use in chunks.items() for index in in_use}


def gap_free_numbers(planned: Iterable[Tuple[str, int]]) -> Dict[Tuple[str, int], Tuple[int, int]]:
  """(index, count) of each planned shard in use, ranked within its split in one place: what
  the pipeline's chunked numbering (chunked_numbers) must give."""
  in_use = collections.defaultdict(set)
  for split, index in planned:
    in_use[split].add(index)
  return {(split, index): (rank, len(indexes))
          for split, indexes in in_use.items() for rank, index in enumerate(sorted(indexes))}
