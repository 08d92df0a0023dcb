"""Index files: what DALI's and the tfrecord package's tools would write for our shards."""
import io

import pytest
import tensorflow as tf

from beam_pipeline.core.writing import record_index


def _shard(path, datas):
  with tf.io.TFRecordWriter(str(path)) as writer:
    for data in datas:
      writer.write(data)
  return path.read_bytes()


def _tool_index(data: bytes) -> str:
  """The tfrecord package's create_index, restated: offset, then bytes up to the next record."""
  stream, lines = io.BytesIO(data), []
  while True:
    start = stream.tell()
    header = stream.read(8)
    if not header:
      return ''.join(lines)
    stream.read(4 + int.from_bytes(header, 'little') + 4)
    lines.append(f'{start} {stream.tell() - start}\n')


@pytest.mark.parametrize('datas', [[], [b''], [b'x' * 5], [b'a' * n for n in (0, 1, 300, 70_000, 2)]])
def test_the_index_of_lengths_is_the_tools_index_and_lengths_are_read_back(tmp_path, datas):
  data = _shard(tmp_path / 'shard.tfrecord', datas)
  assert record_index.text(len(d) for d in datas) == _tool_index(data)
  assert list(record_index.data_lengths(io.BytesIO(data))) == [len(d) for d in datas]


def test_a_file_cut_inside_a_record_is_an_error(tmp_path):
  data = _shard(tmp_path / 'shard.tfrecord', [b'abc', b'defgh'])
  for cut in (len(data) - 1, len(data) - 10, 5):
    with pytest.raises(ValueError, match='ends inside a record'):
      list(record_index.data_lengths(io.BytesIO(data[:cut])))


@pytest.mark.parametrize('datas', [[], [b''], [b'x' * 5], [b'a' * n for n in (0, 1, 300, 70_000, 2)]])
def test_the_checked_spans_are_the_tools_index(tmp_path, datas):
  """Where each framed record lies, as the tfrecord package's index tool finds it."""
  data = _shard(tmp_path / 'shard.tfrecord', datas)
  assert ''.join(f'{offset} {size}\n' for offset, size in record_index.checked_spans(data)) == _tool_index(data)


def test_a_flipped_bit_or_a_cut_fails_the_checked_spans(tmp_path):
  """A bit flipped in a length or in data fails its CRC-32C; a file cut short ends inside a record."""
  data = _shard(tmp_path / 'shard.tfrecord', [b'abc', b'defgh' * 100, b'ij'])
  second = 12 + 3 + 4
  for position, error in [(second + 2, 'the length of the record at byte 19 fails its checksum'),
                          (second + 12 + 7, 'the data of the record at byte 19 fails its checksum'),
                          (len(data) - 1, 'the data of the record at byte 535 fails its checksum')]:
    flipped = bytearray(data)
    flipped[position] ^= 0x10
    with pytest.raises(ValueError, match=error):
      record_index.checked_spans(bytes(flipped))
  for cut, error in [(len(data) - 1, 'ends inside the record at byte 535'), (5, 'inside the header of the record')]:
    with pytest.raises(ValueError, match=error):
      record_index.checked_spans(data[:cut])
