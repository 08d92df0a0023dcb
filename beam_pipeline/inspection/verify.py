"""``python -m beam_pipeline verify OUTPUT``: every record of a completed output, checked again.

For every shard that beam_pipeline.json names: the file is there, has its recorded
size and record count, and TensorFlow's TFRecord reader accepts its framing (length
and data CRCs); every record parses, decodes with
``tf.io.decode_image(channels=3, expand_animations=False)`` to its recorded height
and width, and its image bytes match ``image/key/sha256``; with --index_files, its index
file gives every record's offset and length; with --embedding_model, its
embedding has the recorded shape and finite values (under --embedding_only, which
stores no image, that is what is checked); with --annotations, its object lists are as long
as each other, its boxes lie within the image the right way round, and its class labels and
texts name classes of labels.txt, and with --include_masks each object has a mask that
decodes to the image's size. A file named like a shard
that beam_pipeline.json does not list is a problem too. Shards are checked side by
side, and TensorFlow decodes each one's records on every core. What the image
decoders print themselves (libjpeg's "Corrupt JPEG data: ..." for a JPEG that still
decodes) is caught, and reported once, not shown line by line.
"""
import collections
import concurrent.futures
import hashlib
import math
import os
import re
from typing import Dict, FrozenSet, List, NamedTuple, Optional, Sequence

import tensorflow as tf

from beam_pipeline.core import schemas, uris
from beam_pipeline.core.console import native_output
from beam_pipeline.core.images import decoder_messages
from beam_pipeline.core.writing import record_index
from beam_pipeline.core.output.run_record import Embedding, RunRecord, Shard
from beam_pipeline.core.settings import COMPRESSIONS
from beam_pipeline.inspection import files
from beam_pipeline.core.console.progress_counts import Tally
from beam_pipeline.core.console.quantities import counted

# Problems listed per shard before its check gives up on it.
MAX_PROBLEMS_PER_SHARD = 10
# What TensorFlow puts ahead of a reader's error ({{function_node __wrapped__IteratorGetNext...}}),
# and its words for a damaged file.
_GRAPH_NODE = re.compile(r'\{\{function_node [^}]*\}\}\s*')
_RECORD_AT = re.compile(r'(corrupted|truncated) record at (\d+)')
# A record's objects (--annotations): every list holds one value per object.
OBJECT_FIELDS = (schemas.OBJECT_XMIN, schemas.OBJECT_YMIN, schemas.OBJECT_XMAX, schemas.OBJECT_YMAX,
                 schemas.OBJECT_LABEL, schemas.OBJECT_TEXT, schemas.OBJECT_AREA, schemas.OBJECT_IS_CROWD,
                 schemas.OBJECT_DIFFICULT, schemas.OBJECT_TRUNCATED)
_OBJECT_TYPES = {schemas.OBJECT_LABEL: tf.int64, schemas.OBJECT_TEXT: tf.string, schemas.OBJECT_IS_CROWD: tf.int64,
                 schemas.OBJECT_DIFFICULT: tf.int64, schemas.OBJECT_TRUNCATED: tf.int64}


class Problem(NamedTuple):
  shard: str
  record: Optional[int]  # its index in the shard; None for the whole file
  what: str

  def __str__(self) -> str:
    where = self.shard if self.record is None else f'{self.shard}, record {self.record}'
    return f'{where}: {self.what}'


class Report(NamedTuple):
  problems: List[Problem]
  shards: int
  records: int  # records read and checked
  decoder_warnings: List[str]  # lines the image decoders printed while the records decoded
  unread: int = 0  # shards checked for their presence and size only (to_read)


def to_read(info: RunRecord, everything: bool) -> Optional[FrozenSet[str]]:
  """The shards whose records a check reads: those the last update of an --incremental output
  wrote, unless ``everything``; None: all of them. An update reads what it keeps of each shard
  it writes again and checks each catalog against its checksum, and its other shards are as
  the run that wrote them left them, so a daily check need not read the whole dataset again."""
  update = info.update
  if everything or update is None or update.written_files is None:
    return None
  return frozenset(update.written_files)


def verify(output: str, info: RunRecord, tally: Optional[Tally] = None, everything: bool = True) -> Report:
  """Checks ``output`` against its beam_pipeline.json, as the module says.

  Args:
    output: the output directory, local or remote.
    info: the output's beam_pipeline.json, which lists its shards and what they hold.
    tally: counts each record read, and whether it had a problem (verify's progress); None counts nothing.
    everything: read every shard's records (verify --all); else only the shards to_read names are read, and the
      others' sizes are checked.
  """
  listed = {shard.file: shard for split in info.splits.values() for shard in split.shards}
  sizes = files.shard_sizes(output)
  present = set(sizes)
  problems = [Problem(name, None, 'listed in beam_pipeline.json but missing') for name in sorted(set(listed) - present)]
  problems += [Problem(name, None, 'not listed in beam_pipeline.json') for name in sorted(present - set(listed))]
  keys = schemas.keys(info.schema)
  compression = COMPRESSIONS[info.compression]
  checked = sorted(set(listed) & present)
  reading = to_read(info, everything)
  if reading is not None:
    unread = sorted(set(checked) - reading)
    problems += [Problem(name, None, f'{size} bytes, beam_pipeline.json says {listed[name].num_bytes}')
                 for name in unread if (size := sizes[name]) != listed[name].num_bytes]
    checked = sorted(set(checked) & reading)
  classes = info.labels if info.options.get('annotations') else None
  masks = bool(info.options.get('include_masks'))
  with native_output.captured() as decoders, concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
    mark = decoders.mark()
    results = list(pool.map(lambda name: _check_shard(uris.join(output, name), listed[name], sizes[name], keys,
                                                      compression, info.embedding, classes, tally, masks), checked))
    said = decoders.since(mark)
  for shard_problems, _ in results:
    problems += shard_problems
  return Report(sorted(problems, key=lambda p: (p.shard, p.record is None, p.record or 0)), len(listed),
                sum(records for _, records in results), decoder_messages.lines(said), len(listed) - len(checked))


def _check_shard(path: str, shard: Shard, size: int, keys: Dict[str, str], compression: str,
                 embedding: Optional[Embedding], classes: Optional[List[str]], tally: Optional[Tally],
                 masks: bool = False) -> tuple:
  """(problems, records read) of one shard, whose check gives up at MAX_PROBLEMS_PER_SHARD problems.

  Args:
    path: the shard's file, local or remote (read from a local copy).
    shard: what beam_pipeline.json says of it: its size, record count and index file.
    size: its size as the output's listing gives it (files.shard_sizes).
    keys: the records' feature keys, by field (the output's schema).
    compression: the shards' compression, as TensorFlow's TFRecord reader names it.
    embedding: what beam_pipeline.json says of the embeddings (--embedding_model); None where there are none.
    classes: labels.txt's names, when its records hold objects (--annotations); else None.
    tally: counts each record read, and whether it had a problem; None counts nothing.
    masks: whether each object has a mask too (--include_masks).
  """
  name = shard.file
  problems = []
  if size != shard.num_bytes:
    problems.append(Problem(name, None, f'{size} bytes, beam_pipeline.json says {shard.num_bytes}'))
  index = 0
  with files.local_copy(path) as local:
    while len(problems) < MAX_PROBLEMS_PER_SHARD:
      records = _decoded(local, keys, compression, index, embedding, classes, masks)
      try:
        for record in records:
          problem = _record_problem(record, keys, embedding, classes, masks)
          if problem:
            problems.append(Problem(name, index, problem))
          index += 1
          if tally:
            tally.add(1, bool(problem))
        break
      except tf.errors.DataLossError as e:
        problems.append(Problem(name, index, f'the file is damaged here: {_message(e)}'))
        break
      except tf.errors.InvalidArgumentError as e:  # this record does not parse or decode; check on after it
        problems.append(Problem(name, index, f'does not parse or decode: {_message(e)}'))
        index += 1
        if tally:
          tally.add(1, 1)
    if index != shard.num_examples and len(problems) < MAX_PROBLEMS_PER_SHARD:
      problems.append(Problem(name, None, f'{counted(index, "record")} read, beam_pipeline.json says '
                                          f'{shard.num_examples}'))
    if shard.index_file and not problems:
      problems += _index_problems(path, local, shard)
  return problems, index


def _index_problems(path: str, local: str, shard: Shard) -> List[Problem]:
  """Whether the shard's index file (--index_files) gives every record's offset and length;
  ``local``: the shard's local copy (files.local_copy)."""
  index_path = path[:len(path) - len(shard.file)] + shard.index_file
  with open(local, 'rb') as f:
    expected = record_index.text(record_index.data_lengths(f)).splitlines()
  try:
    with files.open_text(index_path) as f:
      lines = f.read().splitlines()
  except (OSError, tf.errors.NotFoundError):
    return [Problem(shard.file, None, f'its index file {shard.index_file} is missing')]
  wrong = next((i for i, (line, want) in enumerate(zip(lines, expected)) if line != want), None)
  if wrong is not None:
    return [Problem(shard.file, None, f'line {wrong + 1} of its index file {shard.index_file} says '
                                         f'"{lines[wrong]}", the record is at "{expected[wrong]}"')]
  if len(lines) != len(expected):
    return [Problem(shard.file, None, f'its index file {shard.index_file} has {len(lines)} lines '
                                         f'for {len(expected)} records')]
  return []


def _decoded(path: str, keys: Dict[str, str], compression: str, start: int, embedding: Optional[Embedding],
             classes: Optional[List[str]], masks: bool = False) -> tf.data.Dataset:
  """The shard's records from index ``start`` on: the fields the check needs, the decoded
  image's shape, whether the embedding's values are all finite, and whether the objects are
  sound (so that a sound record costs Python one flag, not a walk over its objects).

  Args:
    path: the shard's local file.
    keys: the records' feature keys, by field (the output's schema).
    compression: the shard's compression, as TensorFlow's TFRecord reader names it.
    start: the index of the first record read: 0, or the one after a record that did not parse or decode.
    embedding: the output's embeddings, read with each record; under --embedding_only, which stores no image, the
      record's image is not read. None where it holds none.
    classes: labels.txt's names, which the objects' class labels and texts must name; None reads no objects.
    masks: whether each object's mask is read and decoded for its size.
  """
  images = not embedding or embedding.images_stored
  spec = {keys[schemas.IMAGE]: tf.io.FixedLenFeature([], tf.string)} if images else {}
  for field, dtype in ((schemas.HEIGHT, tf.int64), (schemas.WIDTH, tf.int64), (schemas.SHA256, tf.string)):
    if field in keys and images:
      spec[keys[field]] = tf.io.FixedLenFeature([], dtype)
  if embedding:
    spec[keys[schemas.EMBEDDING]] = tf.io.FixedLenFeature([embedding.num_values], tf.float32)
    spec[keys[schemas.EMBEDDING_SHAPE]] = tf.io.FixedLenFeature([len(embedding.output_shape)], tf.int64)
  if classes is not None:
    for field in OBJECT_FIELDS:
      spec[keys[field]] = tf.io.VarLenFeature(_OBJECT_TYPES.get(field, tf.float32))
  if masks:
    spec[keys[schemas.OBJECT_MASK]] = tf.io.VarLenFeature(tf.string)

  def decode(serialized: tf.Tensor) -> Dict[str, tf.Tensor]:
    record = tf.io.parse_single_example(serialized, spec)
    if images:
      record['shape'] = tf.shape(tf.io.decode_image(record[keys[schemas.IMAGE]], channels=3,
                                                    expand_animations=False))
    if embedding:
      record['finite'] = tf.reduce_all(tf.math.is_finite(record[keys[schemas.EMBEDDING]]))
    if classes is not None:
      for field in OBJECT_FIELDS:
        record[keys[field]] = record[keys[field]].values
      record['objects_sound'] = _objects_sound(record, keys, classes)
    if masks:
      record[keys[schemas.OBJECT_MASK]] = record[keys[schemas.OBJECT_MASK]].values
      record['mask_shapes'] = tf.map_fn(lambda png: tf.shape(tf.io.decode_png(png, channels=1))[:2],
                                        record[keys[schemas.OBJECT_MASK]], fn_output_signature=tf.int32)
    return record

  return (tf.data.TFRecordDataset(path, compression_type=compression, buffer_size=8 * 2**20)
          .skip(start)
          .map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
          .prefetch(tf.data.AUTOTUNE))


def _objects_sound(record: Dict[str, tf.Tensor], keys: Dict[str, str], classes: Sequence[str]) -> tf.Tensor:
  """Whether every object list is as long as the others, and every object's box and class are
  sound (see _object_problem), as one flag of the graph. A comparison with NaN is false, so a
  box within [0, 1] is finite too."""
  sizes = tf.stack([tf.size(record[keys[field]]) for field in OBJECT_FIELDS])

  def each_object_sound() -> tf.Tensor:
    xmin, ymin, xmax, ymax = (record[keys[field]] for field in OBJECT_FIELDS[:4])
    labels, texts = record[keys[schemas.OBJECT_LABEL]], record[keys[schemas.OBJECT_TEXT]]
    known = (labels >= 1) & (labels <= len(classes))
    names = tf.gather(tf.constant(list(classes) or [''], tf.string),
                      tf.clip_by_value(labels, 1, max(len(classes), 1)) - 1)
    return tf.reduce_all((xmin >= 0) & (ymin >= 0) & (xmax <= 1) & (ymax <= 1) & (xmin < xmax) & (ymin < ymax)
                         & known & tf.equal(names, texts))

  return tf.cond(tf.reduce_all(tf.equal(sizes, sizes[0])), each_object_sound, lambda: tf.constant(False))


def _record_problem(record: Dict[str, tf.Tensor], keys: Dict[str, str], embedding: Optional[Embedding],
                    classes: Optional[List[str]], masks: bool = False) -> Optional[str]:
  """The first thing wrong with a decoded record, in words; None for a sound one.

  Args:
    record: the record, as _decoded gives it.
    keys: the records' feature keys, by field (the output's schema).
    embedding: the output's embeddings, whose shape the record's must have; None where it holds none.
    classes: labels.txt's names, when records hold objects; None checks no objects.
    masks: whether each object must have a mask of the image's size.
  """
  if embedding:
    shape = [int(side) for side in record[keys[schemas.EMBEDDING_SHAPE]]]
    if shape != embedding.output_shape:
      return f'its embedding is shaped {shape}, beam_pipeline.json says {embedding.output_shape}'
    if not bool(record['finite']):
      return 'its embedding holds values that are not finite (NaN or infinity)'
  if not embedding or embedding.images_stored:
    problem = _image_problem(record, keys)
    if problem:
      return problem
  if classes is not None and not bool(record['objects_sound']):
    return _object_problem(record, keys, classes)
  if masks:
    return _mask_problem(record, keys)
  return None


def _mask_problem(record: Dict[str, tf.Tensor], keys: Dict[str, str]) -> Optional[str]:
  """Whether each object has one mask of the image's size (--include_masks)."""
  objects, shapes = len(record[keys[schemas.OBJECT_XMIN]]), record['mask_shapes'].numpy().tolist()
  if len(shapes) != objects:
    return f'it has {counted(len(shapes), "mask")} for {counted(objects, "object")}'
  size = [int(record[keys[schemas.HEIGHT]]), int(record[keys[schemas.WIDTH]])]
  for number, shape in enumerate(shapes):
    if shape != size:
      return f'object {number}\'s mask is {shape[1]}x{shape[0]}, the image {size[1]}x{size[0]}'
  return None


def _image_problem(record: Dict[str, tf.Tensor], keys: Dict[str, str]) -> Optional[str]:
  height, width = (int(v) for v in record['shape'][:2])
  if schemas.HEIGHT in keys:
    recorded = int(record[keys[schemas.HEIGHT]]), int(record[keys[schemas.WIDTH]])
    if recorded != (height, width):
      return f'decodes to {width}x{height}, recorded as {recorded[1]}x{recorded[0]}'
  if schemas.SHA256 in keys:
    digest = hashlib.sha256(record[keys[schemas.IMAGE]].numpy()).hexdigest()
    if digest != record[keys[schemas.SHA256]].numpy().decode('ascii', 'replace'):
      return 'its image bytes do not match image/key/sha256'
  return None


def _object_problem(record: Dict[str, tf.Tensor], keys: Dict[str, str], classes: Sequence[str]) -> str:
  """Why _objects_sound said no, for the first object it is true of (objects counted from 0,
  as records are)."""
  lists = {keys[field]: record[keys[field]].numpy().tolist() for field in OBJECT_FIELDS}
  sizes = collections.Counter(len(values) for values in lists.values())
  usual = sizes.most_common(1)[0][0]
  odd = [f'{key} has {counted(len(values), "value")}' for key, values in lists.items() if len(values) != usual]
  if odd:
    return f'its object lists differ in length: {", ".join(odd)}, the others {usual}'
  boxes = zip(*(lists[keys[field]] for field in OBJECT_FIELDS[:4]))
  texts = lists[keys[schemas.OBJECT_TEXT]]
  for number, ((xmin, ymin, xmax, ymax), label) in enumerate(zip(boxes, lists[keys[schemas.OBJECT_LABEL]])):
    box = f'object {number}\'s box (xmin {xmin:g}, ymin {ymin:g}, xmax {xmax:g}, ymax {ymax:g})'
    if not all(math.isfinite(side) for side in (xmin, ymin, xmax, ymax)):
      return f'{box} holds values that are not finite (NaN or infinity)'
    if not all(0 <= side <= 1 for side in (xmin, ymin, xmax, ymax)):
      return f'{box} is not within [0, 1] (a box is fractions of the image\'s width and height)'
    if not (xmin < xmax and ymin < ymax):
      return f'{box} is empty or inverted: its xmin must be below its xmax and its ymin below its ymax'
    if not 1 <= label <= len(classes):
      return f'object {number}\'s class label {label} is not an id of labels.txt\'s classes (1 to {len(classes)})'
    text = texts[number].decode('utf-8', 'replace')
    if text != classes[label - 1]:
      return f'object {number}\'s class text is "{text}", but labels.txt names class {label} "{classes[label - 1]}"'
  return 'its objects fail the check, for no reason found again in Python'


def _message(error: tf.errors.OpError) -> str:
  """TensorFlow's error in our words: without the graph node it names, and its record
  offsets as bytes of the file."""
  text = _GRAPH_NODE.sub('', error.message or type(error).__name__).splitlines()[0].split('[Op:')[0].strip()
  known = _RECORD_AT.fullmatch(text)
  if known:
    what = 'a record fails its checksum' if known[1] == 'corrupted' else 'the file ends inside a record'
    return f'{what} (at byte {int(known[2]):,})'
  return text[:300]
