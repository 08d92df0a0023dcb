"""--input_root: the folder (local or a gs:// prefix) every input file must lie in.

A manifest may name any file the process can read (an absolute path, '../'); where
whoever writes manifests is trusted less than whoever runs the conversion (a Flex
Template, an Airflow DAG triggered with a manifest), this option confines the run to one
folder. A local path is placed where it really leads before it is compared: made
absolute, '..' resolved and its symbolic links followed (os.path.realpath), so neither a
'../' nor a link out of the root gets in. An object store has neither folders nor links:
'gs://b/root/../x' is an object of that very name, which some tools would read as
'gs://b/x'; a remote uri with a '.' or '..' segment is refused rather than guessed at.
"""
import os
from typing import Optional

from beam_pipeline.core import rejections, uris
from beam_pipeline.core.rejections import Rejected


def resolved(uri: str) -> str:
  """Where a local ``uri`` leads (os.path.realpath); a remote one as it is."""
  return uri.strip() if uris.is_remote(uri) else os.path.realpath(uri)


def contains(root: str, uri: str) -> bool:
  """Whether ``uri`` lies in the folder ``root``."""
  if uris.is_remote(root) != uris.is_remote(uri):
    return False
  root, uri = resolved(root), resolved(uri)
  if not uris.is_remote(root):
    return os.path.commonpath([root, uri]) == root
  segments = uri.partition('://')[2].split('/')
  return not {'.', '..'} & set(segments) and (uri == root or uri.startswith(root.rstrip('/') + '/'))


def check(uri: str, root: Optional[str]) -> None:
  """Raises Rejected (outside_input_root) unless ``uri`` lies in ``root``; None: no root."""
  if root is not None and not contains(root, uri):
    where = resolved(uri)
    leads = f' (it leads to {where})' if where != uri else ''
    raise Rejected(rejections.OUTSIDE_INPUT_ROOT, f'not in --input_root={root}{leads}')
