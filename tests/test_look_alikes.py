"""A collection of look-alikes end to end (issue 59): 20,000 frames of two fixed cameras, each
frame its camera's smooth scene with five noisy pixels, so that most pairs of one camera's frames
lie within the near-copy distance (a list of them would hold about 100 million pairs; a run once
died of it at 23 GB). Converted with the defaults and split 80/20: every frame is written, the
frames are sets of look-alikes, too large to keep whole in one split, so each split keeps its
share, and the summary says the collection mostly looks alike; a photo and its re-saved copy
among them are still one group."""
import json

from beam_pipeline.core.output.run_record import RunRecord
from beam_pipeline.synthetic import image_files, look_alike_frames, natural_photos, near_copy_kinds
from helpers.commands import convert
from test_near_duplicates import splits_of

FRAMES = 20_000


def test_twenty_thousand_frames_of_two_cameras_split_80_20_as_look_alikes(tmp_path_factory, capfd):
  root = tmp_path_factory.mktemp('look-alikes') / 'in'
  counts = look_alike_frames.write_frames(root, FRAMES, 2)
  photo = image_files.encode(natural_photos.photo(7, 320, 240), 'JPEG', quality=90)
  (root / 'camera_0' / 'photo.jpg').write_bytes(photo)
  (root / 'camera_0' / 'photo-copy.jpg').write_bytes(near_copy_kinds.copy(photo, 'JPEG quality 35-70', 7))
  output = tmp_path_factory.mktemp('out')
  capfd.readouterr()
  assert convert(f'--input={root}', f'--output={output}', '--splits=train=0.8,validation=0.2') == 0
  printed = capfd.readouterr().out
  info = RunRecord.read(str(output))
  assert info.num_examples == FRAMES + 2 and info.num_errors == 0
  near = info.near_duplicates
  assert near.largest_group == 40
  assert near.left_out['look_alike_images'] > FRAMES // 2 and near.left_out['look_alike_sets'] >= 2
  assert 'Most of this collection looks alike' in printed and 'look-alikes' in printed
  for label, frames in counts.items():
    assert abs(info.splits['validation'].classes[label] / frames - 0.2) < 0.01
  splits = splits_of(output, root)
  assert splits['camera_0/photo.jpg'] == splits['camera_0/photo-copy.jpg']
  grouped = {tuple(sorted(group['images'])) for group in near.groups}
  assert (str(root / 'camera_0/photo-copy.jpg'), str(root / 'camera_0/photo.jpg')) in grouped
  assert all(len(group['images']) <= near.largest_group for group in near.groups)
  assert json.loads((output / 'beam_pipeline.json').read_text())['near_duplicates']['largest_group'] == 40
