"""Inputs, and the metadata of validated images: what crosses Beam's shuffles and
travels to and from worker processes instead of image bytes.

The in-memory runner holds everything that crosses a GroupByKey or Reshuffle, and
Dataflow pays to move it, so image bytes never do: a record is a few hundred
bytes, and the shard writer reads the image again (checking ``source_sha256``).
"""
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from beam_pipeline.rejections import Rejection


class InputItem(NamedTuple):
  """One input to convert, before its bytes are read."""
  uri: str
  label: Optional[str] = None  # from a manifest
  split: Optional[str] = None  # from a manifest
  extras: Tuple[Tuple[str, Any], ...] = ()  # manifest fields passed through as features


class ImageRecord(NamedTuple):
  uri: str
  label: Optional[str]
  split: Optional[str]
  extras: Tuple[Tuple[str, Any], ...]
  source_sha256: str  # of the file as read; identical photos share it
  sha256: str  # of the stored bytes (differs from source_sha256 when re-encoded)
  num_bytes: int  # of the stored bytes
  format: str
  height: int
  width: int
  channels: int
  reencoded: bool


class Validated(NamedTuple):
  """What validating a batch gives: records, rejections, and what the accepted images really are."""
  records: List[ImageRecord]
  rejections: List[Rejection]
  source_formats: Dict[str, int]  # by Pillow's format name
