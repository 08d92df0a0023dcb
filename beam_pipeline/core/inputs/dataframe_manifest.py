"""A pandas DataFrame given as convert()'s input, as the JSONL manifest the conversion reads:
the frame is given, never imported (pandas is no dependency of this package)."""
import hashlib
import os
from typing import Any

from beam_pipeline.core import uris
from beam_pipeline.core.user_errors import UsageError

COLUMNS = ('uri', 'label', 'split')


def jsonl(frame: Any) -> str:
  """The frame's rows as JSONL manifest lines: ``uri`` (required), ``label`` and ``split``, and any
  other column as an extra field (manifests copy them into each Example). A relative local uri
  is made absolute against the current folder: a manifest's relative uris are resolved against
  the manifest's own folder, and this one is written elsewhere. UsageError for a frame without
  a uri column or without rows."""
  columns = [str(column) for column in frame.columns]
  if 'uri' not in columns:
    raise UsageError(f'input: a DataFrame needs a uri column (and label, and split if the rows name their '
                     f'splits); it has {", ".join(columns) or "no columns"}')
  if not len(frame):  # pylint: disable=use-implicit-booleaness-not-len  # a DataFrame has no truth value
    raise UsageError('input: the DataFrame has no rows; give one row per image')
  frame = frame.copy()
  frame['uri'] = [_absolute(os.fsdecode(uri) if isinstance(uri, bytes) else uri) for uri in frame['uri']]
  for column in frame.columns:
    binary = next((index for index, value in enumerate(frame[column]) if isinstance(value, (bytes, bytearray))), None)
    if binary is not None:
      raise UsageError(f'input: the DataFrame\'s column {column!s} holds bytes (row {binary}), which a manifest field '
                       'cannot: decode them to text, or leave the column out')
  text = frame.to_json(orient='records', lines=True, force_ascii=False)
  return text if text.endswith('\n') else text + '\n'


def file_name(text: str) -> str:
  """The manifest's file name, from its content: the same frame converted again is the same
  input (a rerun, not another input), and two frames never share a file."""
  return f'dataframe-{hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]}.jsonl'


def _absolute(uri: Any) -> Any:
  if isinstance(uri, os.PathLike):
    uri = os.fspath(uri)
  if isinstance(uri, str) and uri and not uris.is_remote(uri) and not os.path.isabs(uri):
    return os.path.abspath(uri)
  return uri
