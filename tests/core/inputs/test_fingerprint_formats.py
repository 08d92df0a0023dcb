"""core/inputs/fingerprints.py: fingerprints made from metadata, as plain calls."""
import os

from beam_pipeline.core.inputs import fingerprints
from beam_pipeline.core.inputs.annotations import AnnotatedObject
from beam_pipeline.core.messages import InputItem


def test_each_kind_has_its_format_and_its_own_prefix():
  times_ns = (1, 1700000000123456789, 1700000000987654321)  # access, modification, change
  stat = os.stat_result((0o100644, 42, 0, 1, 0, 0, 1234, 0, 0, 0, *(t / 1e9 for t in times_ns), *times_ns))
  assert fingerprints.of_stat(stat) == 'file:1234:1700000000123456789:42:1700000000987654321'
  assert fingerprints.of_object(1795741017112052295, 'mnG7TA==', 5) == 'gcs:1795741017112052295:mnG7TA==:5'
  assert fingerprints.of_metadata(5, 1795741018.826545) == 'meta:5:1795741018.826545'
  assert fingerprints.of_metadata(5, 1795741018) == 'meta:5:1795741018.0'
  made = [fingerprints.of_stat(stat), fingerprints.of_object(7, '', 5), fingerprints.of_metadata(5, 7)]
  assert len(set(made)) == 3 and all(value.isascii() for value in made)


def test_metadata_that_cannot_tell_a_rewrite_gives_unknown():
  """Without a generation or a time, a rewrite of the same size would look unchanged: unknown ('')
  makes a comparison count the file as changed."""
  assert fingerprints.of_object(None, 'mnG7TA==', 5) == fingerprints.UNKNOWN == ''
  assert fingerprints.of_object(7, None, None) == ''
  assert fingerprints.of_object(7, None, 5) == 'gcs:7::5'
  assert fingerprints.of_metadata(5, 0.0) == fingerprints.of_metadata(5, None) == ''
  assert fingerprints.of_metadata(None, 1) == ''


def test_a_local_file_by_its_size_times_and_inode_and_a_link_by_what_it_points_to(tmp_path):
  photo = tmp_path / 'a.jpg'
  photo.write_bytes(b'12345')
  os.utime(photo, ns=(1, 1700000000123456789))
  stat = os.stat(photo)
  made = f'file:5:1700000000123456789:{stat.st_ino}:{stat.st_ctime_ns}'
  assert fingerprints.of_local_file(str(photo)) == made
  (tmp_path / 'link.jpg').symlink_to(photo)
  assert fingerprints.of_local_file(str(tmp_path / 'link.jpg')) == made
  os.utime(photo, ns=(1, 1700000000123456790))
  assert fingerprints.of_local_file(str(tmp_path / 'link.jpg')).startswith('file:5:1700000000123456790:')
  (tmp_path / 'dangling.jpg').symlink_to(tmp_path / 'gone.jpg')
  assert fingerprints.of_local_file(str(tmp_path / 'dangling.jpg')) == ''
  assert fingerprints.of_local_file(str(tmp_path / 'missing.jpg')) == ''


def test_a_file_rewritten_with_its_size_and_time_put_back_or_replaced_by_a_twin_is_seen(tmp_path):
  """What `touch -r` and some sync tools do: the same size, the modification time set back. The
  change time, which cannot be set back, and the inode of a file moved over it tell."""
  photo, twin = tmp_path / 'a.jpg', tmp_path / 'twin.jpg'
  photo.write_bytes(b'12345')
  os.utime(photo, ns=(1, 1700000000123456789))
  before = fingerprints.of_local_file(str(photo))
  while os.stat(photo).st_ctime_ns == int(before.rsplit(':', 1)[1]):  # a coarse clock: wait for it to move
    os.utime(photo, ns=(1, 1700000000123456789))
  photo.write_bytes(b'54321')
  os.utime(photo, ns=(1, 1700000000123456789))
  assert fingerprints.of_local_file(str(photo)) != before
  twin.write_bytes(b'54321')
  os.utime(twin, ns=(1, 1700000000123456789))
  twin_stat = os.stat(twin)
  os.replace(twin, photo)
  assert fingerprints.of_local_file(str(photo)).split(':')[3] == str(twin_stat.st_ino)


def test_only_a_change_of_the_file_s_fingerprint_leaves_the_bytes_to_decide():
  """A record's fingerprint whose file part alone changed: its bytes decide (a touched file keeps
  its record if they are the same); a changed label or row is a changed record whatever the bytes."""
  item = InputItem('/d/a.jpg', 'cat', fingerprint='file:5:7:1:2')
  record = fingerprints.of_record(item)
  touched = fingerprints.of_record(item._replace(fingerprint='file:5:7:9:3'))
  relabelled = fingerprints.of_record(item._replace(fingerprint='file:5:7:9:3', label='dog'))
  assert fingerprints.only_file_changed(touched, record)
  assert not fingerprints.only_file_changed(relabelled, record)
  assert not fingerprints.only_file_changed(record, record) and not fingerprints.only_file_changed('', record)
  row = fingerprints.of_record(item._replace(fingerprint=fingerprints.of_row('file:5:7:1:2', item)))
  touched_row = fingerprints.of_record(item._replace(fingerprint=fingerprints.of_row('file:6:8:1:2', item)))
  moved_row = fingerprints.of_record(item._replace(fingerprint=fingerprints.of_row('file:6:8:1:2',
                                                                                   item._replace(split='test'))))
  assert fingerprints.only_file_changed(touched_row, row) and not fingerprints.only_file_changed(moved_row, row)
  assert not fingerprints.only_file_changed(touched_row, record)  # a folder's file now named by a manifest


def test_a_row_adds_a_hash_of_what_it_says_to_its_file_s_fingerprint():
  item = InputItem('/d/a.jpg', 'cat', 'train', (('source', 'web'),), row=3)
  row = fingerprints.of_row('file:5:7', item)
  prefix, _, digest = row.partition('|row:')
  assert prefix == 'file:5:7' and len(digest) == 16 and int(digest, 16) >= 0
  assert fingerprints.of_row('file:5:7', item._replace(row=9)) == row  # rows above it added or removed
  changes = [dict(label='dog'), dict(label=None), dict(split='test'), dict(extras=(('source', 'lab'),)),
             dict(extras=()), dict(labels=('cat', 'dog'))]
  made = {fingerprints.of_row('file:5:7', item._replace(**change)) for change in changes}
  assert len(made) == len(changes) and row not in made
  assert fingerprints.of_row('file:5:8', item) != row
  assert fingerprints.of_row('', item) == ''


def test_a_row_s_box_is_part_of_it_but_not_its_row_number():
  box = AnnotatedObject('cat', 0.1, 0.2, 0.5, 0.6, where='m.csv:row 3')
  item = InputItem('gs://b/a.jpg', objects=(box,))
  row = fingerprints.of_row('gcs:7:x:5', item)
  assert fingerprints.of_row('gcs:7:x:5', item._replace(objects=(box._replace(where='m.csv:row 4'),))) == row
  assert fingerprints.of_row('gcs:7:x:5', item._replace(objects=(box._replace(xmax=0.7),))) != row


def test_an_image_that_several_rows_give_boxes_changes_with_any_of_them():
  rows = [fingerprints.of_row('file:5:7', InputItem('/d/a.jpg', label)) for label in ('cat', 'dog')]
  both = fingerprints.of_rows(rows)
  assert both.startswith('file:5:7|row:') and both not in rows
  assert fingerprints.of_rows(rows[::-1]) != both
  assert fingerprints.of_rows(rows[:1]) == rows[0]
  assert fingerprints.of_rows([rows[0], '']) == fingerprints.of_rows(['']) == ''


def test_surrogates_and_any_json_value_in_extras_make_a_fingerprint():
  extras = (('boxes', [[1, 2.5], {'x': None}]), ('name', 'caf\udce9'), ('nan', float('nan')))
  made = fingerprints.of_row('file:1:2', InputItem('/d/caf\udce9.jpg', 'c\u00e4t', extras=extras))
  assert made.isascii() and made == fingerprints.of_row('file:1:2', InputItem('/x.jpg', 'c\u00e4t', extras=extras))


def test_an_object_s_crc32c_and_size_tell_whether_its_bytes_changed_a_file_s_cannot():
  def record(fingerprint: str) -> str:
    return fingerprints.of_record(InputItem('gs://b/a.jpg', 'cat', fingerprint=fingerprint))
  assert fingerprints.same_bytes(record('gcs:1:mnG7TA==:5'), record('gcs:2:mnG7TA==:5')) is True
  assert fingerprints.same_bytes(record('gcs:1:mnG7TA==:5'), record('gcs:2:AAAAAA==:5')) is False
  assert fingerprints.same_bytes(record('gcs:1:mnG7TA==:5'), record('gcs:2:mnG7TA==:6')) is False
  assert fingerprints.same_bytes(record('gcs:1::5'), record('gcs:2::5')) is None
  assert fingerprints.same_bytes(record('file:5:7:1:2'), record('file:5:7:9:3')) is None
  row = fingerprints.of_row('gcs:1:mnG7TA==:5', InputItem('gs://b/a.jpg', 'cat'))
  moved = fingerprints.of_row('gcs:2:mnG7TA==:5', InputItem('gs://b/a.jpg', 'cat'))
  assert fingerprints.same_bytes(record(moved), record(row)) is True
