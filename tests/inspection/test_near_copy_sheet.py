"""``inspect --near_duplicates`` and ``--duplicates`` on a run record written here, whose groups
name small PNGs (and one file that is gone): the command runs in this process (cli.main)."""
import dataclasses
import io
from typing import Optional

import pytest
from PIL import Image

from beam_pipeline import cli
from beam_pipeline.cli import arguments
from beam_pipeline.core.messages import ShardReport
from beam_pipeline.core.output import run_totals
from beam_pipeline.core.output.run_record import NearDuplicates, RunRecord
from beam_pipeline.inspection import contact_sheet, near_copy_sheet, overview


def _png(path, shade: int) -> str:
  Image.new('RGB', (40, 30), (shade, 255 - shade, 90)).save(path)
  return str(path)


def _record(near: Optional[NearDuplicates] = None, exact=(), removed: bool = False) -> RunRecord:
  labels = ['cat', 'dog']
  report = ShardReport(split='train', file='train-00000-of-00001.tfrecord', num_examples=2, num_bytes=200,
                       num_reencoded=0, num_resized=0, num_rotated=0, num_damaged_jpeg=0,
                       **run_totals.image_statistics(labels, [40, 40], [900, 900]))
  exact = [group if isinstance(group, dict) else list(group) for group in exact]
  return run_totals.build(
      written=run_totals.written_totals([report]), labels=labels, errors_by_reason={}, num_errors_files=1,
      duplicates={'num_groups': len(exact),
                  'num_extra_copies': sum(len(group['images'] if isinstance(group, dict) else group) - 1
                                          for group in exact),
                  'groups': exact},
      dedupe=removed, num_removed=0, settings={'input': '/in/**', 'input_kind': 'directory', 'output': '/out',
                                               'schema': 'default', 'compression': 'none'},
      runner='DirectRunner', near_copies=near)


def _near(groups, removed: bool = False, num_groups: Optional[int] = None) -> NearDuplicates:
  return NearDuplicates(distance=10, num_groups=num_groups or len(groups),
                        num_images=sum(len(group['images']) for group in groups), removed=removed,
                        num_label_conflicts=sum(bool(group.get('label_conflict')) for group in groups) or None,
                        groups=groups)


def _output(tmp_path, record: RunRecord):
  out = tmp_path / 'out'
  out.mkdir(exist_ok=True)
  (out / 'beam_pipeline.json').write_text(record.to_json(), encoding='utf-8')
  return out


@pytest.fixture
def groups(tmp_path):
  """Three groups of near copies, the second with conflicting labels and a file that is gone."""
  pictures = tmp_path / 'pictures'
  pictures.mkdir()
  a, b, c, d, e = (_png(pictures / f'{name}.png', shade) for name, shade in zip('abcde', (10, 60, 110, 160, 210)))
  gone = str(pictures / 'gone.png')
  return [{'images': [a, b], 'split': 'train'},
          {'images': sorted([c, d, gone]), 'split': 'validation', 'label_conflict': True},
          {'images': [e, a], 'split': 'test'}]


def _height(path) -> int:
  with Image.open(path) as sheet:
    return sheet.height


def test_the_sheet_draws_a_row_per_group_and_an_unreadable_file_as_such(groups, tmp_path, capsys):
  heights = []
  for count in (1, 3):
    out = _output(tmp_path, _record(_near(groups[:count])))
    sheet = tmp_path / f'near-{count}.png'
    assert cli.main(['inspect', str(out), f'--near_duplicates={sheet}']) == 0
    assert f'Near copies: {sheet}' in capsys.readouterr().out
    heights.append(_height(sheet))
  row = near_copy_sheet.HEADER + contact_sheet.CELL + near_copy_sheet.CAPTION + near_copy_sheet.GAP
  assert heights[1] - heights[0] == 2 * row

  cells = near_copy_sheet.cells(groups[1])
  assert [(cell.name, cell.status, cell.image is None) for cell in cells] == [
      ('c.png', 'validation', False), ('d.png', 'validation', False), ('gone.png', 'validation', True)]
  assert near_copy_sheet.header(2, groups[1]) == 'Group 2: 3 images, labels conflict'


def test_the_sheet_draws_the_first_rows_of_many_groups_and_a_wide_group_in_part(groups):
  wide = {'images': [f'/nowhere/{index}.png' for index in range(near_copy_sheet.PER_ROW + 3)], 'split': 'train'}
  many = [wide] + groups * near_copy_sheet.ROWS
  sheet = near_copy_sheet.draw('title', many, load=lambda uri: None)
  row = near_copy_sheet.HEADER + contact_sheet.CELL + near_copy_sheet.CAPTION + near_copy_sheet.GAP
  assert sheet.height == 40 + near_copy_sheet.ROWS * row
  assert sheet.width == near_copy_sheet.GAP + near_copy_sheet.PER_ROW * (contact_sheet.CELL + near_copy_sheet.GAP)
  assert near_copy_sheet.header(1, wide) == f'Group 1: 11 images, the first {near_copy_sheet.PER_ROW} drawn'
  record = _near(many, num_groups=1234)
  assert near_copy_sheet.title('/out', record) == (
      f'/out: near copies within 10 bits, 1,234 groups of {record.num_images} images, groups 1-20 of {len(many)} '
      'listed')


def test_a_readable_cell_shows_its_picture_and_an_unreadable_one_does_not(groups):
  sheet = near_copy_sheet.draw('title', groups[1:2])
  top, left = 40 + near_copy_sheet.HEADER, near_copy_sheet.GAP
  middle = contact_sheet.CELL // 2
  picture = sheet.getpixel((left + middle, top + middle))
  assert picture == (110, 145, 90)
  gone = sheet.crop((left + 2 * (contact_sheet.CELL + near_copy_sheet.GAP), top,
                     left + 2 * (contact_sheet.CELL + near_copy_sheet.GAP) + contact_sheet.CELL,
                     top + contact_sheet.CELL))
  assert (110, 145, 90) not in {colour for _, colour in gone.getcolors(contact_sheet.CELL ** 2)}
  assert len(gone.getcolors(contact_sheet.CELL ** 2)) > 1  # the word, on grey


def test_under_drop_the_cells_say_which_file_was_kept(groups):
  dropped = [{'images': group['images'], 'kept': group['images'][0]} for group in groups]
  assert [cell.status for cell in near_copy_sheet.cells(dropped[1])] == ['kept', 'removed', 'removed']
  buffer = io.BytesIO()
  near_copy_sheet.draw('title', dropped).save(buffer, format='PNG')
  assert buffer.getvalue().startswith(b'\x89PNG')


def test_duplicates_lists_the_exact_and_near_groups_with_their_splits(groups, tmp_path, capsys):
  exact = [('/in/x.jpg', '/in/y.jpg')]
  out = _output(tmp_path, _record(_near(groups), exact=exact))
  assert cli.main(['inspect', str(out), '--duplicates']) == 0
  printed = capsys.readouterr().out
  listing = printed[printed.index('Exact copies:'):].splitlines()
  assert listing[:4] == ['Exact copies: 1 group, 1 extra copy (each group in one split).', '  group 1',
                         '    /in/x.jpg', '    /in/y.jpg']
  assert listing[4] == 'Near copies (perceptual hashes within 10 bits): 3 groups of 7 images (each group in one split).'
  assert listing[5:8] == ['  group 1: train', f'    {groups[0]["images"][0]}', f'    {groups[0]["images"][1]}']
  assert '  group 2: validation, labels conflict' in listing
  assert f'    {groups[1]["images"][2]}' in listing and '  group 3: test' in listing


def test_duplicates_say_which_copy_was_kept_and_how_many_groups_are_not_listed(groups):
  dropped = [{'images': group['images'], 'kept': group['images'][1]} for group in groups]
  record = _record(_near(dropped, removed=True, num_groups=1003), exact=[('/in/x.jpg', '/in/y.jpg')], removed=True)
  lines = overview.duplicates(dataclasses.replace(record, duplicates=dataclasses.replace(record.duplicates,
                                                                                          num_groups=1001)))
  assert lines[:4] == [('Exact copies: 1,001 groups, 1 extra copy (--dedupe kept one of each, with the label most '
                        'copies give, removed the rest).'),
                       '  group 1', '    /in/x.jpg  kept', '    /in/y.jpg  removed']
  assert lines[4] == '  ... and 1,000 more groups, not listed (beam_pipeline.json lists the first 1)'
  assert lines[6:9] == ['  group 1', f'    {groups[0]["images"][0]}  removed', f'    {groups[0]["images"][1]}  kept']
  assert lines[-1] == '  ... and 1,000 more groups, not listed (beam_pipeline.json lists the first 3)'


def test_duplicates_name_each_copys_label_and_what_dedupe_did_with_it():
  """Group entries of this version: the copy kept with the label most copies give, and a group
  whose copies give no one label most, every copy rejected; conflicts marked."""
  exact = [{'images': ['/in/a.jpg', '/in/b.jpg', '/in/c.jpg'], 'labels': ['cat', 'dog', 'dog'], 'kept': '/in/b.jpg',
            'label_conflict': True},
           {'images': ['/in/d.jpg', '/in/e.jpg'], 'labels': ['cat', 'dog'], 'kept': None, 'label_conflict': True}]
  record = _record(exact=exact, removed=True)
  assert overview.duplicates(record)[1:9] == [
      '  group 1: labels conflict', '    /in/a.jpg  cat  removed', '    /in/b.jpg  dog  kept',
      '    /in/c.jpg  dog  removed', '  group 2: labels conflict', '    /in/d.jpg  cat  rejected (label_conflict)',
      '    /in/e.jpg  dog  rejected (label_conflict)', 'Near copies: not looked for (--near_copies=off, or an output '
      'written before they were).']


def test_without_near_copies_there_is_nothing_to_draw_and_the_command_says_why(tmp_path, capsys):
  out = _output(tmp_path, _record())
  sheet = tmp_path / 'near.png'
  assert cli.main(['inspect', str(out), f'--near_duplicates={sheet}']) == 2
  error = capsys.readouterr().err
  assert error == (f'error: {out} lists no near copies (converted with --near_copies=off, or by a version before '
                   'they were found): there are none to draw; leave out --near_duplicates\n')
  assert not sheet.exists()
  assert overview.duplicates(RunRecord.read(str(out)))[-1].startswith('Near copies: not looked for')


def test_the_help_says_how_many_groups_a_page_draws():
  inspect = arguments.parser()._subparsers._group_actions[0].choices['inspect']  # pylint: disable=protected-access
  assert f'{near_copy_sheet.ROWS} groups a page' in ' '.join(inspect.format_help().split())


def test_every_listed_group_is_on_a_page_and_each_tile_names_its_class(groups, tmp_path, capsys):
  """45 groups: three pages of 20, 20 and 5, titled with the groups each draws; a tile's second
  line is its file's class and its split."""
  labelled = [dict(group, labels=['cat'] * (len(group['images']) - 1) + ['dog']) for group in groups]
  many = labelled * 15
  out = _output(tmp_path, _record(_near(many)))
  sheet = tmp_path / 'near.png'
  assert cli.main(['inspect', str(out), f'--near_duplicates={sheet}']) == 0
  pages = [sheet, tmp_path / 'near-2.png', tmp_path / 'near-3.png']
  assert f'Near copies: {pages[0]} ... {pages[2]} (3 pages of 20 groups)' in capsys.readouterr().out
  row = near_copy_sheet.HEADER + contact_sheet.CELL + near_copy_sheet.CAPTION + near_copy_sheet.GAP
  assert [_height(page) for page in pages] == [40 + 20 * row, 40 + 20 * row, 40 + 5 * row]
  assert not (tmp_path / 'near-4.png').exists()
  record = _near(many)
  assert near_copy_sheet.title('/out', record, 3) == ('/out: near copies within 10 bits, 45 groups of 105 images, '
                                                      'groups 41-45 of 45 listed')
  assert [(cell.label, cell.status) for cell in near_copy_sheet.cells(labelled[1])] == [
      ('cat', 'validation'), ('cat', 'validation'), ('dog', 'validation')]
