"""Issue 35, second pass: checks that keep anything from being lost or leaked unsaid.

Each test runs the real command (in this process, as helpers.commands.convert does) and
looks at its exit code, its one error line and what it wrote.
"""
import json
import os
from typing import Dict, List, Tuple

import numpy as np
import pytest
import tensorflow as tf

from beam_pipeline import cli
from beam_pipeline.pipeline.listing import annotation_inputs
from beam_pipeline.core.images.formats import png_chunks

from helpers import dali, hostile_files, image_cases, photos
from helpers.commands import convert, error_line
from helpers.dataset_reader import read_errors, read_output


@pytest.fixture(scope='module')
def one_photo(tmp_path_factory):
  """A folder of one photo: enough input for a command that must stop before any work."""
  root = tmp_path_factory.mktemp('one-photo')
  photos.write_files(root / 'in', {'cat/1.jpg': photos.jpeg(1)})
  return root / 'in'


# Case 11: a numeric option out of its range stops the command at parse time (exit 2, one line),
# never a run that prints a progress line per microsecond or rejects every image.
@pytest.mark.parametrize('flag, message', [
    ('--progress_interval=0', '--progress_interval=0 must be a positive number'),
    ('--progress_interval=-5', '--progress_interval=-5 must be a positive number'),
    ('--progress_interval=inf', '--progress_interval=inf must be a positive number'),
    ('--progress_interval=often', '--progress_interval=often is not a number'),
    ('--read_threads=0', '--read_threads=0 must be a positive number'),
    ('--read_threads=0.5', '--read_threads=0.5 must be a whole number'),
    ('--embedding_batch_size=0', '--embedding_batch_size=0 must be a positive number'),
    ('--jpeg_quality=0', '--jpeg_quality=0 must be a positive number'),
    ('--jpeg_quality=101', '--jpeg_quality=101 must be at most 100'),
    ('--min_side=0', '--min_side=0 must be a positive number'),
    ('--image_size=0', '--image_size=0 must be a positive number'),
    ('--target_shard_mb=0', '--target_shard_mb=0 must be a positive number'),
    ('--target_shard_mb=-1', '--target_shard_mb=-1 must be a positive number'),
    ('--max_file_mb=0', '--max_file_mb=0 must be a positive number'),
    ('--max_error_fraction=-0.1', '--max_error_fraction=-0.1 must be between 0 and 1'),
    ('--max_error_fraction=1.5', '--max_error_fraction=1.5 must be between 0 and 1'),
    ('--max_pixels=0.5', '--max_pixels=0.5 must be a whole number'),
    ('--max_pixels=1e19', '--max_pixels=1e19 is too large'),
])
def test_a_numeric_option_out_of_range_stops_before_any_work(one_photo, tmp_path, capsys, flag, message):
  assert convert(f'--input={one_photo}', f'--output={tmp_path}/out', flag) == 2
  assert message in error_line(capsys.readouterr().err)
  assert not (tmp_path / 'out').exists()


@pytest.mark.parametrize('samples', ['0', '-3'])
def test_inspect_wants_a_positive_number_of_samples(tmp_path, capsys, samples):
  """A negative count failed inside Pillow with a traceback; 0 drew an empty sheet."""
  assert cli.main(['inspect', str(tmp_path), f'--samples={samples}', f'--contact_sheet={tmp_path}/sheet.png']) == 2
  assert (error_line(capsys.readouterr().err)
          == f"error: argument --samples: '{samples}' must be a positive whole number")


def _listed(record: dict, key: str) -> list:
  """A list feature of a record as read_output gives it (one value comes alone)."""
  value = record.get(key, [])
  return value if isinstance(value, list) else [value]


# Case 7: COCO and VOC numbers. An area is finite and within the stored image; a flag is 0 or 1,
# and anything else costs that object (a bad_annotation line), never the image.
def test_detection_areas_are_clipped_and_finite_and_flags_that_are_not_0_or_1_are_bad_annotations(tmp_path):
  photos.write_files(tmp_path / 'in', {'a.jpg': photos.jpeg(1, 60, 40), 'b.jpg': photos.jpeg(2, 60, 40)})
  coco = {'images': [{'id': 1, 'file_name': 'a.jpg', 'width': 60, 'height': 40},
                     {'id': 2, 'file_name': 'b.jpg', 'width': 60, 'height': 40}],
          'annotations': [
              {'id': 1, 'image_id': 1, 'category_id': 1, 'bbox': [10, 10, 1e9, 4e9]},  # no area: was 4e18
              {'id': 2, 'image_id': 1, 'category_id': 1, 'bbox': [0, 0, 5, 4], 'area': float('inf'), 'iscrowd': 1},
              {'id': 3, 'image_id': 1, 'category_id': 1, 'bbox': [1, 1, 5, 5], 'iscrowd': 'yes'},  # was 0
              {'id': 4, 'image_id': 2, 'category_id': 1, 'bbox': [5, 5, 30, 20], 'area': 400, 'iscrowd': '0'}],
          'categories': [{'id': 1, 'name': 'dog'}]}
  (tmp_path / 'coco.json').write_text(json.dumps(coco))  # inf as Infinity, which Python's json reads
  voc = ('<annotation><filename>a.jpg</filename><size><width>60</width><height>40</height></size>'
         '<object><name>cat</name><difficult>yes</difficult><bndbox><xmin>1</xmin><ymin>1</ymin><xmax>9</xmax>'
         '<ymax>9</ymax></bndbox></object>'
         '<object><name>cat</name><truncated>1</truncated><bndbox><xmin>40</xmin><ymin>20</ymin><xmax>90</xmax>'
         '<ymax>90</ymax></bndbox></object></annotation>')
  (tmp_path / 'voc').mkdir()
  (tmp_path / 'voc' / 'a.xml').write_text(voc)

  def objects(annotations: str, out: str) -> Tuple[Dict[str, list], List[dict]]:
    assert convert(f'--input={tmp_path}/in', f'--output={tmp_path}/{out}', f'--annotations={annotations}',
                   '--skip_transform') == 0
    _, records = read_output(str(tmp_path / out))
    found = {os.path.basename(r['image/filename'].decode()): list(zip(
        _listed(r, 'image/object/area'), _listed(r, 'image/object/is_crowd'), _listed(r, 'image/object/difficult'),
        _listed(r, 'image/object/truncated'))) for r in records['train']}
    return found, read_errors(str(tmp_path / out))

  found, errors = objects(f'{tmp_path}/coco.json', 'coco')
  assert found == {'a.jpg': [(50 * 30, 0, 0, 0), (20, 1, 0, 0)], 'b.jpg': [(400, 0, 0, 0)]}
  assert errors == [{'uri': f'{tmp_path}/coco.json', 'reason': 'bad_annotation',
                     'detail': 'annotation id 3: iscrowd "yes" is not 0 or 1'}]
  found, errors = objects(f'{tmp_path}/voc', 'voc-out')
  assert found == {'a.jpg': [(20 * 20, 0, 0, 1)], 'b.jpg': []}
  assert errors == [{'uri': f'{tmp_path}/voc', 'reason': 'bad_annotation',
                     'detail': f"{tmp_path}/voc/a.xml object 1: <difficult> 'yes' is not 0 or 1"}]


# Case 14: a manifest can name any file the process can read. The errors file never holds a
# byte of one that is no image, and --input_root refuses every file outside a folder.
@pytest.fixture(scope='module')
def reaching_manifest(tmp_path_factory):
  """A folder of images and, outside it, a text and a binary file a manifest in it names:
  by '../', by absolute path, and through a link in the folder."""
  top = tmp_path_factory.mktemp('reach')
  root = top / 'images'
  photos.write_files(root, {'cat/1.jpg': photos.jpeg(1), 'cat/2.jpg': photos.jpeg(2)})
  (top / 'secret.txt').write_text('root:x:0:0:root:/root:/bin/bash\n')
  (top / 'secret.bin').write_bytes(b'\x00SECRET\xff' * 10)
  (root / 'link.jpg').symlink_to(top / 'secret.txt')
  (root / 'inner-link.jpg').symlink_to(root / 'cat' / '2.jpg')
  rows = ['cat/1.jpg', '../secret.txt', str(top / 'secret.bin'), 'link.jpg', 'inner-link.jpg']
  (root / 'rows.jsonl').write_text(''.join(json.dumps({'uri': uri, 'label': 'cat'}) + '\n' for uri in rows))
  return top


def _outcomes(out) -> Dict[str, str]:
  """{file name: 'written' or its rejection reason}, and the errors file's details."""
  _, records = read_output(str(out))
  found = {os.path.basename(r['image/filename'].decode()): 'written' for r in records['train']}
  found.update({os.path.basename(e['uri']): e['reason'] for e in read_errors(str(out))})
  return found


def test_files_outside_the_images_are_read_unless_input_root_says_no_and_their_bytes_stay_out_of_errors(
    reaching_manifest, tmp_path):
  top = reaching_manifest
  manifest = f'--input={top}/images/rows.jsonl'
  assert convert(manifest, f'--output={tmp_path}/open', '--skip_transform', '--max_error_fraction=1') == 0
  assert _outcomes(tmp_path / 'open') == {'1.jpg': 'written', 'inner-link.jpg': 'written', 'secret.txt': 'not_image',
                                          'secret.bin': 'not_image', 'link.jpg': 'not_image'}
  details = {os.path.basename(e['uri']): e['detail'] for e in read_errors(str(tmp_path / 'open'))}
  assert details == {'secret.txt': 'not a recognised image format (32 bytes of text)',
                     'secret.bin': 'not a recognised image format (80 bytes of binary data)',
                     'link.jpg': 'not a recognised image format (32 bytes of text)'}
  errors_file = (tmp_path / 'open' / 'errors-00000-of-00001.jsonl').read_text()
  for leaked in ('root:x', b'root:x:0'.hex(), 'SECRET', b'\x00SECRET'.hex()):
    assert leaked not in errors_file

  assert convert(manifest, f'--output={tmp_path}/kept', f'--input_root={top}/images', '--skip_transform',
                 '--max_error_fraction=1') == 0
  assert _outcomes(tmp_path / 'kept') == {'1.jpg': 'written', 'inner-link.jpg': 'written',
                                          'secret.txt': 'outside_input_root', 'secret.bin': 'outside_input_root',
                                          'link.jpg': 'outside_input_root'}
  details = {os.path.basename(e['uri']): e['detail'] for e in read_errors(str(tmp_path / 'kept'))}
  assert details['link.jpg'] == f'not in --input_root={top}/images (it leads to {top}/secret.txt)'
  info = json.loads((tmp_path / 'kept' / 'beam_pipeline.json').read_text())
  assert info['options']['input_root'] == f'{top}/images' and info['errors_by_reason'] == {'outside_input_root': 3}


def test_files_outside_input_root_spend_the_error_budget(reaching_manifest, tmp_path, capsys):
  top = reaching_manifest
  assert convert(f'--input={top}/images/rows.jsonl', f'--output={tmp_path}/out', f'--input_root={top}/images',
                 '--skip_transform', '--max_error_fraction=0.5') == 1
  assert 'outside_input_root 3' in error_line(capsys.readouterr().err)


@pytest.mark.parametrize('root, message', [
    ('missing', '--input_root={top}/missing is not a folder'),
    ('elsewhere', '--input_root={top}/elsewhere: --input={top}/images is not in it'),
])
def test_an_input_root_that_cannot_hold_the_input_stops_before_any_work(reaching_manifest, tmp_path, capsys, root,
                                                                        message):
  top = reaching_manifest
  (top / 'elsewhere').mkdir(exist_ok=True)
  assert convert(f'--input={top}/images', f'--output={tmp_path}/out', f'--input_root={top}/{root}') == 2
  assert message.format(top=top) in error_line(capsys.readouterr().err)


# Case 10: --max_pixels above Pillow's own guard (twice Image.MAX_IMAGE_PIXELS, about 179M) is the
# limit, in the processes that open images; what is refused is refused in the option's terms.
def test_max_pixels_above_pillows_own_limit_is_the_limit_and_refusals_quote_it(tmp_path):
  headers = {'195-megapixels.png': (15000, 13000), '500-megapixels.png': (20000, 25000),
             '900-megapixels.png': (30000, 30000)}
  photos.write_files(tmp_path / 'in', {f'x/{name}': hostile_files.png_with_size(*size)
                                       for name, size in headers.items()})
  photos.write_files(tmp_path / 'in', {'x/photo.jpg': photos.jpeg(1)})
  assert convert(f'--input={tmp_path}/in', f'--output={tmp_path}/out', '--max_pixels=400000000',
                 '--skip_transform', '--max_error_fraction=1') == 0
  details = {os.path.basename(e['uri']): (e['reason'], e['detail']) for e in read_errors(str(tmp_path / 'out'))}
  # Past the size check, this header's file (its pixels are those of an 8x8 PNG) fails to decode.
  assert details['195-megapixels.png'][0] == 'corrupt'
  assert details['500-megapixels.png'] == ('too_many_pixels', '20000x25000 pixels exceeds --max_pixels=400000000')
  assert details['900-megapixels.png'] == ('too_many_pixels', '900000000 pixels exceeds --max_pixels=400000000')


# Case 12 (part): a COCO file that is not COCO as a whole is the user's mistake, said in one line
# with exit 2: at launch where the file is small, else when the worker reads it; never "a bug".
@pytest.mark.parametrize('document, cause', [
    ('{"images": [', 'is not valid JSON (Expecting value: line 1 column 13 (char 12)); fix it, or export it again'),
    ('{"images": 3, "annotations": []}', "is not a COCO instances file: it has a number as its 'images', not a list; "
                                          'give a COCO instances file: a JSON object with the lists images, '
                                          'annotations and categories'),
])
@pytest.mark.parametrize('checked', ['at_launch', 'by_the_worker'])
def test_a_coco_file_that_is_not_coco_stops_the_run_in_one_line_naming_it(one_photo, tmp_path, capsys, monkeypatch,
                                                                         document, cause, checked):
  if checked == 'by_the_worker':  # as a file too large to read at launch is
    monkeypatch.setattr(annotation_inputs, 'LAUNCH_CHECK_BYTES', 0)
  (tmp_path / 'instances.json').write_text(document)
  assert convert(f'--input={one_photo}', f'--output={tmp_path}/out', f'--annotations={tmp_path}/instances.json',
                 '--skip_transform') == 2
  stderr = capsys.readouterr().err
  assert error_line(stderr) == f'error: --annotations={tmp_path}/instances.json {cause}'
  assert 'bug' not in stderr and not (tmp_path / 'out' / 'beam_pipeline.json').exists()


# Case 8: identical files listed under different labels. --dedupe keeps one of them; the errors
# line of the other says the labels conflicted, the run record counts such groups (with or
# without --dedupe), and the summary says so in one line.
@pytest.fixture(scope='module')
def conflicting_labels(tmp_path_factory):
  """a.jpg and b.jpg are one picture, as 'dog' and as 'cat'; d.jpg and e.jpg one picture, both 'dog'."""
  root = tmp_path_factory.mktemp('conflicts') / 'in'
  same, other = photos.jpeg(1), photos.jpeg(3)
  photos.write_files(root, {'a.jpg': same, 'b.jpg': same, 'c.jpg': photos.jpeg(2), 'd.jpg': other, 'e.jpg': other})
  rows = [('a.jpg', 'dog'), ('b.jpg', 'cat'), ('c.jpg', 'cat'), ('d.jpg', 'dog'), ('e.jpg', 'dog')]
  (root / 'rows.jsonl').write_text(''.join(json.dumps({'uri': uri, 'label': label}) + '\n' for uri, label in rows))
  return root


@pytest.mark.parametrize('dedupe', [True, False], ids=['dedupe', 'kept'])
def test_copies_with_conflicting_labels_are_counted_and_said(conflicting_labels, tmp_path, capsys, dedupe):
  root, out = conflicting_labels, tmp_path / 'out'
  assert convert(f'--input={root}/rows.jsonl', f'--output={out}', '--skip_transform',
                 *(['--dedupe', '--max_error_fraction=0.5'] if dedupe else [])) == 0
  info, records = read_output(str(out))
  assert info['duplicates']['num_label_conflicts'] == 1 and info['duplicates']['num_groups'] == 2
  said = [line for line in capsys.readouterr().out.splitlines() if 'Conflicting labels' in line]
  if dedupe:  # a dog and a cat: no label is given most, and neither copy is kept
    conflict = ("under other labels ('cat' by 1; 'dog' by 1): no one label is given most, so --dedupe keeps none; "
                'give the copies one label, or remove those wrongly labelled')
    assert read_errors(str(out)) == [
        {'uri': f'{root}/a.jpg', 'reason': 'label_conflict', 'detail': f'the same picture as {root}/b.jpg {conflict}'},
        {'uri': f'{root}/b.jpg', 'reason': 'label_conflict', 'detail': f'the same picture as {root}/a.jpg {conflict}'},
        {'uri': f'{root}/e.jpg', 'reason': 'duplicate',
         'detail': f'same content as {root}/d.jpg (--dedupe keeps one copy)'}]
    assert said == ['Conflicting labels in 1 group of identical files (--dedupe kept a copy with the label most copies '
                    'give, and none where no one label is given most: label_conflict; the errors file names them).']
    assert sorted(r['image/class/text'].decode() for r in records['train']) == ['cat', 'dog']
  else:
    assert sorted(r['image/class/text'].decode() for r in records['train']) == ['cat', 'cat', 'dog', 'dog', 'dog']
    assert said == ['Conflicting labels in 1 group of identical files (each copy kept with its own label: training '
                    'sees one picture as different classes).']


# Case 16: an animated PNG (any acTL, fcTL or fdAT chunk) is stored as a still PNG of its default
# image, the frame TensorFlow decodes, pixel for pixel, so that NVIDIA DALI decodes it too.
@pytest.fixture(scope='module')
def apng_output(tmp_path_factory):
  root = tmp_path_factory.mktemp('apng')
  photos.write_files(root / 'in', {f'apng/{name}': case.data for name, case in image_cases.apng_cases().items()})
  assert convert(f'--input={root}/in', f'--output={root}/out', '--index_files', '--skip_transform') == 0
  return root / 'out'


def test_animated_pngs_are_stored_as_a_still_png_of_the_frame_tensorflow_decodes(apng_output):
  info, records = read_output(str(apng_output))
  cases = image_cases.apng_cases()
  stored = {os.path.basename(r['image/filename'].decode()): r for r in records['train']}
  assert sorted(stored) == sorted(cases) and info['num_reencoded'] == len(cases)
  for name, case in cases.items():
    data = stored[name]['image/encoded']
    assert stored[name]['image/format'] == b'png' and not png_chunks.verify(data).animated, name
    for channels in (0, 3):
      original = tf.io.decode_image(case.data, channels=channels, expand_animations=False).numpy()
      decoded = tf.io.decode_image(data, channels=channels, expand_animations=False).numpy()
      assert np.array_equal(decoded, original), name


@pytest.mark.skipif(not dali.installed(), reason='make dali (make test does) installs NVIDIA DALI')
def test_nvidia_dali_decodes_every_animated_png_record(apng_output):
  """DALI's PNG decoder stopped on APNGs stored as they were ('IEND: out of place', no frames)."""
  sizes = dali.decoded_sizes(str(apng_output))
  assert sorted(os.path.basename(name) for name in sizes) == sorted(image_cases.apng_cases())
  assert all(decoded == recorded for decoded, recorded in sizes.values())
