"""A manifest naming one image twice, or giving two images one source id: the first row wins."""
from beam_pipeline.core.inputs import repeated_rows
from beam_pipeline.core.messages import CheckedImage, Rejection


def _record(uri: str, row: int, label: str = 'cat') -> CheckedImage:
  return CheckedImage(uri, label, None, (), 'ab' * 32, 'ab' * 32, 10, 'jpeg', 2, 2, 3, False, 'cd' * 32, row=row)


def _name(row: int) -> str:
  return f'm.csv:row {row}'


def test_the_first_row_of_each_uri_is_kept_whatever_the_order():
  records = [_record('b.jpg', 9), _record('a.jpg', 7, 'dog'), _record('a.jpg', 3), _record('b.jpg', 2),
             _record('a.jpg', 5)]
  for order in (records, records[::-1]):
    kept, rejected = repeated_rows.first_of_each_uri(order, _name)
    assert sorted((r.uri, r.row) for r in kept) == [('a.jpg', 3), ('b.jpg', 2)]
    assert sorted(rejected) == [
        Rejection('m.csv:row 5', 'duplicate_row', 'names a.jpg again: m.csv:row 3 names it first, and is kept'),
        Rejection('m.csv:row 7', 'duplicate_row', "names a.jpg again: m.csv:row 3 names it first, and is kept; its "
                                                  "label 'dog' differs from that row's 'cat'"),
        Rejection('m.csv:row 9', 'duplicate_row', 'names b.jpg again: m.csv:row 2 names it first, and is kept')]


def test_copies_under_other_names_are_no_repeated_rows():
  kept, rejected = repeated_rows.first_of_each_uri([_record('a.jpg', 1), _record('b.jpg', 2)], _name)
  assert len(kept) == 2 and rejected == []


def test_one_given_source_id_is_the_first_rows():
  records = [_record('c.jpg', 8), _record('b.jpg', 4), _record('b.jpg', 6), _record('a.jpg', 5)]
  kept, *rejected = repeated_rows.first_of_one_source_id(records, '17', 'image/source_id', _name)
  assert (kept.uri, kept.row) == ('b.jpg', 4)
  assert sorted((r.uri, r.reason) for r in rejected) == [
      ('m.csv:row 5', 'bad_manifest_row'), ('m.csv:row 6', 'duplicate_row'), ('m.csv:row 8', 'bad_manifest_row')]
  assert "its image/source_id 17 is also m.csv:row 4's (for b.jpg)" in min(rejected).detail
