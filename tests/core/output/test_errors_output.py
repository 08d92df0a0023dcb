"""The errors output's layout: how many files, which one lists an input, and their bytes."""
import hashlib
import json

from beam_pipeline.core.output import errors_output, output_layout
from beam_pipeline.core.messages import Rejection


def test_files_hold_at_most_about_the_bound_and_one_file_is_todays_name():
  assert [errors_output.num_files(n, per_file=10) for n in (0, 1, 10, 11, 95)] == [1, 1, 1, 2, 10]
  assert output_layout.errors_files(1) == ['errors-00000-of-00001.jsonl']
  assert output_layout.errors_pattern(1) == 'errors-00000-of-00001.jsonl'
  assert output_layout.errors_files(3)[2] == 'errors-00002-of-00003.jsonl'
  assert output_layout.errors_pattern(3) == 'errors-*-of-00003.jsonl'


def test_an_inputs_file_depends_on_its_uri_alone_and_spreads_them_evenly():
  uris = [f'gs://bucket/photos/{i:07d}.jpg' for i in range(20_000)]
  counts = [0] * 8
  for uri in uris:
    counts[errors_output.file_index(uri, 8)] += 1
  assert errors_output.file_index(uris[0], 8) == errors_output.file_index(str(uris[0]), 8)
  assert min(counts) > 0.9 * 20_000 / 8 and max(counts) < 1.1 * 20_000 / 8, counts
  # sha256's first 8 bytes, as big-endian integer, modulo the count: fixed, so that no
  # Python's salted hash can move an input to another file between runs.
  assert errors_output.file_index('a', 1000) == int('ca978112ca1bbdca', 16) % 1000
  # A Latin-1 file name, as os.listdir gives it on a UTF-8 system: its bytes are hashed.
  assert errors_output.file_index('/in/caf\udce9.jpg', 2**64) == int.from_bytes(
      hashlib.sha256(b'/in/caf\xe9.jpg').digest()[:8], 'big')


def test_a_file_is_sorted_by_uri_and_counted_by_reason():
  rejected = [Rejection('/b.jpg', 'empty', ''), Rejection('/a.jpg', 'truncated', 'ends at 9'),
              Rejection('/c.jpg', 'empty', '')]
  lines = [json.loads(line) for line in errors_output.file_text(rejected).splitlines()]
  assert [line['uri'] for line in lines] == ['/a.jpg', '/b.jpg', '/c.jpg']
  assert errors_output.by_reason(rejected) == {'empty': 2, 'truncated': 1}
  assert errors_output.file_text([]) == ''
