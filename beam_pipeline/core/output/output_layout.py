"""The output's layout: the name of every file the tool writes, the patterns that recognise them,
and how its text files are encoded.

One module names them all, so the writer, the commit, the ownership check, verify,
inspect, the readers and TensorFlow Datasets' metadata never disagree:

    beam_pipeline.json                   the run record, and the commit marker (written last)
    train-00003-of-00012.tfrecord[.gz]   shards, numbered from 0 per split
    train-00003.tfrecord[.gz]            an --incremental output's shards: no count in the name,
                                           since a run adds shards without renaming the others
    catalog/train-00003.jsonl            an --incremental output's catalog: per shard, what each
                                           record was made from (catalog_entries.py)
    catalog/by_uri/00003-of-00016.jsonl  the same entries looked up by uri, and by content hash
    catalog/by_content/00003-of-00016.jsonl  (catalog_lookup.py)
    catalog/near/nodes-00003-of-00016.bin     the near-copy index: node files, and band files
    catalog/near/band02-00003-of-00016.bin      (core/planning/near_index.py)
    train-00003-of-00012.tfrecord.idx    their index files (--index_files)
    errors-00000-of-00001.jsonl          the rejections, in as many files as their number needs
    labels.txt, label_map.pbtxt          the classes (label_map with --annotations)
    dataset_info.json, features.json,    TensorFlow Datasets' metadata (dataset_info.json was
      image.class.label.labels.txt         this tool's own marker before 0.2)
    transform_fn/, transformed_metadata/, metadata/   the tf.Transform graph
    .beam_pipeline-lock                  the lock of the run writing the output
    .beam_pipeline-tmp/RUN/              a run's staging folder, with its log if it failed
"""
import re
from typing import List

from beam_pipeline.core import schemas
from beam_pipeline.core.messages import ShardPlan

RUN_RECORD = 'beam_pipeline.json'
OLD_RUN_RECORD = 'dataset_info.json'  # this tool's run record before 0.2, now TensorFlow Datasets' name again
LABELS_TXT = 'labels.txt'
LABEL_MAP = 'label_map.pbtxt'
TFDS_DATASET_INFO = 'dataset_info.json'
TFDS_FEATURES = 'features.json'
LOCK = '.beam_pipeline-lock'
TEMP_DIR = '.beam_pipeline-tmp'
EARLIER_RECORD = 'earlier-' + RUN_RECORD  # in a run's staging folder during its commit: the record it replaces
FAILED_RUN_LOG = 'failed-run.log'  # in a failed run's staging folder

SHARD_SUFFIX = '.tfrecord'
GZIP_SHARD_SUFFIX = '.tfrecord.gz'
SHARD_SUFFIXES = (SHARD_SUFFIX, GZIP_SHARD_SUFFIX)
INDEX_SUFFIX = '.idx'
_DIGITS = '[0-9]' * 5
# Shards of both layouts as a glob ('train-00003-of-00012' ends in five digits too); it matches
# their index files as well, which SHARD_SUFFIXES tell apart.
SHARD_GLOB = f'*-{_DIGITS}{SHARD_SUFFIX}*'
# Shards and their index files, of both layouts, as a regular expression (split names are lowercase words).
SHARD_PATTERN = (rf'[a-z][a-z0-9_]*-\d{{5}}(?:-of-\d{{5}})?{re.escape(SHARD_SUFFIX)}'
                 rf'(?:\.gz|{re.escape(INDEX_SUFFIX)})?')
# Shards in TensorFlow Datasets' template language: with a count, and an --incremental output's.
TFDS_SHARD_TEMPLATE = '{SPLIT}-{SHARD_X_OF_Y}.{FILEFORMAT}'
TFDS_INCREMENTAL_SHARD_TEMPLATE = '{SPLIT}-{SHARD_INDEX}.{FILEFORMAT}'
CATALOG_DIR = 'catalog'
CATALOG_PATTERN = rf'{CATALOG_DIR}/[a-z][a-z0-9_]*-\d{{5}}\.jsonl'
LOOKUP_DIR = f'{CATALOG_DIR}/by_uri'
CONTENT_LOOKUP_DIR = f'{CATALOG_DIR}/by_content'
LOOKUP_PATTERN = rf'{CATALOG_DIR}/by_(?:uri|content)/\d{{5}}-of-\d{{5}}(?:\.delta)?\.jsonl'
NEAR_INDEX_DIR = f'{CATALOG_DIR}/near'
NEAR_INDEX_PATTERN = rf'{NEAR_INDEX_DIR}/(?:nodes|band\d{{2}})-\d{{5}}-of-\d{{5}}\.bin'
ERRORS_PATTERN = r'errors-\d{5}-of-\d{5}\.jsonl'

# The tf.Transform graph: its directories, and the exact files tf.Transform writes there (a
# user's file in a directory named metadata/ is not ours).
TRANSFORM_DIRECTORIES = ('transform_fn', 'transformed_metadata', 'metadata')
VOCABULARY_FILE = 'class_labels.txt'
_TRANSFORM_FILES = (rf'transform_fn/(?:saved_model\.pb|fingerprint\.pb|assets/{re.escape(VOCABULARY_FILE)}'
                    r'|variables/variables\.(?:index|data-\d{5}-of-\d{5}))'
                    r'|(?:transformed_metadata|metadata)/schema\.pbtxt(?:\.tmp[0-9a-f]{32})?')
# TensorFlow's atomic writes (schema.pbtxt) stage under this name; a kill leaves it behind.
TF_TEMP_NAME = re.compile(r'\.tmp[0-9a-f]{32}$')



def tfds_label_names(schema: str) -> str:
  """The file TensorFlow Datasets reads a ClassLabel's names from: named for the label's key, a
  feature of the top level (its '/'s as '.', as TFDS names it)."""
  return schemas.keys(schema)[schemas.LABEL].replace('/', '.') + '.labels.txt'


# The names file of 0.2's outputs, whose TFDS features nested the keys by their '/' (a rerun removes it).
OLD_TFDS_LABEL_NAMES = 'image-class-label.labels.txt'


# Files only a run's records can make ours: the same names may be a user's own shards.
LISTED_NAME = re.compile(
    rf'^(?:{SHARD_PATTERN}|{ERRORS_PATTERN}|{CATALOG_PATTERN}|{LOOKUP_PATTERN}|{NEAR_INDEX_PATTERN})$')
# Files ours by their names alone, in an output of ours (paths relative to it).
_FIXED = (RUN_RECORD, OLD_RUN_RECORD, LABELS_TXT, LABEL_MAP, LOCK, TFDS_FEATURES, OLD_TFDS_LABEL_NAMES,
          *(tfds_label_names(schema) for schema in schemas.SCHEMAS))
FIXED_NAME = re.compile(rf'^(?:{"|".join(map(re.escape, _FIXED))}|{_TRANSFORM_FILES}|{re.escape(TEMP_DIR)}/.*)$')


def shard_file(plan: ShardPlan, compression: str) -> str:
  """The name of the shard ``plan`` is written to: numbered from 0, zero-padded so that names
  sort in shard order; with the split's count, but for an --incremental output's (count 0)."""
  suffix = GZIP_SHARD_SUFFIX if compression == 'gzip' else SHARD_SUFFIX
  count = f'-of-{plan.count:05d}' if plan.count else ''
  return f'{plan.split}-{plan.index:05d}{count}{suffix}'


def near_node_file(slot: int, count: int) -> str:
  """The near-copy index's file of node slot ``slot`` of ``count``."""
  return f'{NEAR_INDEX_DIR}/nodes-{slot:05d}-of-{count:05d}.bin'


def near_band_file(band: int, file: int, count: int) -> str:
  """The near-copy index's file ``file`` of band ``band``, of ``count`` a band."""
  return f'{NEAR_INDEX_DIR}/band{band:02d}-{file:05d}-of-{count:05d}.bin'


def lookup_delta_file(lookup_file: str) -> str:
  """The file beside lookup file ``lookup_file`` that holds its changes since it was written."""
  return lookup_file[:-len('.jsonl')] + '.delta.jsonl'


def catalog_file(shard: str) -> str:
  """The catalog of an --incremental output's shard: what its records were made from."""
  return f'{CATALOG_DIR}/{shard.split(".", 1)[0]}.jsonl'


def shard_index(shard: str) -> int:
  """The index in the name of an --incremental output's shard."""
  return int(shard.split('.', 1)[0].rsplit('-', 1)[1])


def renumbered(shard: str, index: int) -> str:
  """The name of an --incremental output's shard under another index."""
  stem, suffix = shard.split('.', 1)
  return f'{stem.rsplit("-", 1)[0]}-{index:05d}.{suffix}'


def catalog_beside(file_path: str, name: str) -> str:
  """Where a worker writes the catalog of the shard ``name`` it writes to the local ``file_path``:
  under the same folder, as the output names it."""
  return file_path[:len(file_path) - len(name)] + catalog_file(name)


def tfds_template(incremental: bool) -> str:
  return TFDS_INCREMENTAL_SHARD_TEMPLATE if incremental else TFDS_SHARD_TEMPLATE


def index_file(shard: str) -> str:
  return shard + INDEX_SUFFIX


def errors_file(index: int, count: int) -> str:
  return f'errors-{index:05d}-of-{count:05d}.jsonl'


def errors_files(count: int) -> List[str]:
  return [errors_file(index, count) for index in range(count)]


def errors_pattern(count: int) -> str:
  """What beam_pipeline.json's ``errors_file`` says: the one file's name, or a glob of them all."""
  return errors_file(0, 1) if count == 1 else f'errors-*-of-{count:05d}.jsonl'


def staged(run: str, name: str) -> str:
  """``name`` in the staging folder of ``run``, relative to the output."""
  return f'{TEMP_DIR}/{run}/{name}'


def encoded(text: str) -> bytes:
  """Text as the output's files hold it: UTF-8, a name's lone surrogates (a local file name that
  is not UTF-8 reaches our JSON as them) as JSON's \\uXXXX escapes, which read back as the same
  name."""
  return text.encode('utf-8', 'backslashreplace')
