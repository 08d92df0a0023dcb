"""The errors output: every rejection of a run as a line of JSON, in as many
``errors-SSSSS-of-NNNNN.jsonl`` files as their number needs.

A run with 100 million inputs may reject a million of them, more than one worker
should gather or write; so the rejections are split into files of at most about
REJECTIONS_PER_FILE lines, each by the hash of its uri (which file holds an input
does not depend on the runner, its workers or their order), each file sorted by
uri, so a rerun writes the same bytes. Up to REJECTIONS_PER_FILE rejections, the
one file is ``errors-00000-of-00001.jsonl``, as before the split.
"""
import collections
import hashlib
from typing import Dict, Iterable

from beam_pipeline.core.messages import Rejection

REJECTIONS_PER_FILE = 100_000


def num_files(num_rejected: int, per_file: int = REJECTIONS_PER_FILE) -> int:
  """How many files ``num_rejected`` rejections go into: at least one, even if empty."""
  return max(1, -(-num_rejected // per_file))


def file_index(uri: str, count: int) -> int:
  """Which of ``count`` files lists ``uri``'s rejection: a stable hash (Python's own is
  salted per process) of its bytes, a local name's undecodable ones included."""
  return int.from_bytes(hashlib.sha256(uri.encode('utf-8', 'surrogateescape')).digest()[:8], 'big') % count


def file_text(rejected: Iterable[Rejection]) -> str:
  """One file's bytes, sorted by uri (then reason and detail)."""
  return ''.join(rejection.to_json() + '\n' for rejection in sorted(rejected))


def by_reason(rejected: Iterable[Rejection]) -> Dict[str, int]:
  return dict(collections.Counter(rejection.reason for rejection in rejected))
