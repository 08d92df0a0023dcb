"""Listing a Cloud Storage pattern in parts that workers take in parallel.

Beam's FileSystems.match lists a pattern whole, in one call that keeps every match
(and a set of every name) in memory: tens of gigabytes for 100 million objects, on
one worker. Here the folder a pattern starts in is listed once with a delimiter,
which gives its subfolders without their contents; each subfolder is then one part,
listed page by page by whichever worker takes it. Hand-written on the storage
client (the one Beam's gcsio makes, with the same credentials: compat) because FileSystems
offers neither a delimiter listing nor a streamed one.
"""
import re
from typing import Iterator, NamedTuple, Optional, Tuple

from apache_beam.io.filesystems import FileSystems

from beam_pipeline.compat import beam_internals

GCS = 'gs'
_PAGE_SIZE = 1000  # the most Cloud Storage returns per page


def lists_in_parts(pattern: str) -> bool:
  return FileSystems.get_scheme(pattern) == GCS


def fixed_prefix(pattern: str) -> str:
  """The part of a pattern before its first wildcard: where every match starts."""
  return re.match(r'[^[*?]*', pattern).group(0)


def reaches_subfolders(pattern: str) -> bool:
  """Whether a pattern can match below the folder its fixed prefix is in ('*' stops at '/')."""
  rest = pattern[len(fixed_prefix(pattern)):]
  return '**' in rest or '/' in rest


def subfolders(prefix: str) -> Iterator[str]:
  """The folders one level below ``prefix`` (a gs:// uri), as gs:// uris ending in '/'."""
  bucket, name = _split(prefix)
  for page in _pages(bucket, name, delimiter='/', fields='prefixes,nextPageToken'):
    for folder in page.prefixes:
      yield f'gs://{bucket}/{folder}'


class ListedObject(NamedTuple):
  """An object as a listing gives it, with what tells one version of it from another."""
  uri: str
  generation: Optional[int]
  crc32c: Optional[str]  # base64, as the API gives it
  size: Optional[int]


def objects(prefix: str, below: bool) -> Iterator[str]:
  """The objects whose names start with ``prefix`` (a gs:// uri), as gs:// uris; only those
  with no further '/' unless ``below``."""
  return (listed.uri for listed in _listed(prefix, below, 'name'))


def object_versions(prefix: str, below: bool) -> Iterator[ListedObject]:
  """objects(), each with its generation, CRC32C and size: fields of the same listing, so no
  request more than objects() makes."""
  return _listed(prefix, below, 'name,generation,crc32c,size')


def _listed(prefix: str, below: bool, fields: str) -> Iterator[ListedObject]:
  bucket, name = _split(prefix)
  for page in _pages(bucket, name, delimiter=None if below else '/', fields=f'items({fields}),nextPageToken'):
    for blob in page:
      yield ListedObject(f'gs://{bucket}/{blob.name}', blob.generation, blob.crc32c, blob.size)


def _split(uri: str) -> Tuple[str, str]:
  bucket, _, name = uri[len('gs://'):].partition('/')
  return bucket, name


def _pages(bucket: str, prefix: str, delimiter: Optional[str], fields: str):
  """A listing's pages, requested one at a time as they are read: no more than a page is held.

  Args:
    bucket: the Cloud Storage bucket listed.
    prefix: the start of the object names listed, within the bucket.
    delimiter: '/' to list one level (the objects beside ``prefix``, and its subfolders as a page's prefixes); None
      for every object below it.
    fields: the fields each page's response holds (a partial response): what is not asked for is not sent.
  """
  return beam_internals.storage_client().list_blobs(bucket, prefix=prefix, delimiter=delimiter, page_size=_PAGE_SIZE,
                                                    fields=fields).pages
